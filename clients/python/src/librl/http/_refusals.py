"""The responses the middleware makes itself (docs/http.md, Refusals):
RFC 9457 problem bodies with their exact ``detail``, or the deny message
as text."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

from .._types import Decision
from ._configuration import Config, Policy
from ._headers import retry_after_s, shown_limit

PROBLEM_JSON = "application/problem+json"
TEXT_PLAIN = "text/plain; charset=utf-8"

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


def denied(config: Config, policy: Policy, reply: Decision, cost: int) -> Reply:
    """The denial by the most restrictive policy: ``deny.status`` with a
    problem body naming it, or the deny message as text. The rate-limit
    headers are the caller's to add."""
    if config.deny_body == "text":
        return Reply(
            config.deny_status, [("Content-Type", TEXT_PLAIN)], config.deny_message.encode()
        )
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
        config.deny_status,
        detail,
        title="Too Many Requests",
        policy=policy.name,
        limit=limit,
        retry_after=reply.retry_after_ms if reply.retry_after_ms >= 0 else None,
    )


def bad_cost(policy: Policy) -> Reply:
    """400: the cost header of ``policy`` is not an integer from 1 to 2^50."""
    return problem(
        400, f"{policy.cost_header} must be an integer from 1 to 2^50.", policy=policy.name
    )


def too_large(max_body_bytes: int) -> Reply:
    """413: the body exceeds ``max_body_bytes``."""
    return problem(413, f"The body may be at most {max_body_bytes} bytes.")


def unavailable() -> Reply:
    """503: Redis cannot answer and the fail mode is closed."""
    return problem(
        503,
        "The rate limiter is unavailable, and this service does not admit unlimited requests.",
    )


def _window(ms: int) -> str:
    """A window in a denial's detail: whole seconds, else milliseconds."""
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"
