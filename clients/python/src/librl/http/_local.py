"""The `local` fail mode's limiter (docs/http.md, Fail modes): while Redis
cannot answer, the process decides the checks itself with librl-core's
algorithms, integer for integer (held to them by
conformance/vectors/algorithms.json), all-or-nothing as RL.ALL is. Limits
then hold per process; overrides are not read (they live in Redis); counts
made here stay here when Redis is back.

It takes the clauses the middleware already builds for RL.ALL
(``Check.clause()``: Fixed, Sliding, Token, Concurrent) and answers what
Redis would, an ``AllDecision``, so a request decided here goes through the
same headers, refusals and hook::

    local = LocalLimiter(max_keys=100_000)           # local_max_keys
    verdict = local.check([c.clause() for c in checks])
    verdict.allowed, verdict.decisions               # one Decision per clause
    local.check(clauses, peek=True)                  # decide, record nothing
    local.release(clause, decision.lease_id)         # a Concurrent's slots
    local.check(clauses, now_ms=1_000)               # tests: an explicit now

A refused request is recorded by no clause, and its Concurrent clauses
report lease 0 (nothing taken). OVERRIDE is ignored (no overrides), as are
BLOCK, and RESERVE and WAIT (a token clause is decided as a plain call: a
turn is never booked locally), as the Rust integration's local limiter
does. A REFUND clause, a bad limit, window or cost raise ValueError (a
wrong type TypeError) before anything is decided.

Memory is bounded: a key goes when its limiter would be empty again (as
Redis expires it), and at ``max_keys`` keys the tenth closest to expiry is
evicted at once (an evicted limiter starts afresh, admitting more).
Thread-safe: one lock around each call (WSGI servers run requests on
threads)."""

from __future__ import annotations

import threading
import time
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from .._args import Clause, Concurrent, check_int, duration_ms
from .._types import AllDecision, Decision, KeyT

#: The largest limit, rate, burst or cost (librl-core's MAX_AMOUNT).
MAX_AMOUNT = 1 << 50
#: The longest window or lease: 3650 days in ms (librl-core's MAX_WINDOW_MS).
MAX_WINDOW_MS = 3650 * 24 * 60 * 60 * 1000
#: Lease ids stay below 2^53 (librl-core's MAX_LEASE_ID).
MAX_LEASE_ID = (1 << 53) - 1
#: Lease ids a key gives per millisecond before they run ahead of the clock.
IDS_PER_MS = 1000
#: The largest integer of a reply (i64).
MAX_REPLY = (1 << 63) - 1

#: A reply's six integers: allowed, count, retry_after, limit, remaining,
#: reset_after.
Six = Tuple[int, int, int, int, int, int]


class _Fixed(NamedTuple):
    start_ms: int
    end_ms: int
    #: The units admitted in the window.
    total: int


class _Approx(NamedTuple):
    start_ms: int
    current: int
    previous: int


class _Log(NamedTuple):
    """The exact log: ``(t, cost)`` oldest first, times strictly increasing."""

    entries: Tuple[Tuple[int, int], ...]


class _Bucket(NamedTuple):
    """``missing`` units (1/``window_ms`` of a token each) short of full."""

    at_ms: int
    window_ms: int
    missing: int


class _Lease(NamedTuple):
    id: int
    end_ms: int
    slots: int


class _Leases(NamedTuple):
    next_id: int
    leases: Tuple[_Lease, ...]


State = Union[_Fixed, _Approx, _Log, _Bucket, _Leases]


class _Limit(NamedTuple):
    """A clause as the algorithms read it."""

    algorithm: str  # fixed | sliding | approx | token | concurrency
    key: KeyT
    limit: int  # token: the rate
    window_ms: int  # concurrency: the lease
    aligned: bool
    capacity: int  # token: the burst, else the rate
    cost: int


class _Outcome(NamedTuple):
    """One clause decided: its reply, and for an admitted one the state to
    store and until when it matters (Unix ms)."""

    six: Six
    commit: Optional[Tuple[State, int]]
    lease_id: int = 0


class _Entry(NamedTuple):
    state: State
    expires_at_ms: int


class LocalLimiter:
    """Per-process limiters, at most ``max_keys`` of them (at least 1)."""

    def __init__(self, max_keys: int = 100_000) -> None:
        self._capacity = max(1, check_int("max_keys", max_keys))
        self._keys: Dict[KeyT, _Entry] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Keys held, expired ones included until they are next looked at."""
        return len(self._keys)

    def check(
        self, clauses: Sequence[Clause], peek: bool = False, now_ms: Optional[int] = None
    ) -> AllDecision:
        """As RL.ALL: admitted only if every clause admits, then recorded by
        each (unless ``peek``); a refused request is recorded by none. Each
        decision is the one the clause alone gives."""
        limits = [_limit_of(c) for c in clauses]
        now = _now(now_ms)
        with self._lock:
            outcomes = [_decide(lim, self._live(lim.key, now), now) for lim in limits]
            admitted = all(o.six[0] == 1 for o in outcomes)
            if admitted and not peek:
                for lim, o in zip(limits, outcomes):
                    if o.commit is not None:
                        self._insert(lim.key, _Entry(*o.commit), now)
        taken = admitted and not peek
        decisions = tuple(_decision(o, taken) for o in outcomes)
        return AllDecision(admitted, 0 if admitted else _longest_wait(outcomes), decisions)

    def release(self, clause: Concurrent, lease_id: int, now_ms: Optional[int] = None) -> bool:
        """Frees lease ``lease_id`` of a Concurrent clause's key; False when
        it is not held (released, ended, or its key evicted)."""
        lim = _limit_of(clause)
        if lim.algorithm != "concurrency":
            raise ValueError(f"release takes a Concurrent clause, not {clause!r}")
        lease_id = check_int("lease_id", lease_id)
        now = _now(now_ms)
        with self._lock:
            entry = self._keys.get(lim.key)
            if entry is None or not isinstance(entry.state, _Leases):
                return False
            held = [x for x in entry.state.leases if x.end_ms > now]
            if not any(x.id == lease_id for x in held):
                return False
            kept = tuple(x for x in held if x.id != lease_id)
            next_id = entry.state.next_id
            expires_at = max([x.end_ms for x in kept] + [_ids_caught_up_ms(next_id)])
            if expires_at <= now:
                del self._keys[lim.key]
            else:
                self._keys[lim.key] = _Entry(_Leases(next_id, kept), expires_at)
            return True

    def _live(self, key: KeyT, now: int) -> Optional[State]:
        """The key's state unless it has expired (an expired one is dropped)."""
        entry = self._keys.get(key)
        if entry is None:
            return None
        if entry.expires_at_ms <= now:
            del self._keys[key]
            return None
        return entry.state

    def _insert(self, key: KeyT, entry: _Entry, now: int) -> None:
        keys = self._keys
        if key not in keys and len(keys) >= self._capacity:
            for k in [k for k, e in keys.items() if e.expires_at_ms <= now]:
                del keys[k]
        if key not in keys and len(keys) >= self._capacity:
            # Evict the tenth closest to expiry at once, so that a full
            # store sorts once per many inserts, not on each.
            expiries = sorted(e.expires_at_ms for e in keys.values())
            cut = min(max(1, self._capacity // 10), len(expiries) - 1)
            threshold = expiries[cut]
            for k in [k for k, e in keys.items() if e.expires_at_ms <= threshold]:
                del keys[k]
            # Many keys with the same expiry: drop arbitrary ones.
            while len(keys) >= self._capacity:
                del keys[next(iter(keys))]
        keys[key] = entry


def _now(now_ms: Optional[int]) -> int:
    if now_ms is None:
        return time.time_ns() // 1_000_000
    now = check_int("now_ms", now_ms)
    if now < 0:
        raise ValueError(f"now_ms must be >= 0, not {now}")
    return now


def _decision(o: _Outcome, taken: bool) -> Decision:
    # The reply's integers saturate at 2^63 - 1, as the module's (a token
    # bucket's reset_after can be longer: 2^50 tokens at 1 per 3650 days).
    allowed, count, retry_after, limit, remaining, reset_after = (min(n, MAX_REPLY) for n in o.six)
    lease_id = o.lease_id if taken else 0
    return Decision(allowed == 1, count, retry_after, limit, remaining, reset_after, lease_id)


def _longest_wait(outcomes: List[_Outcome]) -> int:
    """RL.ALL's retry_after: the longest of the denials', -1 (never) longest."""
    waits = [o.six[2] for o in outcomes if o.six[0] == 0]
    return -1 if -1 in waits else max(waits, default=0)


def _amount(name: str, value: object) -> int:
    n = check_int(name, value)
    if not 1 <= n <= MAX_AMOUNT:
        raise ValueError(f"{name} must be from 1 to 2^50, not {n}")
    return n


def _window(name: str, value: object) -> int:
    if isinstance(value, (int, str, bytes)) and not isinstance(value, bool):
        ms = duration_ms(value)
    else:
        raise TypeError(f"{name} must be int seconds or a duration string, not {value!r}")
    if ms is None or not 1 <= ms <= MAX_WINDOW_MS:
        raise ValueError(f"{name} must be from 1 ms to 3650 days, not {value!r}")
    return ms


def _limit_of(clause: Clause) -> _Limit:
    """A clause's algorithm and numbers, from its words in RL.ALL."""
    if not isinstance(clause, Clause):
        raise TypeError(f"a local check takes Fixed, Sliding, Token or Concurrent, not {clause!r}")
    name, _, limit, window, *options = clause.args()
    flags = set()
    values: Dict[str, object] = {}
    i = 0
    while i < len(options):
        word = options[i]
        if word in ("ALIGNED", "APPROX"):
            flags.add(word)
            i += 1
        else:
            values[str(word)] = options[i + 1]
            i += 2
    if "REFUND" in values:
        raise ValueError(f"a local check takes no REFUND: {clause!r}")
    algorithm = {"FIXED": "fixed", "TOKEN": "token", "CONCURRENT": "concurrency"}.get(
        str(name), "approx" if "APPROX" in flags else "sliding"
    )
    n = _amount("token rate" if algorithm == "token" else "limit", limit)
    burst = values.get("BURST")
    return _Limit(
        algorithm,
        clause.key,
        n,
        _window("lease" if algorithm == "concurrency" else "window", window),
        "ALIGNED" in flags,
        n if burst is None else _amount("burst", burst),
        _amount("cost", values.get("COST", 1)),
    )


def _decide(lim: _Limit, state: Optional[State], now: int) -> _Outcome:
    """One clause on the state its key holds (a state of another algorithm,
    after a policy changed, counts as none)."""
    if lim.algorithm == "fixed":
        fixed = state if isinstance(state, _Fixed) else None
        return _fixed(lim.limit, lim.window_ms, lim.aligned, fixed, now, lim.cost)
    if lim.algorithm == "sliding":
        log = state if isinstance(state, _Log) else None
        return _sliding(lim.limit, lim.window_ms, log, now, lim.cost)
    if lim.algorithm == "approx":
        approx = state if isinstance(state, _Approx) else None
        return _approx(lim.limit, lim.window_ms, approx, now, lim.cost)
    if lim.algorithm == "token":
        bucket = state if isinstance(state, _Bucket) else None
        return _token(lim.limit, lim.window_ms, lim.capacity, bucket, now, lim.cost)
    leases = state if isinstance(state, _Leases) else None
    return _concurrent(lim.limit, lim.window_ms, leases, now, lim.cost)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _deny(count: int, retry_after: int, limit: int, reset_after: int) -> _Outcome:
    return _Outcome((0, count, retry_after, limit, max(0, limit - count), reset_after), None)


def _fixed(
    limit: int, window: int, aligned: bool, state: Optional[_Fixed], now: int, cost: int
) -> _Outcome:
    """FIXED: a counter per window ``[start, start + window)``. A clock that
    steps back stands still at the window's start."""
    live = state if state is not None and max(now, state.start_ms) < state.end_ms else None
    if live is not None:
        current, now = live, max(now, live.start_ms)
    else:
        start = now - now % window if aligned else now
        current = _Fixed(start, start + window, 0)
    until_end = current.end_ms - now
    count = current.total + cost
    if count <= limit:
        six = (1, count, 0, limit, limit - count, until_end)
        return _Outcome(six, (current._replace(total=count), current.end_ms))
    # The next window starts empty: any cost within the limit fits then.
    retry = -1 if cost > limit else until_end
    return _deny(current.total, retry, limit, until_end if live is not None else 0)


def _sliding(limit: int, window: int, log: Optional[_Log], now: int, cost: int) -> _Outcome:
    """SLIDING (exact): the costs logged in ``(now - window, now]``."""
    entries = log.entries if log is not None else ()
    newest = entries[-1][0] if entries else 0
    now = max(now, newest)
    cutoff = max(0, now - window)
    live = [e for e in entries if e[0] > cutoff]
    count = sum(c for _, c in live)
    if count + cost <= limit:
        if live and live[-1][0] == now:
            live[-1] = (now, live[-1][1] + cost)
        else:
            live.append((now, cost))
        six = (1, count + cost, 0, limit, limit - count - cost, window)
        return _Outcome(six, (_Log(tuple(live)), now + window))
    if cost > limit:
        retry = -1
    else:
        # The oldest entries leave first: wait until enough of them have.
        must_leave, passed, retry = count + cost - limit, 0, window
        for t, c in live:
            passed += c
            if passed >= must_leave:
                retry = max(0, t + window - now)
                break
    reset = max(0, newest + window - now) if count > 0 else 0
    return _deny(count, retry, limit, reset)


def _approx(limit: int, window: int, state: Optional[_Approx], now: int, cost: int) -> _Outcome:
    """SLIDING APPROX: ``current + floor(previous * left / window)`` over
    windows aligned on the clock."""
    now = max(now, state.start_ms if state is not None else 0)
    start = now - now % window
    if state is not None and state.start_ms == start:
        current, previous = state.current, state.previous
    elif state is not None and state.start_ms + window == start:
        current, previous = 0, state.current
    else:
        current, previous = 0, 0
    left = window - (now - start)
    count = current + previous * left // window
    # The counters matter until the window after this one ends.
    expires_at = start + 2 * window
    if count + cost <= limit:
        six = (1, count + cost, 0, limit, limit - count - cost, expires_at - now)
        return _Outcome(six, (_Approx(start, current + cost, previous), expires_at))
    retry = -1 if cost > limit else _approx_wait(current, previous, left, window, limit - cost)
    if current > 0:
        reset = expires_at - now
    elif previous > 0:
        reset = start + window - now
    else:
        reset = 0
    return _deny(count, retry, limit, reset)


def _max_left(previous: int, room: int, window: int) -> Optional[int]:
    """The most ms left in a window at which ``floor(previous * left /
    window) <= room``; None when even 1 ms left is too many."""
    if previous == 0:
        return window
    x = ((room + 1) * window - 1) // previous
    return min(x, window) if x >= 1 else None


def _approx_wait(current: int, previous: int, left: int, window: int, room: int) -> int:
    """The least wait after which ``count + cost <= limit``, ``room`` being
    ``limit - cost``, nothing else admitted meanwhile."""
    if room >= current:
        # Later in this window: the previous window's weight shrinks.
        x = _max_left(previous, room - current, window)
        if x is not None:
            return left - min(x, left)
    # In the next window, this window's count becomes the weighted one.
    x = _max_left(current, room, window)
    return left + window - x if x is not None else left + window


def _token(
    rate: int, window: int, capacity: int, state: Optional[_Bucket], now: int, cost: int
) -> _Outcome:
    """TOKEN: the shortfall kept in 1/window_ms tokens, so one ms refills
    exactly ``rate`` units: exact integers; waits round up, tokens down."""
    full = capacity * window
    short = 0
    if state is not None:
        now = max(now, state.at_ms)
        missing = state.missing
        if state.window_ms != window:
            # A changed window rescales the shortfall, towards fewer tokens.
            missing = _ceil_div(missing * window, state.window_ms)
        short = min(max(0, missing - (now - state.at_ms) * rate), full)
    after = short + cost * window
    owed = max(0, after - full)
    if owed == 0:
        count, reset = _ceil_div(after, window), _ceil_div(after, rate)
        six = (1, count, 0, capacity, max(0, capacity - count), reset)
        return _Outcome(six, (_Bucket(now, window, after), now + reset))
    retry = -1 if cost > capacity else max(1, _ceil_div(owed, rate))
    return _deny(_ceil_div(short, window), retry, capacity, _ceil_div(short, rate))


def _ids_caught_up_ms(next_id: int) -> int:
    """From this ms a key that starts afresh gives ids of at least ``next_id``."""
    return _ceil_div(max(0, next_id - 1), IDS_PER_MS)


def _concurrent(
    limit: int, lease_ms: int, state: Optional[_Leases], now: int, cost: int
) -> _Outcome:
    """CONCURRENT: ``cost`` slots as one lease, held ``[now, now + lease)``
    unless released first."""
    held = [x for x in state.leases if x.end_ms > now] if state is not None else []
    next_id = state.next_id if state is not None else 0
    count = sum(x.slots for x in held)
    latest = max((x.end_ms for x in held), default=0)
    reset = max(0, max(latest, _ids_caught_up_ms(next_id)) - now)
    if count + cost <= limit:
        # A new key's first id comes from the clock, the others from the counter.
        lease_id = now * IDS_PER_MS + 1 if next_id == 0 else next_id
        if lease_id > MAX_LEASE_ID:
            return _deny(count, -1, limit, reset)
        end = now + lease_ms
        expires_at = max(latest, end, _ids_caught_up_ms(lease_id + 1))
        six = (1, count + cost, 0, limit, limit - count - cost, expires_at - now)
        leases = _Leases(lease_id + 1, (*held, _Lease(lease_id, end, cost)))
        return _Outcome(six, (leases, expires_at), lease_id)
    if cost > limit:
        return _deny(count, -1, limit, reset)
    # The least wait after which enough slots have ended for the cost.
    must_end, ended, retry = count + cost - limit, 0, 0
    for end_ms, slots in sorted((x.end_ms, x.slots) for x in held):
        ended += slots
        if ended >= must_end:
            retry = end_ms - now
            break
    return _deny(count, retry, limit, reset)
