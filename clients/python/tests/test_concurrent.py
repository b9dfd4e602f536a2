"""Concurrency limits (docs/commands.md, RL.CONCURRENT) through the package:
acquire, release, renew, the ``with``/``async with`` scope, the background
renewal, WAIT on a connection of its own, RL.ALL's CONCURRENT clause, on
Redis 7.0 and Valkey 9.1 (RESP2 and RESP3) and a 3-primary cluster."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import List

import pytest
import redis
import redis.asyncio
from redis.cluster import RedisCluster

import librl
from servers import Cluster, Server


def test_acquire_and_release(limiter: librl.Limiter, key: str) -> None:
    first = limiter.acquire(key, 2, 30)
    assert first
    assert first.held
    assert first.id > 0
    assert first.decision == librl.Decision(True, 1, 0, 2, 1, 30000, first.id)
    second = limiter.acquire(key, 2, "30s")
    assert second.id == first.id + 1  # ids within a key are consecutive
    refused = limiter.acquire(key, 2, 30)
    assert not refused
    assert not refused.held
    assert refused.id == 0
    assert 29000 < refused.decision.retry_after_ms <= 30000
    assert refused.release() is None  # holds nothing: nothing sent
    released = first.release()
    assert released is not None
    assert released == librl.Decision(True, 1, 0, 2, 1, released.reset_after_ms, first.id)
    assert not first.held
    assert first.release() is released  # only the first release is sent
    assert limiter.acquire(key, 2, 30)  # the freed slot
    with pytest.raises(librl.LeaseLost):
        first.renew()


def test_the_scope_releases_however_the_block_ends(limiter: librl.Limiter, key: str) -> None:
    with limiter.concurrent(key, 1, 30) as lease:
        assert lease.held
        assert not limiter.acquire(key, 1, 30)
        with pytest.raises(librl.LeaseRefused) as refused, limiter.concurrent(key, 1, 30):
            pytest.fail("entered a full limit")
        assert refused.value.decision.count == 1
        assert refused.value.decision.retry_after_ms > 29000
        assert "retry in" in str(refused.value)
    assert not lease.held
    assert limiter.acquire(key, 1, 30, cost=0).decision.count == 0
    with pytest.raises(KeyError), limiter.concurrent(key, 1, 30):
        raise KeyError("the work failed")
    assert limiter.acquire(key, 1, 30, cost=0).decision.count == 0
    too_big = limiter.concurrent(key, 1, 30, cost=2)
    with pytest.raises(librl.LeaseRefused, match="the cost exceeds the limit"), too_big:
        pass


def test_renew(limiter: librl.Limiter, key: str) -> None:
    lease = limiter.acquire(key, 2, "1s")
    time.sleep(0.1)
    renewed = lease.renew()
    assert renewed is not None
    assert renewed.lease_id == lease.id
    assert renewed.reset_after_ms > 950  # a second again from now
    time.sleep(1.05)  # no renewal: it ends by itself
    with pytest.raises(librl.LeaseLost) as lost:
        lease.renew()
    assert lost.value.decision is not None
    assert not lost.value.decision.allowed
    assert lease.lost is lost.value
    assert not lease.held
    with pytest.raises(librl.LeaseLost):
        lease.renew()
    # Releasing an ended lease is not an error: the server says it was not held.
    ended = lease.release()
    assert ended is not None
    assert not ended.allowed


def test_keep_alive(limiter: librl.Limiter, r: redis.Redis, key: str) -> None:
    lost: List[BaseException] = []
    # (a lease of 800 ms, renewed every 267 ms: a loaded machine may stall
    # the renewing thread a few hundred ms without losing it)
    lease = limiter.acquire(key, 1, "800ms").keep_alive(lost.append)
    with pytest.raises(ValueError, match="kept alive already"):
        lease.keep_alive()
    time.sleep(1.7)  # more than twice its length: renewed meanwhile
    assert lease.held
    assert not limiter.acquire(key, 1, "800ms")
    assert lease.release()
    assert lost == []
    assert limiter.acquire(key, 1, "800ms", cost=0).decision.count == 0

    # Lost: the key deleted elsewhere; the next renewal finds the lease gone.
    other = key + ":lost"
    called = threading.Event()
    lease = limiter.acquire(other, 1, "300ms")

    def on_lost(error: BaseException) -> None:
        lost.append(error)
        called.set()

    lease.keep_alive(on_lost)
    r.delete(other)
    assert called.wait(2)
    assert isinstance(lost[-1], librl.LeaseLost)
    assert lease.lost is lost[-1]
    assert not lease.held

    with pytest.raises(librl.LeaseLost):
        limiter.acquire(other, 1, 30, cost=2).keep_alive()  # refused: not held


def test_cost_override_peek(limiter: librl.Limiter, r: redis.Redis, key: str) -> None:
    big = limiter.acquire(key, 5, 30, cost=3)
    assert (big.decision.count, big.decision.remaining) == (3, 2)
    peek = limiter.acquire(key, 5, 30, cost=2, peek=True)
    assert peek
    assert peek.id == 0  # a PEEK takes no lease
    assert peek.release() is None
    assert limiter.acquire(key, 5, 30, cost=0).decision.count == 3
    okey = key + ":o"
    limiter.override_set(okey, 1, "1m")
    over = limiter.acquire(key + ":x", 5, 30, override=okey)
    assert over.decision.limit == 1
    assert over.decision.reset_after_ms == 60000  # the override's window is the lease
    assert not limiter.acquire(key + ":x", 5, 30, override=okey)
    assert over.release()
    # A key without leases goes (at once, or once the clock has passed the
    # millisecond its ids come from: docs/commands.md, RL.CONCURRENT).
    time.sleep(0.01)
    assert r.exists(key + ":x") == 0


def test_held_lease_and_all(limiter: librl.Limiter, key: str) -> None:
    minute, inflight = f"{key}:min", librl.Concurrent(f"{key}:inflight", 1, "30s")
    d = limiter.all(librl.Fixed(minute, 100, 60), inflight)
    assert d
    assert d.decisions[0].lease_id == 0
    lease_id = d.decisions[1].lease_id
    assert lease_id > 0
    refused = limiter.all(librl.Fixed(minute, 100, 60), inflight)
    assert not refused
    assert refused.decisions[1].lease_id == 0  # nothing taken by a denied call
    assert limiter.fixed(minute, 100, 60, cost=0).count == 1  # nor counted
    with limiter.held_lease(inflight, lease_id) as lease:
        assert lease.id == lease_id
        assert lease.renew()
    assert limiter.acquire(inflight.key, 1, 30, cost=0).decision.count == 0
    for bad in (0, -1, 2**53):
        with pytest.raises(ValueError, match="lease_id"):
            limiter.held_lease(inflight, bad)
    with pytest.raises(TypeError, match="lease_id must be an int"):
        limiter.held_lease(inflight, 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Concurrent clause"):
        limiter.held_lease(librl.Fixed(minute, 1, 1), 1)  # type: ignore[arg-type]
    assert repr(lease).startswith(f"<Lease {lease_id} released <Concurrent CONCURRENT")


def test_errors(limiter: librl.Limiter, r: redis.Redis, key: str) -> None:
    with pytest.raises(redis.ResponseError, match="limit"):
        limiter.acquire(key, 0, 30)
    with pytest.raises(TypeError, match="lease must be int seconds"):
        librl.Concurrent(key, 1, 1.5)  # type: ignore[arg-type]
    r.set(key, "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        limiter.acquire(key, 1, 30)
    with pytest.raises(redis.ResponseError):  # the same key in two clauses
        limiter.all(librl.Concurrent(key + "c", 1, 30), librl.Concurrent(key + "c", 1, 30))
    with pytest.raises(TypeError):  # WAIT is RL.CONCURRENT's alone, not RL.ALL's clause's
        librl.Concurrent(key, 1, 30, wait=1)  # type: ignore[call-arg]


def test_wait_holds_a_connection_of_its_own(server: Server, key: str) -> None:
    # One connection shared by every call of the client, and a socket
    # timeout far shorter than the wait: the held call still waits, on a
    # connection of its own, and the client's other calls go on meanwhile.
    with server.client(single_connection_client=True, socket_timeout=0.3) as r:
        limiter = librl.Limiter(r)
        holder = limiter.acquire(key, 1, 30)
        got: List[librl.Lease] = []
        waiter = threading.Thread(target=lambda: got.append(limiter.acquire(key, 1, 30, wait=5)))
        started = time.monotonic()
        waiter.start()
        time.sleep(0.2)
        for i in range(5):  # not queued behind the waiter (it would time out)
            assert limiter.fixed(f"{key}:other{i}", 5, 60)
        time.sleep(max(0.0, 0.6 - (time.monotonic() - started)))
        assert holder.release()  # wakes the waiter at once
        waiter.join(5)
        assert got
        assert got[0].held
        assert 0.55 < time.monotonic() - started < 5
        # A wait that runs out is a refusal, not an error.
        started = time.monotonic()
        assert not limiter.acquire(key, 1, 30, wait="400ms")
        assert 0.35 < time.monotonic() - started < 3
        assert got[0].release()


def test_never_more_than_the_limit_held(server: Server, key: str) -> None:
    # Real concurrency: threads acquire and release at random; the slots
    # held, as the holders count them, never exceed the limit, and every
    # slot comes back.
    limit, threads, rounds = 3, 8, 25
    held, peak = [0], [0]
    lock = threading.Lock()

    def work(seed: int) -> None:
        rng = random.Random(seed)
        with server.client() as r:
            limiter = librl.Limiter(r)
            for _ in range(rounds):
                lease = limiter.acquire(key, limit, 30, wait="2s")
                if not lease:
                    continue
                with lock:
                    held[0] += 1
                    peak[0] = max(peak[0], held[0])
                time.sleep(rng.random() / 200)
                with lock:
                    held[0] -= 1
                assert lease.release()

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert 1 < peak[0] <= limit
    with server.client() as r:
        assert librl.Limiter(r).acquire(key, limit, 30, cost=0).decision.count == 0


async def test_async(ar: redis.asyncio.Redis, key: str) -> None:
    limiter = librl.AsyncLimiter(ar)
    async with limiter.concurrent(key, 1, "800ms", keep_alive=True) as lease:
        assert lease.held
        await asyncio.sleep(1.7)  # renewed by the task meanwhile
        assert not await limiter.acquire(key, 1, 30)
        with pytest.raises(librl.LeaseRefused):
            async with limiter.concurrent(key, 1, 30):
                pytest.fail("entered a full limit")
    assert not lease.held
    assert (await limiter.acquire(key, 1, 30, cost=0)).decision.count == 0
    taken = await limiter.acquire(key, 1, 30)
    assert taken
    assert await taken.renew()
    waiter = asyncio.ensure_future(limiter.acquire(key, 1, 30, wait=5))
    await asyncio.sleep(0.2)
    assert not waiter.done()
    assert (await limiter.fixed(key + ":other", 5, 60)).allowed  # not queued behind it
    assert await taken.release()
    woken = await asyncio.wait_for(waiter, 5)
    assert woken.held
    held = limiter.held_lease(librl.Concurrent(key, 1, 30), woken.id)
    async with held:
        pass
    with pytest.raises(librl.LeaseLost):
        await woken.renew()  # released through the handed-over lease: ended
    lost: List[BaseException] = []
    gone = await limiter.acquire(key + ":lost", 1, "300ms")
    gone.keep_alive(lost.append)
    await ar.delete(key + ":lost")
    for _ in range(100):
        if lost:
            break
        await asyncio.sleep(0.02)
    assert isinstance(lost[0], librl.LeaseLost)
    assert await gone.release() is not None


def test_cluster(rc: RedisCluster, cluster: Cluster, key: str) -> None:
    limiter = librl.Limiter(rc)
    limiter.acquire(f"{key}:warm", 1, 30).release()
    cluster.reset_stats()
    leases = [limiter.acquire(f"{key}:{i}", 2, 30) for i in range(30)]
    assert all(leases)
    assert all(lease.release() for lease in leases)
    tag = f"{{{key}}}"
    d = limiter.all(librl.Fixed(f"{tag}:min", 5, 60), librl.Concurrent(f"{tag}:n", 1, 30))
    with limiter.held_lease(librl.Concurrent(f"{tag}:n", 1, 30), d.decisions[1].lease_id):
        pass
    with limiter.concurrent(f"{tag}:x", 1, 30, override=f"{tag}:o"):
        pass
    stats = cluster.stats()
    assert (stats["getkeys"], stats["moved"], stats["ask"]) == (0, 0, 0)
    assert stats["cmdstat_RL.CONCURRENT"] == 63
    with pytest.raises(redis.exceptions.RedisClusterException, match="hash tag"):
        limiter.acquire("{a}:x", 1, 30, override="{b}:o")
    # WAIT in a cluster: on a connection of the key's node of its own.
    holder = limiter.acquire(f"{key}:w", 1, 30)
    got: List[librl.Lease] = []
    waiter = threading.Thread(target=lambda: got.append(limiter.acquire(f"{key}:w", 1, 30, wait=5)))
    waiter.start()
    time.sleep(0.3)
    assert holder.release()
    waiter.join(5)
    assert got
    assert got[0].held
    assert got[0].release()


def test_durable_leases(r: redis.Redis, key: str) -> None:
    # This primary has no replica: every write is answered, then
    # DurabilityError. An acquire's error carries the Lease, held on the
    # primary, to release; the scope releases it and raises.
    limiter = librl.Limiter(r, durable=(1, 5))
    with pytest.raises(librl.DurabilityError) as failed:
        limiter.acquire(key, 1, 30)
    lease = failed.value.reply
    assert isinstance(lease, librl.Lease)
    assert lease.held
    with pytest.raises(librl.DurabilityError):
        lease.release()
    assert not lease.held
    with pytest.raises(librl.DurabilityError) as raised, limiter.concurrent(key, 1, 30):
        pytest.fail("entered without a durable lease")
    assert isinstance(raised.value.reply, librl.Lease)  # the acquire's error
    assert not raised.value.reply.held
    assert librl.Limiter(r).acquire(key, 1, 30, cost=0).decision.count == 0
