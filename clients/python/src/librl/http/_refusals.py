"""The responses the middleware makes itself (docs/http.md, Refusals):
RFC 9457 problem bodies with their exact ``detail``, or, as ``deny`` and
``fail_deny`` say, a text or JSON body of the configuration's, with its
extra headers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

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
    if shape.body == "text" or shape.body == "json":
        return refused(shape, lambda: _denial_problem(shape.status, policy, reply, cost))
    # refused() of a problem body, without its closure and call.
    denial = _denial_problem(shape.status, policy, reply, cost)
    if shape.headers:
        denial.headers.extend(shape.headers)
    return denial


def _denial_problem(status: int, policy: Policy, reply: Decision, cost: int) -> Reply:
    limit = shown_limit(policy, reply)
    retry_s = retry_after_s(reply)
    if retry_s is not None:
        # The common denial: the body around its two numbers is made once.
        key = (status, policy.name, policy.algorithm, policy.window_ms, limit)
        template = _TEMPLATES.get(key)
        if template is None:
            template = _denial_template(status, policy, limit)
            if len(_TEMPLATES) >= _TEMPLATES_SIZE:
                _TEMPLATES.clear()  # limits from resolvers: start again rather than grow
            _TEMPLATES[key] = template
        head, middle = template
        body = f"{head}{retry_s}{middle}{reply.retry_after_ms}}}".encode()
        return Reply(status, [("Content-Type", PROBLEM_JSON)], body)
    return _denial_problem_of(status, policy, reply, cost, limit, retry_s)


#: A denial's problem body before and after its Retry-After seconds, by
#: what the rest of it says (status, policy, window, limit shown).
_TEMPLATES: Dict[Tuple[int, str, str, int, int], Tuple[str, str]] = {}
_TEMPLATES_SIZE = 1024


def _denial_template(status: int, policy: Policy, limit: int) -> Tuple[str, str]:
    """The body _denial_problem_of makes for a denial with a wait, cut
    where its two numbers go: the seconds in ``detail`` and the
    milliseconds of ``retry_after``, the body's last member (JSON escapes
    each character alone, so the pieces are the whole body's)."""
    named, verb, _ = _named(policy, limit)
    head = _COMPACT.encode(
        {
            "type": "about:blank",
            "title": "Too Many Requests",
            "status": status,
            "detail": f"{named[0].upper()}{named[1:]} {verb}; retry in ",
        }
    )
    tail = _COMPACT.encode(
        {"detail": " s.", "policy": policy.name, "limit": limit, "retry_after": 0}
    )
    # head ends with the detail's closing quote and }; tail starts {"detail":" and ends with 0}.
    return head[:-2], tail[len('{"detail":"') : -2]


def _named(policy: Policy, limit: int) -> Tuple[str, str, str]:
    """How a denial's detail names its policy, its verb, and the end of
    the detail of a request that no wait helps."""
    if policy.algorithm == "concurrency":
        # Slots held at once: no window (docs/http.md, Concurrency limits).
        return f'concurrency limit "{policy.name}" ({limit} at once)', "reached", "ever admits."
    named = f'rate limit "{policy.name}" ({limit} per {_window(policy.window_ms)})'
    return named, "exceeded", "ever admits at once."


def _denial_problem_of(
    status: int, policy: Policy, reply: Decision, cost: int, limit: int, retry_s: Optional[int]
) -> Reply:
    named, verb, ever = _named(policy, limit)
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
