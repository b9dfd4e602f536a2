"""AsyncLimiter over redis.asyncio's Redis and RedisCluster."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio
from redis.exceptions import RedisClusterException

import librl
from servers import Cluster, Server


async def test_standalone(ar: redis.asyncio.Redis, key: str) -> None:
    limiter = librl.AsyncLimiter(ar)
    assert await limiter.fixed(key, 2, 60)
    assert (await limiter.sliding(key + "s", 2, 60)).count == 1
    assert (await limiter.token(key + "t", 2, 60, burst=3)).limit == 3
    assert not await limiter.fixed(key, 2, 60, cost=2)
    d = await limiter.all(librl.Fixed(key + "a", 1, 60), librl.Token(key + "b", 1, 60))
    assert d
    assert len(d.decisions) == 2
    assert not await limiter.all(librl.Fixed(key + "a", 1, 60), peek=True)
    with pytest.raises(redis.ResponseError, match="limit"):
        await limiter.fixed(key, 0, 60)


async def test_standalone_resp3(server: Server, key: str) -> None:
    client = redis.asyncio.Redis(host="127.0.0.1", port=server.port, protocol=3)
    try:
        limiter = librl.AsyncLimiter(client)
        assert await limiter.fixed(key, 1, 60) == librl.Decision(True, 1, 0, 1, 0, 60000)
    finally:
        await client.aclose()


async def test_concurrent_calls_count_exactly(ar: redis.asyncio.Redis, key: str) -> None:
    limiter = librl.AsyncLimiter(ar)
    decisions = await asyncio.gather(*(limiter.fixed(key, 30, 60) for _ in range(50)))
    assert sum(map(bool, decisions)) == 30


async def test_denial_cache(ar: redis.asyncio.Redis, key: str) -> None:
    limiter = librl.AsyncLimiter(ar, denial_cache=True)
    assert await limiter.fixed(key, 1, 60)
    assert not await limiter.fixed(key, 1, 60)
    before = (await ar.info("commandstats"))["cmdstat_RL.FIXED"]["calls"]
    for _ in range(10):
        assert not await limiter.fixed(key, 1, 60)
    assert (await ar.info("commandstats"))["cmdstat_RL.FIXED"]["calls"] == before


async def test_cluster_steady_state(cluster: Cluster) -> None:
    client = redis.asyncio.RedisCluster(host="127.0.0.1", port=cluster.port)
    try:
        limiter = librl.AsyncLimiter(client)
        await limiter.fixed("warm", 5, 60)  # connects, loads the slot map
        cluster.reset_stats()
        for i in range(60):
            assert await limiter.fixed(f"async:f{i}", 5, 60)
            assert await limiter.sliding(f"async:s{i}", 5, 60)
            assert await limiter.token(f"async:t{i}", 5, 60)
            tag = f"{{async:{i}}}"
            assert await limiter.all(librl.Fixed(f"{tag}:a", 5, 60), librl.Token(f"{tag}:b", 5, 1))
        await asyncio.gather(*(limiter.fixed(f"async:g{i}", 5, 60) for i in range(60)))
        stats = cluster.stats()
        assert (stats["getkeys"], stats["moved"], stats["ask"]) == (0, 0, 0)
        assert stats["cmdstat_RL.FIXED"] == 120
        with pytest.raises(RedisClusterException, match="hash tag"):
            await limiter.all(librl.Fixed("x:min", 5, 60), librl.Fixed("x:day", 5, 60))
    finally:
        await client.aclose()


async def test_cluster_first_call_initializes(arc: redis.asyncio.RedisCluster) -> None:
    # No explicit initialize(): the limiter's first call loads the slot map.
    assert await librl.AsyncLimiter(arc).token("fresh-client", 5, 60)


async def test_cluster_resharding(cluster: Cluster) -> None:
    client = redis.asyncio.RedisCluster(host="127.0.0.1", port=cluster.port)
    try:
        limiter = librl.AsyncLimiter(client)
        key = "{reshard-async}:live"
        slot = client.keyslot(key)
        counts = [(await limiter.sliding(key, 1000, 600)).count for _ in range(3)]
        cluster.reset_stats()
        owner = cluster.owner(slot)
        target = next(n for n in cluster.nodes if n is not owner)
        loop = asyncio.get_running_loop()

        def during() -> None:
            # move_slot is synchronous: run calls on the loop from its thread.
            for _ in range(3):
                future = asyncio.run_coroutine_threadsafe(limiter.sliding(key, 1000, 600), loop)
                counts.append(future.result(10).count)

        # The migration runs in a thread so the event loop stays free.
        await asyncio.to_thread(cluster.move_slot, slot, target, during)
        for _ in range(5):
            counts.append((await limiter.sliding(key, 1000, 600)).count)
        assert counts == list(range(1, len(counts) + 1))
        stats = cluster.stats()
        assert stats["ask"] >= 3
        assert stats["moved"] >= 1
        assert stats["getkeys"] == 0
        cluster.reset_stats()
        for i in range(20):
            await limiter.fixed(f"after-async:{i}", 5, 60)
        assert (await limiter.sliding(key, 1000, 600)).count == counts[-1] + 1
        quiet = cluster.stats()
        assert (quiet["moved"], quiet["ask"], quiet["getkeys"]) == (0, 0, 0)
    finally:
        await client.aclose()
