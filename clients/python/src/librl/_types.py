"""The typed replies: one limiter's Decision, RL.ALL's AllDecision, overrides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

from redis.exceptions import InvalidResponse

#: A key as redis-py takes it.
KeyT = Union[str, bytes]


@dataclass(frozen=True)
class Decision:
    """A limiter's reply: RL.FIXED, RL.SLIDING, RL.TOKEN and RL.CONCURRENT,
    and each clause of RL.ALL.

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
    #: ms until the limiter is back to empty (TOKEN: full; CONCURRENT: until
    #: the last lease ends).
    reset_after_ms: int
    #: RL.CONCURRENT (and RL.ALL's CONCURRENT clauses): the lease this call
    #: took, released or renewed, a positive int below 2**53; 0 when it holds
    #: none (refused, PEEK, COST 0, off mode, a lease not held). 0 for the
    #: other limiters.
    lease_id: int = 0

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


class LeaseRefused(Exception):
    """``limiter.concurrent(...)`` could not take its slots: the limit is
    full (with ``wait=``, it stayed full that long). ``decision`` is the
    refusal: ``retry_after_ms`` is the least wait after which enough leases
    end by themselves (a release may free a slot sooner), -1 when the cost
    exceeds the limit."""

    def __init__(self, decision: Decision) -> None:
        wait = (
            "the cost exceeds the limit"
            if decision.retry_after_ms < 0
            else f"retry in {decision.retry_after_ms} ms or after a release"
        )
        super().__init__(f"librl: {decision.count} of {decision.limit} slots held, refused: {wait}")
        self.decision = decision


class LeaseLost(Exception):
    """A lease is not held any more: it ended (its slots may be someone
    else's by now), was released, or was never taken. Raised by
    ``lease.renew()``, and given to ``on_lost`` when a background renewal
    finds it; the work the lease guarded should stop. ``decision`` is the
    server's answer, when there was one."""

    def __init__(self, decision: Optional[Decision] = None) -> None:
        super().__init__("librl: the lease is not held: it ended, was released, or was never taken")
        self.decision = decision


def _unexpected(what: str, reply: Any) -> InvalidResponse:
    return InvalidResponse(f"librl: unexpected reply to {what}: {reply!r}")


_new = object.__new__


def _array(reply: Any) -> Any:
    """``reply`` if it is an array (a list, or a tuple from a client's
    callback), else TypeError: a string must not be read as its bytes."""
    if isinstance(reply, (list, tuple)):
        return reply
    raise TypeError


def parse_decision(reply: Any, what: str = "a limiter call", lease: bool = False) -> Decision:
    """A limiter's reply: its six integers, and with ``lease`` the seventh,
    RL.CONCURRENT's lease id. Fields after those are ignored: a later librl
    may add some (docs/commands.md, The limiter reply)."""
    try:
        if type(reply) is not list:
            reply = _array(reply)
        if len(reply) != 6:
            reply = reply[: 7 if lease else 6]
        allowed, count, retry, limit, remaining, reset, *rest = reply
        if lease and not rest:
            raise ValueError
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
            lease_id=int(rest[0]) if lease else 0,
        )
        return decision
    except (TypeError, ValueError):
        raise _unexpected(what, reply) from None


def parse_all(reply: Any, leases: Tuple[bool, ...] = ()) -> AllDecision:
    """RL.ALL's reply; ``leases[i]`` says clause i is a CONCURRENT one, whose
    reply carries a lease id. Clause replies beyond the clauses sent, if a
    server ever added any, are ignored with the rest."""
    try:
        allowed, retry, *clauses = _array(reply)
        if leases and len(clauses) < len(leases):
            raise ValueError
        if not leases and len(clauses) == 1:  # one clause: the commonest call
            decisions: Tuple[Decision, ...] = (parse_decision(clauses[0], "RL.ALL"),)
        else:
            decisions = tuple(
                parse_decision(clause, "RL.ALL", i < len(leases) and leases[i])
                for i, clause in enumerate(clauses[: len(leases)] if leases else clauses)
            )
        # As parse_decision makes a Decision: without the frozen
        # dataclass's per-field object.__setattr__.
        decision: AllDecision = _new(AllDecision)
        decision.__dict__.update(
            allowed=bool(allowed), retry_after_ms=int(retry), decisions=decisions
        )
        return decision
    except (TypeError, ValueError):
        raise _unexpected("RL.ALL", reply) from None


def parse_override(reply: Any) -> Optional[Override]:
    if reply is None:
        return None
    try:
        limit, window_ms, burst, ttl_ms = (int(x) for x in _array(reply)[:4])
    except (TypeError, ValueError):
        raise _unexpected("RL.OVERRIDE GET", reply) from None
    return Override(limit, window_ms, burst or None, None if ttl_ms < 0 else ttl_ms)


def parse_list(reply: Any) -> Tuple[int, list[OverrideEntry]]:
    try:
        cursor, items, *_ = _array(reply)
        entries = []
        for okey, limit, window_ms, burst, ttl_ms, *_ in map(_array, _array(items)):
            ttl = int(ttl_ms)
            entries.append(
                OverrideEntry(
                    okey, int(limit), int(window_ms), int(burst) or None, None if ttl < 0 else ttl
                )
            )
        return int(cursor), entries
    except (TypeError, ValueError):
        raise _unexpected("RL.OVERRIDE LIST", reply) from None
