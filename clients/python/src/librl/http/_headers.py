"""The rate-limit headers (docs/http.md, Headers): every checked policy in
RateLimit-Policy, the most restrictive one in RateLimit and
X-RateLimit-* (or draft 6's RateLimit-*), and Retry-After on a denial."""

from __future__ import annotations

import math
import time
from typing import List, Optional, Sequence, Tuple

from .._types import Decision
from ._configuration import Config, Policy

#: Every header rate_limit_headers makes, by its lower-case name.
HEADER_NAMES = frozenset(
    (
        "ratelimit-policy",
        "ratelimit",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "ratelimit-limit",
        "ratelimit-remaining",
        "ratelimit-reset",
        "retry-after",
    )
)


def response_headers(
    config: Config,
    policies: Sequence[Policy],
    replies: Sequence[Decision],
    denied: bool,
    now_ms: Optional[int] = None,
    mode: Optional[str] = None,
) -> Tuple[int, List[Tuple[str, str]]]:
    """The most restrictive policy's index and the headers of a checked
    request, which an enforced group ``denied`` or not: Retry-After only on
    a refusal, which shadow mode never makes. ``now_ms``: the clock, Unix
    milliseconds, for ``legacy_reset: unix`` (default: now); ``mode``: the
    request's (a mode resolver's), else the configuration's."""
    refused = denied and (mode or config.mode) != "shadow"
    # A refusal names a policy that refused it: an enforced one.
    worst = most_restrictive(replies, policies if refused else None)
    if config.legacy_reset == "unix" and now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    return worst, rate_limit_headers(
        config.headers,
        policies,
        replies,
        worst,
        refused,
        now_ms if config.legacy_reset == "unix" else None,
    )


def rate_limit_headers(
    style: str,
    policies: Sequence[Policy],
    replies: Sequence[Decision],
    worst: int,
    refused: bool,
    unix_now_ms: Optional[int] = None,
) -> List[Tuple[str, str]]:
    """The headers of a checked request: ``style`` is the configuration's
    ``headers``; ``replies`` one per policy, in check order; ``worst`` the
    most restrictive; ``refused`` adds Retry-After (when a wait helps);
    ``unix_now_ms``: X-RateLimit-Reset is the Unix time of the reset
    (``legacy_reset: unix``), from this clock."""
    reply, policy = replies[worst], policies[worst]
    items = None
    if style in ("both", "ietf"):
        if len(policies) == 1:
            items = f"{policy.item_head}{shown_limit(policy, reply)}{policy.item_tail}"
        else:
            items = ", ".join(
                f"{p.item_head}{shown_limit(p, r)}{p.item_tail}" for p, r in zip(policies, replies)
            )
    return headers_of(
        style,
        policy,
        items,
        shown_limit(policy, reply),
        reply.remaining,
        reply.reset_after_ms,
        retry_after_s(reply) if refused else None,
        unix_now_ms,
    )


def headers_of(
    style: str,
    policy: Policy,
    items: Optional[str],
    limit: int,
    remaining: int,
    reset_after_ms: int,
    retry_s: Optional[int],
    unix_now_ms: Optional[int],
) -> List[Tuple[str, str]]:
    """rate_limit_headers from the most restrictive ``policy``'s numbers:
    ``items`` is RateLimit-Policy's value (``both`` and ``ietf``),
    ``limit`` the limit shown, ``retry_s`` a refusal's Retry-After."""
    out: List[Tuple[str, str]] = []
    reset = ceil_s(reset_after_ms)
    if items is not None:
        out.append(("RateLimit-Policy", items))
        out.append(("RateLimit", f'"{policy.name}";r={remaining};t={reset}'))
    if style in ("both", "legacy"):
        legacy_reset = reset if unix_now_ms is None else ceil_s(unix_now_ms + reset_after_ms)
        out += legacy_headers(limit, remaining, legacy_reset)
    elif style == "draft6":
        window = "" if policy.algorithm == "concurrency" else f";w={policy.window_s}"
        out.append(("RateLimit-Limit", str(limit)))
        out.append(("RateLimit-Remaining", str(remaining)))
        out.append(("RateLimit-Reset", str(reset)))
        out.append(("RateLimit-Policy", f"{limit}{window}"))
    if retry_s is not None:
        out.append(("Retry-After", str(retry_s)))
    return out


def legacy_headers(limit: int, remaining: int, reset: int) -> List[Tuple[str, str]]:
    """X-RateLimit-Limit, -Remaining and -Reset (``reset`` as sent:
    seconds from now, or a Unix time; docs/http.md, Headers)."""
    return [
        ("X-RateLimit-Limit", str(limit)),
        ("X-RateLimit-Remaining", str(remaining)),
        ("X-RateLimit-Reset", str(reset)),
    ]


def served_headers(
    config: Config, policy: Policy, limit: int, remaining: int, reset_after_ms: int
) -> List[Tuple[str, str]]:
    """The headers of a request ``policy`` alone checked and admitted,
    from its reply's limit, remaining and reset."""
    style = config.headers
    if style == "none":
        return []
    shown = shown_of(policy, limit)
    if style == "legacy" and config.legacy_reset != "unix":
        # Straight to the three: headers_of's branches skipped on every
        # admitted request of the commonest style.
        return legacy_headers(shown, remaining, ceil_s(reset_after_ms))
    items = f"{policy.item_head}{shown}{policy.item_tail}" if style in ("both", "ietf") else None
    unix_now_ms = time.time_ns() // 1_000_000 if config.legacy_reset == "unix" else None
    return headers_of(style, policy, items, shown, remaining, reset_after_ms, None, unix_now_ms)


def shown_limit(policy: Policy, reply: Decision) -> int:
    """The limit the headers show: a token policy's rate per window (its
    reply's limit is the capacity), unless an override changed it."""
    return shown_of(policy, reply.limit)


def shown_of(policy: Policy, limit: int) -> int:
    """shown_limit of a reply whose limit is ``limit``."""
    if policy.algorithm == "token" and policy.burst is not None and limit == policy.burst:
        return policy.limit
    return limit


def most_restrictive(
    replies: Sequence[Decision], enforced_of: Optional[Sequence[Policy]] = None
) -> int:
    """The denying reply with the longest wait (-1, never, is the longest)
    — with ``enforced_of`` (a refused request's policies), among the
    enforced policies' only; else the smallest share of its limit left,
    then the later reset, then the first."""
    if len(replies) == 1:
        return 0  # one policy: the commonest case, whatever it answered
    denied = [
        i
        for i, r in enumerate(replies)
        if not r.allowed and (enforced_of is None or not enforced_of[i].shadow)
    ]
    if denied:
        return max(
            denied,
            key=lambda i: (
                math.inf if replies[i].retry_after_ms < 0 else replies[i].retry_after_ms,
                -i,
            ),
        )
    best = 0
    for i in range(1, len(replies)):
        a, b = replies[i], replies[best]
        # remaining/limit compared without division.
        left_a, left_b = a.remaining * b.limit, b.remaining * a.limit
        if left_a < left_b or (left_a == left_b and a.reset_after_ms > b.reset_after_ms):
            best = i
    return best


def retry_after_s(reply: Decision) -> Optional[int]:
    """Retry-After: whole seconds until the request may succeed, at least
    1; None when no wait helps (the cost exceeds the limit)."""
    return max(1, ceil_s(reply.retry_after_ms)) if reply.retry_after_ms >= 0 else None


def ceil_s(ms: int) -> int:
    """Milliseconds as seconds, rounded up (1 ms is 1 s, 0 is 0)."""
    return -(-ms // 1000) if ms > 0 else 0
