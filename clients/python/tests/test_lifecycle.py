"""A request's whole life (SPEC): REFUND, BLOCK, RESERVE and WAIT through
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
        assert limiter.fixed(key, 5, "200ms", block="1h")
    blocked = limiter.fixed(key, 5, "200ms", block="1h")
    assert not blocked
    assert 3_599_000 < blocked.retry_after_ms <= 3_600_000
    time.sleep(0.25)  # the window is over; the block is not
    still = limiter.fixed(key, 5, "200ms", block="1h")
    assert not still
    assert still.retry_after_ms > 3_500_000
    # PEEK shows a block but never starts one.
    assert limiter.sliding(key + "p", 1, 60, block=timedelta(hours=1))
    assert (
        limiter.sliding(key + "p", 1, 60, block=timedelta(hours=1), peek=True).retry_after_ms
        < 61_000
    )


def test_reserve_paces_callers(limiter: librl.Limiter, key: str) -> None:
    first = limiter.token(key, 10, 1, burst=1, reserve="1s")
    assert (first.allowed, first.retry_after_ms) == (True, 0)
    waits = [limiter.token(key, 10, 1, burst=1, reserve="1s").retry_after_ms for _ in range(3)]
    assert all(d > 0 for d in waits)
    assert waits == sorted(waits)  # first come, first served
    assert 180 <= waits[-1] - waits[0] <= 200  # 100 ms apart: 10 per second
    too_far = limiter.token(key, 10, 1, burst=1, reserve=timedelta(milliseconds=100))
    assert not too_far
    assert too_far.retry_after_ms > 0
    assert not limiter.token(key, 10, 1, burst=1, reserve=0)


def test_wait_holds_the_reply(limiter: librl.Limiter, key: str) -> None:
    assert limiter.token(key, 10, 1, burst=1)
    started = time.monotonic()
    d = limiter.token(key, 10, 1, burst=1, wait="1s")
    elapsed = time.monotonic() - started
    assert d.allowed
    assert d.retry_after_ms == 0
    assert elapsed >= 0.09


def test_all_with_lifecycle_options(limiter: librl.Limiter, key: str) -> None:
    a, b = f"{key}:a", f"{key}:b"
    assert limiter.all(librl.Fixed(a, 5, 60, cost=5), librl.Token(b, 10, 1, burst=1))
    reserved = limiter.all(librl.Fixed(a, 50, 60), librl.Token(b, 10, 1, burst=1, reserve="1s"))
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
    assert await limiter.token(key, 5, 1, burst=1)
    started = time.monotonic()
    waited, other = await asyncio.gather(
        limiter.token(key, 5, 1, burst=1, wait="1s"),
        limiter.fixed(key + "other", 5, 60),
    )
    assert waited.allowed
    assert other.allowed
    assert time.monotonic() - started >= 0.18
    assert (await limiter.fixed(key + "r", 5, 60, cost=5)).remaining == 0
    assert (await limiter.fixed(key + "r", 5, 60, refund=5)).remaining == 5
