"""The typed replies: one limiter's Decision, RL.ALL's AllDecision, overrides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

from redis.exceptions import InvalidResponse

#: A key as redis-py takes it.
KeyT = Union[str, bytes]


@dataclass(frozen=True)
class Decision:
    """The six-integer reply of RL.FIXED, RL.SLIDING and RL.TOKEN.

    ``bool(decision)`` is ``decision.allowed``.
    """

    #: True if this call was admitted and its cost recorded.
    allowed: bool
    #: Units counted against the limit after this call (TOKEN: capacity - tokens).
    count: int
    #: ms until a call with the same cost would be admitted; 0 when admitted;
    #: -1 when the cost exceeds the effective limit (no wait helps). With
    #: RESERVE, an admitted call's wait before acting.
    retry_after_ms: int
    #: The effective limit (after any override); for TOKEN the capacity.
    limit: int
    #: max(0, limit - count).
    remaining: int
    #: ms until the limiter is back to empty (TOKEN: full).
    reset_after_ms: int

    def __bool__(self) -> bool:
        return self.allowed


@dataclass(frozen=True)
class AllDecision:
    """RL.ALL's reply: the all-or-nothing verdict and one Decision per clause,
    in the order the clauses were given.

    ``bool(decision)`` is ``decision.allowed``.
    """

    allowed: bool
    #: 0 when admitted, else the largest retry_after_ms of the denying
    #: clauses, or -1 if any of them is -1.
    retry_after_ms: int
    decisions: Tuple[Decision, ...]

    def __bool__(self) -> bool:
        return self.allowed


@dataclass(frozen=True)
class Override:
    """What ``RL.OVERRIDE GET`` replies for an existing override."""

    limit: int
    window_ms: int
    #: None when the override has no burst (the server's 0).
    burst: Optional[int]
    #: Remaining life in ms, or None when the override has no TTL (the server's -1).
    ttl_ms: Optional[int]


@dataclass(frozen=True)
class OverrideEntry:
    """One item of ``RL.OVERRIDE LIST``: an override and its key.

    ``okey`` is bytes or str, as the client returns keys (``decode_responses``).
    """

    okey: KeyT
    limit: int
    window_ms: int
    burst: Optional[int]
    ttl_ms: Optional[int]


class DurabilityError(Exception):
    """A durable limiter's call took effect on the primary, but fewer replicas
    than asked acknowledged it within the timeout (``WAIT`` replied
    ``replicas``). ``reply`` is the call's result, as it stands on the
    primary: the caller decides whether to act on it."""

    def __init__(self, reply: Any, replicas: int, numreplicas: int, timeout_ms: int) -> None:
        super().__init__(
            f"librl: {replicas} of {numreplicas} replicas acknowledged the call within "
            f"{timeout_ms} ms (WAIT {numreplicas} {timeout_ms}); the primary has it"
        )
        self.reply = reply
        self.replicas = replicas


def _unexpected(what: str, reply: Any) -> InvalidResponse:
    return InvalidResponse(f"librl: unexpected reply to {what}: {reply!r}")


_new = object.__new__


def parse_decision(reply: Any, what: str = "a limiter call") -> Decision:
    try:
        allowed, count, retry, limit, remaining, reset = reply
        # Decision(...) without the frozen dataclass's per-field
        # object.__setattr__: this runs once per call.
        decision: Decision = _new(Decision)
        decision.__dict__.update(
            allowed=allowed == 1,
            count=int(count),
            retry_after_ms=int(retry),
            limit=int(limit),
            remaining=int(remaining),
            reset_after_ms=int(reset),
        )
        return decision
    except (TypeError, ValueError):
        raise _unexpected(what, reply) from None


def parse_all(reply: Any) -> AllDecision:
    try:
        allowed, retry, *clauses = reply
        return AllDecision(
            bool(allowed),
            int(retry),
            tuple(parse_decision(clause, "RL.ALL") for clause in clauses),
        )
    except (TypeError, ValueError):
        raise _unexpected("RL.ALL", reply) from None


def parse_override(reply: Any) -> Optional[Override]:
    if reply is None:
        return None
    try:
        limit, window_ms, burst, ttl_ms = (int(x) for x in reply)
    except (TypeError, ValueError):
        raise _unexpected("RL.OVERRIDE GET", reply) from None
    return Override(limit, window_ms, burst or None, None if ttl_ms < 0 else ttl_ms)


def parse_list(reply: Any) -> Tuple[int, list[OverrideEntry]]:
    try:
        cursor, items = reply
        entries = []
        for okey, limit, window_ms, burst, ttl_ms in items:
            ttl = int(ttl_ms)
            entries.append(
                OverrideEntry(
                    okey, int(limit), int(window_ms), int(burst) or None, None if ttl < 0 else ttl
                )
            )
        return int(cursor), entries
    except (TypeError, ValueError):
        raise _unexpected("RL.OVERRIDE LIST", reply) from None
