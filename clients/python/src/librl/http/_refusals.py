"""The responses the middleware makes itself (docs/http.md, Refusals):
RFC 9457 problem bodies with their exact ``detail``, or, as ``deny`` and
``fail_deny`` say, a text or JSON body of the configuration's, with its
extra headers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

from .._types import Decision
from ._configuration import FAIL_DENY, Config, Policy, Refusal
from ._headers import retry_after_s, shown_limit

PROBLEM_JSON = "application/problem+json"
JSON = "application/json"

#: json.dumps with separators makes an encoder per call; a refusal reuses one.
_COMPACT = json.JSONEncoder(separators=(",", ":"))

_TITLES = {
    400: "Bad Request",
    413: "Content Too Large",
    429: "Too Many Requests",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class Reply:
    """A response the middleware makes itself (a refusal)."""

    status: int
    headers: List[Tuple[str, str]]
    body: bytes


def problem(status: int, detail: str, title: Optional[str] = None, **extra: Any) -> Reply:
    """An RFC 9457 problem response."""
    body = {
        "type": "about:blank",
        "title": title or _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        **extra,
    }
    return Reply(status, [("Content-Type", PROBLEM_JSON)], _COMPACT.encode(body).encode())


def refused(refusal: Refusal, make_problem: Callable[[], Reply]) -> Reply:
    """``refusal``'s response: its text or JSON body, or the problem
    ``make_problem`` makes; its extra headers besides."""
    if refusal.body == "text":
        reply = Reply(refusal.status, [("Content-Type", refusal.content_type)], refusal.payload)
    elif refusal.body == "json":
        reply = Reply(refusal.status, [("Content-Type", JSON)], refusal.payload)
    else:
        reply = make_problem()
    if refusal.headers:
        reply.headers.extend(refusal.headers)
    return reply


def denied(
    config: Config,
    policy: Policy,
    reply: Decision,
    cost: int,
    refusal: Optional[Refusal] = None,
) -> Reply:
    """The denial by the most restrictive policy, as ``refusal`` (the
    route's, else ``deny``) says: ``deny.status`` with a problem body
    naming the policy, or the configuration's text or JSON body. The
    rate-limit headers are the caller's to add."""
    shape = refusal or config.deny
    return refused(shape, lambda: _denial_problem(shape.status, policy, reply, cost))


def _denial_problem(status: int, policy: Policy, reply: Decision, cost: int) -> Reply:
    limit = shown_limit(policy, reply)
    retry_s = retry_after_s(reply)
    if policy.algorithm == "concurrency":
        # Slots held at once: no window (docs/http.md, Concurrency limits).
        named = f'concurrency limit "{policy.name}" ({limit} at once)'
        verb, ever = "reached", "ever admits."
    else:
        named = f'rate limit "{policy.name}" ({limit} per {_window(policy.window_ms)})'
        verb, ever = "exceeded", "ever admits at once."
    if retry_s is not None:
        detail = f"{named[0].upper()}{named[1:]} {verb}; retry in {retry_s} s."
    else:
        detail = f"This request costs {cost}, more than {named} {ever}"
    return problem(
        status,
        detail,
        title="Too Many Requests",
        policy=policy.name,
        limit=limit,
        retry_after=reply.retry_after_ms if reply.retry_after_ms >= 0 else None,
    )


def bad_cost(policy: Policy) -> Reply:
    """400: the cost header of ``policy``, or its cost resolver, gave no
    integer from 1 to 2^50."""
    if policy.cost_resolver is not None:
        detail = f'The cost "{policy.cost_resolver[0]}" must be an integer from 1 to 2^50.'
    else:
        detail = f"{policy.cost_header} must be an integer from 1 to 2^50."
    return problem(400, detail, policy=policy.name)


def too_large(max_body_bytes: int) -> Reply:
    """413: the body exceeds ``max_body_bytes``."""
    return problem(413, f"The body may be at most {max_body_bytes} bytes.")


def unavailable(refusal: Refusal = FAIL_DENY) -> Reply:
    """Redis cannot answer and the fail mode is closed: ``fail_deny``'s
    refusal (by default the 503 problem)."""
    return refused(
        refusal,
        lambda: problem(
            refusal.status,
            "The rate limiter is unavailable, and this service does not admit unlimited requests.",
            title="Service Unavailable",
        ),
    )


def _window(ms: int) -> str:
    """A window in a denial's detail: whole seconds, else milliseconds."""
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"
