"""Limiter over a real 3-primary Redis Cluster (Redis 7.0 and Valkey 9.1):
every call goes to the owner of its key with no COMMAND GETKEYS and no MOVED
in steady state, RL.ALL's one-slot check, and a slot resharded mid-run."""

from __future__ import annotations

import pytest
import redis
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException

import librl
from servers import Cluster

RL = ("cmdstat_RL.FIXED", "cmdstat_RL.SLIDING", "cmdstat_RL.TOKEN", "cmdstat_RL.ALL")


def run_mix(limiter: librl.Limiter, prefix: str, n: int) -> None:
    for i in range(n):
        assert limiter.fixed(f"{prefix}:f{i}", 5, 60)
        assert limiter.sliding(f"{prefix}:s{i}", 5, 60, approx=i % 2 == 0)
        assert limiter.token(f"{prefix}:t{i}", 5, 60, burst=10)
        tag = f"{{{prefix}:u{i}}}"
        assert limiter.all(
            librl.Fixed(f"{tag}:min", 5, 60, aligned=True),
            librl.Sliding(f"{tag}:hour", 50, "1h"),
            librl.Token(f"{tag}:day", 500, "1d"),
        )


@pytest.mark.parametrize("protocol", [2, 3])
def test_steady_state_no_getkeys_no_moved(cluster: Cluster, protocol: int) -> None:
    rc = RedisCluster(host="127.0.0.1", port=cluster.port, protocol=protocol)
    try:
        limiter = librl.Limiter(rc)
        cluster.reset_stats()
        run_mix(limiter, f"steady{protocol}", 100)
        stats = cluster.stats()
        assert stats["getkeys"] == 0
        assert stats["moved"] == 0
        assert stats["ask"] == 0
        assert sum(stats.get(name, 0) for name in RL) == 400
        # Every primary served its share: routing is by key, not one node.
        for r in cluster.clients():
            with r:
                served = r.info("commandstats")
                assert sum(served.get(name, {"calls": 0})["calls"] for name in RL) > 50
    finally:
        rc.close()


def test_limits_hold_per_key(rc: RedisCluster) -> None:
    limiter = librl.Limiter(rc)
    for i in range(20):
        key = f"perkey:{i}"
        assert [bool(limiter.fixed(key, 2, 60)) for _ in range(3)] == [True, True, False]


def test_all_needs_one_slot(rc: RedisCluster) -> None:
    limiter = librl.Limiter(rc)
    with pytest.raises(RedisClusterException, match=r"\{user42\}:min and \{user42\}:day"):
        limiter.all(librl.Fixed("user42:min", 5, 60), librl.Fixed("user42:day", 50, "1d"))
    with pytest.raises(RedisClusterException, match="one cluster slot"):
        limiter.all(librl.Fixed("{a}:x", 5, 60, override="{b}:o"))
    with pytest.raises(RedisClusterException, match="one cluster slot"):
        limiter.fixed("{a}:x", 5, 60, override="{b}:o")
    d = limiter.all(librl.Fixed("{user42}:min", 5, 60), librl.Fixed("{user42}:day", 50, "1d"))
    assert d
    # An override key in the key's slot is fine, even if it holds nothing.
    assert limiter.fixed("{user42}:x", 5, 60, override="{user42}:override")


def test_server_errors_come_back(rc: RedisCluster) -> None:
    limiter = librl.Limiter(rc)
    with pytest.raises(redis.ResponseError, match="limit"):
        limiter.fixed("errs", 0, 60)
    with pytest.raises(redis.ResponseError):
        limiter.all(librl.Fixed("{e}:a", 1, 1), librl.Fixed("{e}:a", 1, 1))


def test_denial_cache_in_cluster(rc: RedisCluster, cluster: Cluster) -> None:
    limiter = librl.Limiter(rc, denial_cache=True)
    assert limiter.token("cached", 1, 60)
    assert not limiter.token("cached", 1, 60)
    before = cluster.stats()["cmdstat_RL.TOKEN"]
    for _ in range(20):
        assert not limiter.token("cached", 1, 60)
    assert cluster.stats()["cmdstat_RL.TOKEN"] == before


def test_raw_calls_of_the_same_client_route_locally_too(rc: RedisCluster, cluster: Cluster) -> None:
    # The Limiter tells the client's commands table where the limiters keep
    # their key: even the client's own execute_command needs no GETKEYS then.
    librl.Limiter(rc).fixed("raw", 5, 60)
    cluster.reset_stats()
    for i in range(20):
        rc.execute_command("RL.FIXED", f"raw{i}", 5, 60)
    assert cluster.stats()["getkeys"] == 0


def _other(cluster: Cluster, slot: int) -> object:
    owner = cluster.owner(slot)
    return next(n for n in cluster.nodes if n is not owner)


def test_resharding_mid_run(rc: RedisCluster, cluster: Cluster) -> None:
    """Move the slot of live limiter keys to another primary while calling:
    ASK during the migration, one MOVED after it, then quiet again."""
    limiter = librl.Limiter(rc)
    tag = "{reshard-sync}"
    key, fresh = f"{tag}:live", f"{tag}:fresh"
    slot = rc.keyslot(key)
    counts = [limiter.fixed(key, 1000, 600).count for _ in range(3)]
    assert counts == [1, 2, 3]
    cluster.reset_stats()

    def during() -> None:  # the key has moved, the slot has not yet
        for _ in range(3):
            counts.append(limiter.fixed(key, 1000, 600).count)
        assert limiter.token(fresh, 5, 60)
        assert limiter.all(librl.Fixed(key, 1000, 600), librl.Token(fresh, 5, 60))
        counts.append(counts[-1] + 1)

    target = _other(cluster, slot)
    cluster.move_slot(slot, target, between=during)  # type: ignore[arg-type]
    assert cluster.owner(slot) is target
    for _ in range(5):
        counts.append(limiter.fixed(key, 1000, 600).count)
    assert counts == list(range(1, len(counts) + 1))  # every call admitted and counted once
    moved = cluster.stats()
    assert moved["ask"] >= 3
    assert moved["moved"] == 1  # the first call after the move; the map is patched then
    assert moved["getkeys"] == 0
    cluster.reset_stats()
    run_mix(limiter, "after-reshard", 10)
    assert limiter.fixed(key, 1000, 600).count == counts[-1] + 1
    quiet = cluster.stats()
    assert (quiet["moved"], quiet["ask"], quiet["getkeys"]) == (0, 0, 0)


def test_all_follows_moved(rc: RedisCluster, cluster: Cluster) -> None:
    limiter = librl.Limiter(rc)
    tag = "{reshard-all}"
    clauses = (librl.Fixed(f"{tag}:a", 100, 600), librl.Token(f"{tag}:b", 100, 600))
    assert [limiter.all(*clauses).decisions[0].count for _ in range(2)] == [1, 2]
    slot = rc.keyslot(tag)
    cluster.move_slot(slot, _other(cluster, slot))  # type: ignore[arg-type]
    cluster.reset_stats()
    assert limiter.all(*clauses).decisions[0].count == 3
    assert limiter.all(*clauses).decisions[0].count == 4
    stats = cluster.stats()
    assert stats["moved"] == 1
    assert stats["getkeys"] <= 1  # RL.ALL's key position is not hinted to redis-py
