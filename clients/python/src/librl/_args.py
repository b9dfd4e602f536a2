"""Argument checks and the argv of every librl command.

Types are checked here (a float window raises TypeError before anything is
sent); ranges are left to the server, so its ``ERR`` message comes back as a
``redis.ResponseError`` unchanged. The only value checks made here are the
ones the command line cannot express: a timedelta that is not a whole number
of milliseconds or not positive, COST with REFUND, RESERVE with WAIT.
"""

from __future__ import annotations

import operator
import re
from datetime import timedelta
from typing import List, Optional, SupportsIndex, Tuple, Union

from ._types import KeyT, Override

#: A window or duration: int seconds, a timedelta (exact milliseconds), or a
#: string as the commands take it ("1500ms", "1m", "24h").
Duration = Union[int, timedelta, str]

#: One argument of a command line as redis-py encodes it.
Arg = Union[str, bytes, int]


def check_key(name: str, key: object) -> KeyT:
    if isinstance(key, (str, bytes)):
        return key
    raise TypeError(f"{name} must be str or bytes, not {type(key).__name__}")


def check_int(name: str, value: object) -> int:
    if type(value) is int:
        return value
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return operator.index(value)


def duration(name: str, value: object, *, zero: bool = False) -> Arg:
    """A window or duration as an argument: ints are seconds and strings go
    as they are; a timedelta becomes exact milliseconds ("1500ms")."""
    if type(value) is int or isinstance(value, str):
        return value
    if isinstance(value, timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        if micros % 1000:
            raise ValueError(f"{name} {value!r} is not a whole number of milliseconds")
        ms = micros // 1000
        if ms < 0 or (ms == 0 and not zero):
            raise ValueError(f"{name} must be {'>= 0' if zero else 'positive'}, not {value!r}")
        return f"{ms}ms"
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise TypeError(
            f"{name} must be int seconds, a datetime.timedelta or a string such as '1500ms', "
            f"not {type(value).__name__}"
        )
    return operator.index(value)


_UNITS_MS = {"": 1000, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"([0-9]+)(ms|s|m|h|d|)", re.IGNORECASE)


def duration_ms(value: Arg) -> Optional[int]:
    """A duration argument as ``duration`` made it, in milliseconds, for
    what the package times itself (a held call's read timeout, a lease's
    renewals); None for a string the server will refuse."""
    if isinstance(value, int):
        return value * 1000
    text = value.decode() if isinstance(value, bytes) else value
    match = _DURATION.fullmatch(text)
    if match is None:
        return None
    return int(match[1]) * _UNITS_MS[match[2].lower()]


def held_s(wait: Arg) -> float:
    """How long the server may hold a reply for ``WAIT wait``, in seconds (0
    for a string it will refuse at once)."""
    return (duration_ms(wait) or 0) / 1000


def seconds(name: str, value: object) -> float:
    """A client-side time (a cache's max age, a retry window): float or int
    seconds, a timedelta, or a string as the commands take them; >= 0."""
    if isinstance(value, float) and not isinstance(value, bool):
        out = value
    else:
        ms = duration_ms(duration(name, value, zero=True))
        if ms is None:
            raise ValueError(f"{name} {value!r} is not a duration such as 1.5, '1500ms' or '1m'")
        out = ms / 1000
    if not out >= 0:
        raise ValueError(f"{name} must be >= 0, not {value!r}")
    return out


def _head(
    key: object, name: str, limit: object, window: object, window_name: str = "window"
) -> List[Arg]:
    # Type checks inline for the common types: this runs once per call.
    return [
        key if type(key) is str or type(key) is bytes else check_key("key", key),
        limit if type(limit) is int else check_int(name, limit),
        window if type(window) is int or type(window) is str else duration(window_name, window),
    ]


def _cost_refund(argv: List[Arg], cost: object, refund: object) -> None:
    if refund is not None:
        if cost != 1:
            raise ValueError("cost and refund are mutually exclusive: pass one of them")
        argv += ("REFUND", check_int("refund", refund))
    elif cost != 1 or type(cost) is not int:
        argv += ("COST", check_int("cost", cost))


def reads_only(argv: List[Arg]) -> bool:
    """COST 0: the call reads its limiter and writes nothing. The options
    begin after key, limit and window (a key may be "COST")."""
    options = argv[3:]
    return "COST" in options and options[options.index("COST") + 1] == 0


def _tail(argv: List[Arg], block: object, override: object) -> None:
    if block is not None:
        argv += ("BLOCK", duration("block", block))
    if override is not None:
        argv += ("OVERRIDE", check_key("override", override))


class Clause:
    """One limit of an RL.ALL call: build it with Fixed, Sliding, Token or
    Concurrent."""

    __slots__ = ("_args", "hold", "key", "override", "reads", "refund")

    #: The clause's name in RL.ALL.
    name: str = ""

    key: KeyT
    override: Optional[KeyT]
    refund: bool
    #: COST 0: the clause reads its limiter and writes nothing.
    reads: bool
    #: With WAIT: the seconds the server may hold the call's reply.
    hold: Optional[float]
    _args: Tuple[Arg, ...]

    def args(self) -> Tuple[Arg, ...]:
        """The clause's words in RL.ALL, its name first."""
        return self._args

    def keys(self) -> Tuple[KeyT, ...]:
        """The key and, if any, the override key: RL.ALL's keys in a cluster."""
        return (self.key,) if self.override is None else (self.key, self.override)

    def __repr__(self) -> str:
        words = " ".join(
            a.decode(errors="replace") if isinstance(a, bytes) else str(a) for a in self._args
        )
        return f"<{type(self).__name__} {words}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Clause) and type(other) is type(self) and other._args == self._args

    def __hash__(self) -> int:
        return hash(self._args)

    def _init(
        self,
        argv: List[Arg],
        cost: object,
        refund: object,
        block: object,
        override: object,
        reserve: object = None,
        wait: object = None,
    ) -> None:
        """``argv``: the key, limit, window and the algorithm's own options;
        then COST or REFUND, RESERVE or WAIT (TOKEN only), BLOCK and
        OVERRIDE, in the order the commands take them."""
        held: Arg = 0
        # The common call (cost 1, no other option) skips the checks.
        if cost != 1 or refund is not None or type(cost) is not int:
            _cost_refund(argv, cost, refund)
        if reserve is not None:
            if wait is not None:
                raise ValueError("reserve and wait are mutually exclusive: pass one of them")
            argv += ("RESERVE", duration("reserve", reserve, zero=True))
        elif wait is not None:
            held = duration("wait", wait, zero=True)
            argv += ("WAIT", held)
        if block is not None or override is not None:
            _tail(argv, block, override)
        self.key = argv[0]  # type: ignore[assignment]
        self.override = override  # type: ignore[assignment]
        self.refund = refund is not None
        self.reads = reads_only(argv)
        self.hold = held_s(held) if wait is not None and reserve is None else None
        self._args = (self.name, *argv)


class Fixed(Clause):
    """``FIXED key limit window [ALIGNED] [COST n | REFUND n] [BLOCK d] [OVERRIDE okey]``."""

    __slots__ = ()
    name = "FIXED"

    def __init__(
        self,
        key: KeyT,
        limit: int,
        window: Duration,
        *,
        aligned: bool = False,
        cost: int = 1,
        refund: Optional[int] = None,
        block: Optional[Duration] = None,
        override: Optional[KeyT] = None,
    ) -> None:
        argv = _head(key, "limit", limit, window)
        if aligned:
            argv.append("ALIGNED")
        self._init(argv, cost, refund, block, override)


class Sliding(Clause):
    """``SLIDING key limit window [APPROX] [COST n | REFUND n] [BLOCK d] [OVERRIDE okey]``."""

    __slots__ = ()
    name = "SLIDING"

    def __init__(
        self,
        key: KeyT,
        limit: int,
        window: Duration,
        *,
        approx: bool = False,
        cost: int = 1,
        refund: Optional[int] = None,
        block: Optional[Duration] = None,
        override: Optional[KeyT] = None,
    ) -> None:
        argv = _head(key, "limit", limit, window)
        if approx:
            argv.append("APPROX")
        self._init(argv, cost, refund, block, override)


class Token(Clause):
    """``TOKEN key rate window [BURST capacity] [COST n | REFUND n]
    [RESERVE max_wait | WAIT max_wait] [BLOCK d] [OVERRIDE okey]``."""

    __slots__ = ()
    name = "TOKEN"

    def __init__(
        self,
        key: KeyT,
        rate: int,
        window: Duration,
        *,
        burst: Optional[int] = None,
        cost: int = 1,
        refund: Optional[int] = None,
        reserve: Optional[Duration] = None,
        wait: Optional[Duration] = None,
        block: Optional[Duration] = None,
        override: Optional[KeyT] = None,
    ) -> None:
        argv = _head(key, "rate", rate, window)
        if burst is not None:
            argv += ("BURST", check_int("burst", burst))
        self._init(argv, cost, refund, block, override, reserve, wait)


class Concurrent(Clause):
    """``CONCURRENT key limit lease [COST n] [OVERRIDE okey]``: at most
    ``limit`` slots held at once, each call taking ``cost`` slots as one
    lease that ends by itself ``lease`` after it was taken. The clause of
    RL.ALL, and what names a lease for RELEASE and RENEW."""

    __slots__ = ()
    name = "CONCURRENT"

    def __init__(
        self,
        key: KeyT,
        limit: int,
        lease: Duration,
        *,
        cost: int = 1,
        override: Optional[KeyT] = None,
    ) -> None:
        argv = _head(key, "limit", limit, lease, "lease")
        self._init(argv, cost, None, None, override)

    @property
    def lease_ms(self) -> Optional[int]:
        """The lease's length in ms, as sent (None: a string the server
        refuses)."""
        return duration_ms(self._args[3])

    def lease_words(self, verb: str, lease_id: int, peek: bool) -> List[Arg]:
        """``RL.CONCURRENT key limit lease RELEASE|RENEW id [OVERRIDE okey]
        [PEEK]`` for a lease this clause names."""
        argv: List[Arg] = ["RL.CONCURRENT", *self._args[1:4], verb, lease_id]
        if self.override is not None:
            argv += ("OVERRIDE", self.override)
        if peek:
            argv.append("PEEK")
        return argv


#: The option words that take no value; every other option takes one.
_FLAGS = frozenset(("ALIGNED", "APPROX", "PEEK"))


def without_override(argv: List[Arg], override: Optional[Override]) -> List[Arg]:
    """A single limiter's (or RL.CONCURRENT's) command line without its
    ``OVERRIDE okey``, the override's values in place of its own when it
    exists (docs/overrides.md: limit and window; on RL.TOKEN the rate, and
    the burst or else the limit as the capacity; on RL.CONCURRENT the slots
    and the lease): the call names one key, which a half-moved slot always
    serves."""
    head = list(argv[:4])
    if override is not None:
        head[2], head[3] = override.limit, f"{override.window_ms}ms"
    options = argv[4:]
    out: List[Arg] = []
    i = 0
    while i < len(options):
        word = options[i]
        if word in _FLAGS:
            out.append(word)
            i += 1
            continue
        pair, i = options[i : i + 2], i + 2
        if word == "OVERRIDE" or (word == "BURST" and override is not None):
            continue
        out += pair
    if override is not None and argv[0] == "RL.TOKEN":
        out += ("BURST", override.burst or override.limit)
    return head + out


def refund_words(argv: List[Arg]) -> List[Arg]:
    """The call that gives back what a single limiter's ``argv`` (as split
    from an RL.ALL, without OVERRIDE) recorded: the same limiter, its
    algorithm's own options (ALIGNED, APPROX, BURST), ``REFUND`` its cost."""
    out, cost = list(argv[:4]), 1
    options = argv[4:]
    i = 0
    while i < len(options):
        word = options[i]
        if word in _FLAGS:
            if word != "PEEK":
                out.append(word)
            i += 1
            continue
        if word == "COST":
            cost = options[i + 1]  # type: ignore[assignment]
        elif word == "BURST":
            out += options[i : i + 2]
        i += 2
    return [*out, "REFUND", cost]


#: The largest lease id the server gives (docs/commands.md, RL.CONCURRENT).
MAX_LEASE_ID = 2**53 - 1


def check_lease_id(value: object) -> int:
    lease_id = check_int("lease_id", value)
    if not 1 <= lease_id <= MAX_LEASE_ID:
        raise ValueError(
            f"lease_id must be from 1 to 2**53 - 1, as the server gives them, not {lease_id}"
        )
    return lease_id


def all_args(clauses: Tuple[Clause, ...], peek: bool) -> List[Arg]:
    if not clauses:
        raise ValueError(
            "all() needs at least one clause: librl.Fixed, Sliding, Token or Concurrent"
        )
    argv: List[Arg] = ["RL.ALL"]
    for clause in clauses:
        if not isinstance(clause, Clause):
            raise TypeError(
                "all() takes librl.Fixed, Sliding, Token or Concurrent clauses, "
                f"not {type(clause).__name__}"
            )
        argv += clause.args()
    if peek:
        argv.append("PEEK")
    return argv


def override_set_args(
    okey: object, limit: object, window: object, burst: object, ttl: object
) -> List[Arg]:
    argv: List[Arg] = [
        "RL.OVERRIDE",
        "SET",
        check_key("okey", okey),
        check_int("limit", limit),
        duration("window", window),
    ]
    if burst is not None:
        argv += ("BURST", check_int("burst", burst))
    if ttl is not None:
        argv += ("TTL", duration("ttl", ttl))
    return argv


def override_list_args(cursor: object, match: object, count: object) -> List[Arg]:
    argv: List[Arg] = ["RL.OVERRIDE", "LIST", check_int("cursor", cursor)]
    if match is not None:
        argv += ("MATCH", check_key("match", match))
    if count is not None:
        argv += ("COUNT", check_int("count", count))
    return argv
