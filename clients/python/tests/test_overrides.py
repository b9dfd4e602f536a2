"""override_set/get/delete/list through the container command RL.OVERRIDE
SET|GET|DEL|LIST, standalone, in a cluster, and asyncio."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
import redis.asyncio
from redis.cluster import RedisCluster

import librl
from servers import Cluster


def test_set_get_delete(limiter: librl.Limiter, key: str) -> None:
    okey = f"{key}:override"
    assert limiter.override_get(okey) is None
    limiter.override_set(okey, 5000, "1m")
    assert limiter.override_get(okey) == librl.Override(5000, 60000, None, None)
    limiter.override_set(okey, 10, 1, burst=20, ttl=timedelta(hours=24))
    got = limiter.override_get(okey)
    assert got is not None
    assert (got.limit, got.window_ms, got.burst) == (10, 1000, 20)
    assert got.ttl_ms is not None
    assert 86_000_000 < got.ttl_ms <= 86_400_000
    assert limiter.override_delete(okey, f"{key}:missing") == 1
    assert limiter.override_get(okey) is None
    with pytest.raises(ValueError, match="at least one"):
        limiter.override_delete()


def test_limiters_follow_an_override(limiter: librl.Limiter, key: str) -> None:
    okey = f"{key}:override"
    assert limiter.fixed(key, 1000, 60, override=okey).limit == 1000  # none stored: own values
    limiter.override_set(okey, 5000, "1m")
    assert limiter.fixed(key, 1000, 60, override=okey).limit == 5000
    limiter.override_set(okey, 3, 60, burst=7)
    assert limiter.token(key + "t", 1, 60, override=okey).limit == 7


def test_override_errors(limiter: librl.Limiter, r: redis.Redis, key: str) -> None:
    with pytest.raises(redis.ResponseError, match="limit"):
        limiter.override_set(key, 0, 60)
    r.set(key, "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        limiter.override_get(key)


def test_list_and_scan(limiter: librl.Limiter, key: str) -> None:
    names = [f"{key}:o{i}" for i in range(25)]
    for i, okey in enumerate(names):
        limiter.override_set(okey, i + 1, 60)
    limiter.fixed(f"{key}:not-an-override", 5, 60)
    seen = {e.okey for e in limiter.override_scan_iter(match=f"{key}:*", count=10)}
    assert seen == {n.encode() for n in names}
    cursor, entries = limiter.override_list(0, match=f"{key}:o1", count=1000)
    assert cursor == 0
    assert entries == [librl.OverrideEntry(f"{key}:o1".encode(), 2, 60000, None, None)]
    with pytest.raises(ValueError, match="RedisCluster"):
        limiter.override_list(0, node=object())  # type: ignore[arg-type]


def test_denial_cache_forgets_on_override(r: redis.Redis, key: str) -> None:
    limiter = librl.Limiter(r, denial_cache=True)
    okey = f"{key}:override"
    assert limiter.fixed(key, 1, 60, override=okey)
    assert not limiter.fixed(key, 1, 60, override=okey)
    limiter.override_set(okey, 10, 60)  # raises the limit: the denial is stale
    assert limiter.fixed(key, 1, 60, override=okey)
    assert not limiter.fixed(key, 1, 60, override=okey, cost=20)
    limiter.override_delete(okey)
    assert not limiter.fixed(key, 1, 60, override=okey)


def test_cluster_overrides(rc: RedisCluster, cluster: Cluster) -> None:
    limiter = librl.Limiter(rc)
    okeys = [f"cluster-override:{i}" for i in range(12)]
    assert len({rc.keyslot(k) for k in okeys}) > 3
    cluster.reset_stats()
    for okey in okeys:
        limiter.override_set(okey, 50, 60, burst=60)
        assert limiter.override_get(okey) == librl.Override(50, 60000, 60, None)
    limiter.override_set("{tagged}:override", 9, 60)
    assert limiter.fixed("{tagged}:key", 5, 60, override="{tagged}:override").limit == 9
    seen = {e.okey for e in limiter.override_scan_iter(match="cluster-override:*")}
    assert seen == {k.encode() for k in okeys}
    with pytest.raises(ValueError, match="node="):
        limiter.override_list(0)
    first = rc.get_primaries()[0]
    cursor, _ = limiter.override_list(0, count=1000, node=first)
    assert cursor == 0
    assert limiter.override_delete(*okeys, "{tagged}:override") == 13
    stats = cluster.stats()
    assert (stats["getkeys"], stats["moved"]) == (0, 0)


async def test_async_overrides(ar: redis.asyncio.Redis, key: str) -> None:
    limiter = librl.AsyncLimiter(ar)
    okey = f"{key}:override"
    await limiter.override_set(okey, 7, "2m", ttl=60)
    got = await limiter.override_get(okey)
    assert got is not None
    assert (got.limit, got.window_ms, got.burst) == (7, 120000, None)
    assert (await limiter.fixed(key, 1, 1, override=okey)).limit == 7
    assert [e.okey async for e in limiter.override_scan_iter(match=f"{key}:*")] == [okey.encode()]
    assert await limiter.override_delete(okey) == 1


async def test_async_cluster_overrides(cluster: Cluster) -> None:
    client = redis.asyncio.RedisCluster(host="127.0.0.1", port=cluster.port)
    try:
        limiter = librl.AsyncLimiter(client)
        okeys = [f"async-override:{i}" for i in range(9)]
        for okey in okeys:
            await limiter.override_set(okey, 3, 60)
        seen = {e.okey async for e in limiter.override_scan_iter(match="async-override:*")}
        assert seen == {k.encode() for k in okeys}
        assert await limiter.override_delete(*okeys) == 9
    finally:
        await client.aclose()
