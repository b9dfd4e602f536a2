"""Calls keep working while their slot migrates (docs/operations.md, Redis
Cluster): a real 3-primary cluster (Redis 7.0 and Valkey 9.1) moves a slot of
thousands of keys in batches with pauses, while workers call in that slot
with an override key that is never set (limiters, durable calls, and
RL.CONCURRENT's acquire and release), with one that is set, and RL.ALL over
a per-hour key and a 50 ms key (a multi-key call partly present on each
node: TRYAGAIN until the whole slot has moved). No call fails, none lasts
much longer than the migration, and every key counts exactly the calls
admitted. Then a migration stalled half-way: a call with an override is
split and runs; an RL.ALL naming an absent key gives up after its retry
window."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Dict, List, Optional, Tuple

import pytest
import redis.asyncio
from redis.cluster import RedisCluster
from redis.exceptions import RedisError, TryAgainError

import librl
from librl import _args
from librl._types import parse_decision
from servers import Cluster

TAG = "{migrating}"
FILL = 3000
BATCH, PAUSE = 50, 0.02
WORKERS = 2
BIG = 2**40
OVERRIDE_SET = f"{TAG}:override-set"


@dataclass
class Tally:
    calls: int = 0
    admitted: int = 0
    errors: List[str] = field(default_factory=list)
    max_latency: float = 0.0

    def record(self, started: float, admitted: Optional[bool], error: Optional[str]) -> None:
        self.calls += 1
        self.max_latency = max(self.max_latency, time.monotonic() - started)
        if error is not None:
            self.errors.append(error)
        elif admitted:
            self.admitted += 1


def _kinds(prefix: str) -> Dict[str, Callable[[int], List[librl.Clause]]]:
    """Each kind of call, as the clauses its worker w sends: the first
    clause's key is the one whose count is checked."""
    return {
        "override never set": lambda w: [
            librl.Fixed(f"{TAG}:{prefix}:o:{w}", BIG, "1h", override=f"{TAG}:no-override")
        ],
        "override set": lambda w: [
            librl.Fixed(f"{TAG}:{prefix}:s:{w}", 1, "1h", override=OVERRIDE_SET)
        ],
        "all over keys of different ages": lambda w: [
            librl.Fixed(f"{TAG}:{prefix}:a:{w}:hour", BIG, "1h"),
            librl.Fixed(f"{TAG}:{prefix}:a:{w}:second", BIG, "50ms"),
        ],
        # Admitted once per 50 ms: the per-hour clause, admitted first when
        # the call is split, is given back every other time.
        "all, its second clause denying": lambda w: [
            librl.Fixed(f"{TAG}:{prefix}:n:{w}:hour", BIG, "1h"),
            librl.Fixed(f"{TAG}:{prefix}:n:{w}:tight", 1, "50ms"),
        ],
        "durable, override never set": lambda w: [
            librl.Sliding(f"{TAG}:{prefix}:d:{w}", BIG, "1h", override=f"{TAG}:no-override")
        ],
        "concurrent acquire and release, override never set": lambda w: [
            librl.Concurrent(f"{TAG}:{prefix}:c:{w}", BIG, "1h", override=f"{TAG}:no-override")
        ],
    }


def _send_sync(
    limiter: librl.Limiter, durable: librl.Limiter, kind: str, clauses: List[librl.Clause]
) -> bool:
    if kind.startswith("durable"):
        c = clauses[0]
        try:
            return bool(durable.sliding(c.key, BIG, "1h", override=c.override))
        except librl.DurabilityError as e:  # these primaries have no replica
            return bool(e.reply)
    if kind.startswith("concurrent"):
        c = clauses[0]
        lease = limiter.acquire(c.key, BIG, "1h", override=c.override)
        return bool(lease) and bool(lease.release())
    if len(clauses) == 1:
        c = clauses[0]
        return bool(limiter.fixed(c.key, 1, "1h", override=c.override))
    return bool(limiter.all(*clauses))


def _read(clauses: List[librl.Clause]) -> librl.Clause:
    """A COST 0 read of the first clause's key: the count it holds."""
    first = clauses[0]
    return type(first)(first.key, BIG, "1h", cost=0)  # type: ignore[call-arg]


def _report(name: str, cluster: Cluster, took: float, tallies: Dict[str, List[Tally]]) -> str:
    stats = cluster.stats()
    lines = [
        f"{name}: {FILL} keys moved in {took:.2f} s; servers replied TRYAGAIN {stats['tryagain']}, "
        f"ASK {stats['ask']}, MOVED {stats['moved']}"
    ]
    for kind, per in tallies.items():
        errors = [e for t in per for e in t.errors]
        lines.append(
            f"  {kind}: {sum(t.calls for t in per)} calls, {len(errors)} errors, "
            f"max {max(t.max_latency for t in per) * 1000:.0f} ms"
            + (f", first error {errors[0]}" if errors else "")
        )
    report = "\n".join(lines)
    print(report)
    return report


def _check(
    report: str, took: float, tallies: Dict[str, List[Tally]], counts: Dict[str, List[int]]
) -> None:
    errors = sum(len(t.errors) for per in tallies.values() for t in per)
    assert errors == 0, report
    longest = max(t.max_latency for per in tallies.values() for t in per)
    # Past the migration's end a call may still sleep out one backoff of the
    # package's (0.1 s at most) and redis-py's own pauses in its redirect
    # loop (0.05 s each, 0.4 s at most).
    assert longest < took + 0.75, report
    for kind, per in tallies.items():
        # A concurrency limit counts the slots held: every lease was released.
        expected = [0 if kind.startswith("concurrent") else t.admitted for t in per]
        assert counts[kind] == expected, f"{kind}: counts differ\n{report}"


def test_sync_calls_keep_working_while_their_slot_migrates(cluster: Cluster) -> None:
    rc = RedisCluster(host="127.0.0.1", port=cluster.port)
    try:
        # A retry window no loaded test machine reaches: the bound checked is
        # the migration's own length.
        limiter = librl.Limiter(rc, try_again_wait=60)
        durable = librl.Limiter(rc, try_again_wait=60, durable=(1, 5))
        slot = rc.keyslot(TAG)
        cluster.fill(TAG, FILL)
        limiter.override_set(OVERRIDE_SET, BIG, "1h")
        kinds = _kinds("sync")
        tallies = {kind: [Tally() for _ in range(WORKERS)] for kind in kinds}
        # Every key exists before the slot starts moving.
        for kind, clauses in kinds.items():
            for w in range(WORKERS):
                assert _send_sync(limiter, durable, kind, clauses(w))
                tallies[kind][w].admitted += 1
        cluster.reset_stats()
        stop = threading.Event()

        def work(kind: str, w: int) -> None:
            tally = tallies[kind][w]
            while not stop.is_set():
                started = time.monotonic()
                try:
                    admitted = _send_sync(limiter, durable, kind, kinds[kind](w))
                except RedisError as e:
                    tally.record(started, None, f"{type(e).__name__}: {e}")
                else:
                    tally.record(started, admitted, None)
                time.sleep(0.002)

        threads = [
            threading.Thread(target=work, args=(kind, w)) for kind in kinds for w in range(WORKERS)
        ]
        for t in threads:
            t.start()
        started = time.monotonic()
        try:
            cluster.move_slot(slot, cluster.elsewhere(slot), batch=BATCH, pause=PAUSE)
        finally:
            took = time.monotonic() - started
            time.sleep(0.1)
            stop.set()
            for t in threads:
                t.join()
        report = _report(f"sync, {cluster.flavor}", cluster, took, tallies)
        counts = {
            kind: [limiter.all(_read(clauses(w))).decisions[0].count for w in range(WORKERS)]
            for kind, clauses in kinds.items()
        }
        _check(report, took, tallies, counts)

        # A migration stalled half-way: a call with an override never set,
        # and an RL.ALL naming an absent key, are split and run at once; an
        # RL.ALL that cannot be split (a REFUND clause) gives up after its
        # retry window, with the TRYAGAIN.
        o = kinds["override never set"](0)[0]
        hour = kinds["all over keys of different ages"](0)[0]
        with cluster.open_migration(slot, cluster.elsewhere(slot)):
            assert limiter.fixed(o.key, BIG, "1h", override=o.override)
            assert limiter.all(hour, librl.Fixed(f"{TAG}:absent", BIG, "1h"))
            unsplittable = (
                librl.Fixed(hour.key, BIG, "1h", refund=1),
                librl.Fixed(f"{TAG}:absent", BIG, "1h"),
            )
            for window in (0.3, 0.0):
                started = time.monotonic()
                with pytest.raises(TryAgainError):
                    librl.Limiter(rc, try_again_wait=window).all(*unsplittable)
                waited = time.monotonic() - started
                # The window, and at most the one try under way when it
                # closes (a round trip, slower on a loaded machine).
                assert window - 0.1 <= waited <= window + 0.5, waited
    finally:
        rc.close()


async def test_async_calls_keep_working_while_their_slot_migrates(cluster: Cluster) -> None:
    arc = redis.asyncio.RedisCluster(host="127.0.0.1", port=cluster.port)
    rc = RedisCluster(host="127.0.0.1", port=cluster.port)
    try:
        limiter = librl.AsyncLimiter(arc, try_again_wait=60)
        durable = librl.AsyncLimiter(arc, try_again_wait=60, durable=(1, 5))
        slot = rc.keyslot(TAG)
        cluster.fill(TAG, FILL)
        await limiter.override_set(OVERRIDE_SET, BIG, "1h")
        kinds = _kinds("async")

        async def send(kind: str, clauses: List[librl.Clause]) -> bool:
            if kind.startswith("durable"):
                c = clauses[0]
                try:
                    return bool(await durable.sliding(c.key, BIG, "1h", override=c.override))
                except librl.DurabilityError as e:
                    return bool(e.reply)
            if kind.startswith("concurrent"):
                c = clauses[0]
                lease = await limiter.acquire(c.key, BIG, "1h", override=c.override)
                return bool(lease) and bool(await lease.release())
            if len(clauses) == 1:
                c = clauses[0]
                return bool(await limiter.fixed(c.key, 1, "1h", override=c.override))
            return bool(await limiter.all(*clauses))

        tallies = {kind: [Tally() for _ in range(WORKERS)] for kind in kinds}
        for kind, clauses in kinds.items():
            for w in range(WORKERS):
                assert await send(kind, clauses(w))
                tallies[kind][w].admitted += 1
        cluster.reset_stats()
        stop = asyncio.Event()

        async def work(kind: str, w: int) -> None:
            tally = tallies[kind][w]
            while not stop.is_set():
                started = time.monotonic()
                try:
                    admitted = await send(kind, kinds[kind](w))
                except RedisError as e:
                    tally.record(started, None, f"{type(e).__name__}: {e}")
                else:
                    tally.record(started, admitted, None)
                await asyncio.sleep(0.002)

        tasks = [asyncio.create_task(work(kind, w)) for kind in kinds for w in range(WORKERS)]
        started = time.monotonic()
        try:
            # The migration runs in a thread so the event loop stays free.
            await asyncio.to_thread(
                cluster.move_slot, slot, cluster.elsewhere(slot), None, BATCH, PAUSE
            )
        finally:
            took = time.monotonic() - started
            await asyncio.sleep(0.1)
            stop.set()
            await asyncio.gather(*tasks)
        report = _report(f"async, {cluster.flavor}", cluster, took, tallies)
        counts: Dict[str, List[int]] = {}
        for kind, clauses in kinds.items():
            reads: List[Awaitable[librl.AllDecision]] = [
                limiter.all(_read(clauses(w))) for w in range(WORKERS)
            ]
            counts[kind] = [d.decisions[0].count for d in await asyncio.gather(*reads)]
        _check(report, took, tallies, counts)
    finally:
        await arc.aclose()
        rc.close()


def _same(atomic: librl.Decision, split: librl.Decision) -> None:
    """Two replies of twin keys, asked a moment apart (a few ms, more on a
    loaded machine: a token bucket refills meanwhile)."""
    assert abs(atomic.reset_after_ms - split.reset_after_ms) <= 100, (atomic, split)
    assert abs(atomic.retry_after_ms - split.retry_after_ms) <= 100, (atomic, split)
    assert (atomic.allowed, atomic.count, atomic.limit, atomic.remaining) == (
        split.allowed,
        split.count,
        split.limit,
        split.remaining,
    ), (atomic, split)
    assert bool(atomic.lease_id) == bool(split.lease_id)


def test_split_calls_answer_as_the_atomic_call(limiter: librl.Limiter, key: str) -> None:
    # What a half-moved slot makes of a call (Commands._alone and
    # _clause_by_clause), run on a standalone server beside the atomic
    # call on a twin key: the same replies, and the same counts after.
    commands = limiter._commands
    limiter.override_set(f"{key}:o", 3, "1m")
    limiter.override_set(f"{key}:ob", 3, "1m", burst=5)
    for okey in (f"{key}:o", f"{key}:ob", f"{key}:absent"):
        for n, make in enumerate(
            (
                lambda k, o=okey: librl.Fixed(k, 10, 60, aligned=True, override=o),
                lambda k, o=okey: librl.Sliding(k, 10, 60, approx=True, cost=2, override=o),
                lambda k, o=okey: librl.Token(k, 10, 60, burst=20, override=o),
                lambda k, o=okey: librl.Concurrent(k, 10, 60, override=o),
            )
        ):
            twins = (make(f"{key}:{okey}:{n}:atomic"), make(f"{key}:{okey}:{n}:split"))
            for _ in range(4):
                replies = []
                for twin, split in zip(twins, (False, True)):
                    argv: List[_args.Arg] = [f"RL.{twin.name}", *twin.args()[1:]]
                    lease = isinstance(twin, librl.Concurrent)
                    parse = functools.partial(parse_decision, lease=lease)
                    if split:
                        alone = commands._alone(twin, argv, parse, False, None)
                        assert alone is not None
                        replies.append(limiter._run(alone()))
                    else:
                        replies.append(limiter._run(commands._write(twin.key, argv, parse)))
                _same(*replies)

    def pair(tag: str) -> Tuple[librl.Clause, ...]:
        return (
            librl.Sliding(f"{key}:{tag}:hour", 100, "1h"),
            librl.Concurrent(f"{key}:{tag}:slots", 5, 60),
            librl.Fixed(f"{key}:{tag}:tight", 2, 60, override=f"{key}:absent"),
        )

    atomic, by_clause = pair("atomic"), pair("split")
    for peek in (False, False, True, False, False):  # the last two are denied
        a = limiter.all(*atomic, peek=peek)
        s = limiter._run(commands._clause_by_clause(by_clause, peek))
        assert (a.allowed, len(a.decisions)) == (s.allowed, len(s.decisions))
        assert abs(a.retry_after_ms - s.retry_after_ms) <= 100
        for x, y in zip(a.decisions, s.decisions):
            _same(x, y)
    for a_clause, s_clause in zip(atomic, by_clause):  # the denied calls gave everything back
        read_a = limiter.all(_read([a_clause]))
        read_s = limiter.all(_read([s_clause]))
        assert read_a.decisions[0].count == read_s.decisions[0].count
