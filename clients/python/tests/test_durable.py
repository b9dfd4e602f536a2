"""durable=(numreplicas, timeout_ms): WAIT after every call that may write,
on a real primary with a real replica (and a primary without one)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio
from redis.cluster import RedisCluster

import librl
from servers import Server, start_server


@pytest.fixture(scope="module")
def replicated() -> Iterator[tuple[Server, Server]]:
    primary = start_server("redis")
    replica = start_server("redis", "--replicaof", "127.0.0.1", str(primary.port))
    try:
        with replica.client(decode_responses=True) as r:
            deadline = time.monotonic() + 15
            while r.info("replication").get("master_link_status") != "up":
                assert time.monotonic() < deadline, "the replica never synced"
                time.sleep(0.02)
        yield primary, replica
    finally:
        replica.stop()
        primary.stop()


def test_every_write_reaches_the_replica(replicated: tuple[Server, Server], key: str) -> None:
    primary, replica = replicated
    with primary.client() as r, replica.client() as rr:
        limiter = librl.Limiter(r, durable=(1, 1000))
        assert limiter.fixed(key, 2, 60)
        # WAIT returned: the replica has the key, with no sleep (a replica
        # refuses the limiters themselves, even PEEK: they are writes).
        assert rr.exists(key) == 1
        assert limiter.all(librl.Fixed(key, 2, 60), librl.Token(key + "t", 5, 60))
        assert rr.exists(key + "t") == 1
        limiter.override_set(key + "o", 9, 60)
        assert rr.execute_command("RL.OVERRIDE", "GET", key + "o")[0] == 9
        assert limiter.override_delete(key + "o") == 1
        # Reads do not wait, and errors come back as errors with the
        # connection still in step for the next call.
        assert limiter.fixed(key, 2, 60, peek=True).allowed is False
        with pytest.raises(redis.ResponseError, match="limit"):
            limiter.fixed(key, 0, 60)
        assert not limiter.fixed(key, 2, 60)


async def test_async_waits_too(replicated: tuple[Server, Server], key: str) -> None:
    primary, replica = replicated
    client = redis.asyncio.Redis(host="127.0.0.1", port=primary.port)
    try:
        limiter = librl.AsyncLimiter(client, durable=(1, 1000))
        assert await limiter.sliding(key, 3, 60)
        with replica.client() as rr:
            assert rr.exists(key) == 1
        with pytest.raises(redis.ResponseError, match="limit"):
            await limiter.sliding(key, 0, 60)
        assert (await limiter.sliding(key, 3, 60)).count == 2
    finally:
        await client.aclose()


def test_too_few_replicas_raise_with_the_reply(server: Server, key: str) -> None:
    with server.client() as r:
        limiter = librl.Limiter(r, durable=(1, 20))
        with pytest.raises(librl.DurabilityError, match="0 of 1 replicas") as caught:
            limiter.fixed(key, 5, 60)
        assert caught.value.replicas == 0
        assert caught.value.reply == librl.Decision(True, 1, 0, 5, 4, 60000)
        # Reads wait for nothing: PEEK and COST 0, alone or in RL.ALL.
        assert limiter.fixed(key, 5, 60, cost=0).count == 1
        assert limiter.all(librl.Fixed(key, 5, 60, cost=0), librl.Token(key + "t", 1, 60, cost=0))
        assert limiter.token(key + "t", 1, 60, peek=True)
        # The primary counted it: durability reports, it does not undo.
        # (PEEK reports the count a call would make: one more.)
        assert limiter.fixed(key, 5, 60, peek=True).count == 2


def test_durable_is_checked_at_construction(server: Server) -> None:
    with server.client() as r:
        with pytest.raises(TypeError, match="numreplicas, timeout_ms"):
            librl.Limiter(r, durable=1)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="at least 1"):
            librl.Limiter(r, durable=(0, 10))
        with pytest.raises(ValueError, match="timeout_ms must be >= 0"):
            librl.Limiter(r, durable=(1, -1))


def test_durable_costs_one_round_trip(replicated: tuple[Server, Server], key: str) -> None:
    """WAIT rides in the call's own round trip (sent with it, read after
    it): its price is the replica's acknowledgement, not a second request;
    PEEK sends no WAIT. Prints the figures."""
    primary, _ = replicated
    with primary.client() as r:
        plain, durable = librl.Limiter(r), librl.Limiter(r, durable=(1, 1000))
        # The best of 5 alternating batches: this machine is shared.
        best = {"plain": float("inf"), "durable": float("inf")}
        for _ in range(5):
            for name, limiter in (("plain", plain), ("durable", durable)):
                start = time.perf_counter()
                for _ in range(100):
                    limiter.fixed(key + name, 10**9, 60)
                best[name] = min(best[name], (time.perf_counter() - start) / 100 * 1e6)
        print(f"RL.FIXED {best['plain']:.0f} us a call, with WAIT 1: {best['durable']:.0f} us")
        r.config_resetstat()
        durable.fixed(key, 10, 60)
        durable.fixed(key, 10, 60, peek=True)
        stats = r.info("commandstats")
        assert stats["cmdstat_RL.FIXED"]["calls"] == 2
        assert stats["cmdstat_wait"]["calls"] == 1


def test_cluster_waits_on_the_owner(rc: RedisCluster, key: str) -> None:
    """In a cluster WAIT goes down the connection to the key's primary (these
    primaries have no replica: WAIT answers 0, after the call took effect)."""
    limiter = librl.Limiter(rc, durable=(1, 10))
    for k in (key, key + "a", key + "b"):
        with pytest.raises(librl.DurabilityError) as caught:
            limiter.token(k, 5, 60)
        assert caught.value.reply.count == 1
        assert rc.exists(k) == 1


async def test_async_cluster_waits_on_the_owner(arc: redis.asyncio.RedisCluster, key: str) -> None:
    limiter = librl.AsyncLimiter(arc, durable=(1, 10))
    for k in (key, key + "a", key + "b"):
        with pytest.raises(librl.DurabilityError):
            await limiter.fixed(k, 5, 60)
        assert await arc.exists(k) == 1
