"""A request's whole life (docs/request-life.md): REFUND, BLOCK, RESERVE and WAIT through
the package, standalone and in a cluster, sync and asyncio."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import redis
import redis.asyncio
from redis.cluster import RedisCluster

import librl


def test_refund_fixed_and_sliding(limiter: librl.Limiter, key: str) -> None:
    assert limiter.fixed(key, 10, 60, cost=8).count == 8
    refunded = limiter.fixed(key, 10, 60, refund=5)
    assert refunded.allowed
    assert refunded.retry_after_ms == 0
    assert (refunded.count, refunded.remaining) == (3, 7)
    assert limiter.fixed(key, 10, 60, refund=50).count == 0  # never below 0
    assert limiter.sliding(key + "s", 5, 60, cost=5)
    assert not limiter.sliding(key + "s", 5, 60)
    assert limiter.sliding(key + "s", 5, 60, refund=2).count == 3
    assert limiter.sliding(key + "s", 5, 60)


def test_refund_token(limiter: librl.Limiter, key: str) -> None:
    assert limiter.token(key, 1, 3600, burst=100, cost=100).remaining == 0
    back = limiter.token(key, 1, 3600, burst=100, refund=40)
    assert back.allowed
    assert back.remaining == 40


def test_refund_forgets_cached_denials(r: redis.Redis, key: str) -> None:
    limiter = librl.Limiter(r, denial_cache=True)
    assert limiter.fixed(key, 2, 60, cost=2)
    assert not limiter.fixed(key, 2, 60)
    assert not limiter.fixed(key, 2, 60)  # from the cache
    limiter.fixed(key, 2, 60, refund=1)
    assert limiter.fixed(key, 2, 60)  # the server again, which admits it


def test_block_after_a_denial(limiter: librl.Limiter, key: str) -> None:
    for _ in range(5):
        assert limiter.fixed(key, 5, 60, block="1h")
    blocked = limiter.fixed(key, 5, 60, block="1h")
    assert not blocked
    assert 3_599_000 < blocked.retry_after_ms <= 3_600_000
    # A window of 100 ms: call until one is denied (however slow the
    # machine), let the window end, and the block still holds.
    while limiter.fixed(key + "w", 1, "100ms", block="1h"):
        pass
    time.sleep(0.15)
    still = limiter.fixed(key + "w", 1, "100ms", block="1h")
    assert not still
    assert still.retry_after_ms > 3_500_000
    # PEEK shows a block but never starts one.
    assert limiter.sliding(key + "p", 1, 60, block=timedelta(hours=1))
    peek = limiter.sliding(key + "p", 1, 60, block=timedelta(hours=1), peek=True)
    assert 0 < peek.retry_after_ms <= 60_000


def test_reserve_paces_callers(limiter: librl.Limiter, key: str) -> None:
    first = limiter.token(key, 1, 1, burst=1, reserve="10s")  # one token a second
    assert (first.allowed, first.retry_after_ms) == (True, 0)
    started = time.monotonic()
    waits = [limiter.token(key, 1, 1, burst=1, reserve="10s").retry_after_ms for _ in range(3)]
    span_ms = (time.monotonic() - started) * 1000
    # Queued first come, first served, a second apart (as seen from calls
    # made span_ms apart).
    for earlier, later in zip(waits, waits[1:]):
        assert 1000 - span_ms - 1 <= later - earlier <= 1000
    assert 0 < waits[0] <= 1000
    too_far = limiter.token(key, 1, 1, burst=1, reserve=timedelta(milliseconds=100))
    assert not too_far
    assert too_far.retry_after_ms > 0
    assert not limiter.token(key, 1, 1, burst=1, reserve=0)


def test_wait_holds_the_reply(limiter: librl.Limiter, key: str) -> None:
    started = time.monotonic()
    assert limiter.token(key, 10, 1, burst=1)  # the next token comes 100 ms later
    d = limiter.token(key, 10, 1, burst=1, wait="1s")
    elapsed = time.monotonic() - started
    assert d.allowed
    assert d.retry_after_ms == 0
    assert elapsed >= 0.098


def test_all_with_lifecycle_options(limiter: librl.Limiter, key: str) -> None:
    a, b = f"{key}:a", f"{key}:b"
    assert limiter.all(librl.Fixed(a, 5, 60, cost=5), librl.Token(b, 1, 60, burst=1))
    reserved = limiter.all(librl.Fixed(a, 50, 60), librl.Token(b, 1, 60, burst=1, reserve="2m"))
    assert reserved.allowed
    assert reserved.retry_after_ms > 0
    refunded = limiter.all(librl.Fixed(a, 50, 60, refund=3))
    assert refunded.decisions[0].count == 3
    blocked = limiter.all(librl.Fixed(a + "x", 1, 60, block="1h"), librl.Fixed(a + "y", 1, 60))
    assert blocked
    blocked = limiter.all(librl.Fixed(a + "x", 1, 60, block="1h"), librl.Fixed(a + "y", 1, 60))
    assert not blocked
    assert blocked.retry_after_ms > 3_500_000


def test_lifecycle_in_cluster(rc: RedisCluster) -> None:
    limiter = librl.Limiter(rc)
    assert limiter.fixed("life:c", 3, 60, cost=3)
    assert limiter.fixed("life:c", 3, 60, refund=1).count == 2
    assert limiter.token("life:t", 10, 1, burst=1, wait="1s")
    assert limiter.token("life:t", 10, 1, burst=1, wait="1s").retry_after_ms == 0


async def test_async_wait_does_not_block_others(ar: redis.asyncio.Redis, key: str) -> None:
    limiter = librl.AsyncLimiter(ar)
    started = time.monotonic()
    assert await limiter.token(key, 5, 1, burst=1)  # the next token comes 200 ms later
    waited, other = await asyncio.gather(
        limiter.token(key, 5, 1, burst=1, wait="1s"),
        limiter.fixed(key + "other", 5, 60),
    )
    assert waited.allowed
    assert other.allowed
    assert time.monotonic() - started >= 0.198
    assert (await limiter.fixed(key + "r", 5, 60, cost=5)).remaining == 0
    assert (await limiter.fixed(key + "r", 5, 60, refund=5)).remaining == 5
