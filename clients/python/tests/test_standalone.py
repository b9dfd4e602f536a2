"""Limiter over a standalone server (Redis 7.0 and Valkey 9.1, RESP2 and
RESP3): every command, PEEK, errors, and the denial cache."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import redis

import librl
from librl._types import parse_decision
from servers import Server


def test_fixed(limiter: librl.Limiter, key: str) -> None:
    first = limiter.fixed(key, 2, 60)
    assert first == librl.Decision(True, 1, 0, 2, 1, 60000)
    assert limiter.fixed(key, 2, 60)
    denied = limiter.fixed(key, 2, 60)
    assert not denied
    assert denied.count == 2
    assert denied.remaining == 0
    assert 59000 < denied.retry_after_ms <= 60000
    assert limiter.fixed(key, 2, 60, cost=3).retry_after_ms == -1


def test_fixed_aligned_and_windows(limiter: librl.Limiter, key: str) -> None:
    d = limiter.fixed(key, 5, timedelta(minutes=1), aligned=True)
    assert d.allowed
    assert 0 < d.reset_after_ms <= 60000
    d = limiter.fixed(key + "ms", 5, "1500ms")
    assert d.reset_after_ms == 1500


def test_sliding(limiter: librl.Limiter, key: str) -> None:
    assert limiter.sliding(key, 3, 60, cost=3)
    d = limiter.sliding(key, 3, 60)
    assert not d
    assert d.count == 3
    a = limiter.sliding(key + "a", 3, 60, approx=True)
    assert a == librl.Decision(True, 1, 0, 3, 2, a.reset_after_ms)


def test_token(limiter: librl.Limiter, key: str) -> None:
    d = limiter.token(key, 10, 60, burst=50, cost=50)  # a token every 6 s
    assert d == librl.Decision(True, 50, 0, 50, 0, 300_000)
    d = limiter.token(key, 10, 60, burst=50)
    assert not d
    assert 0 < d.retry_after_ms <= 6000


def test_peek_changes_nothing(limiter: librl.Limiter, r: redis.Redis, key: str) -> None:
    assert limiter.fixed(key, 1, 60, peek=True)
    assert r.exists(key) == 0
    assert limiter.fixed(key, 1, 60)
    assert not limiter.fixed(key, 1, 60, peek=True)


def test_cost_zero_reads_without_counting(limiter: librl.Limiter, key: str) -> None:
    assert limiter.fixed(key, 3, 60).count == 1
    for call in (
        lambda: limiter.fixed(key, 3, 60, cost=0),
        lambda: limiter.all(librl.Fixed(key, 3, 60, cost=0)).decisions[0],
    ):
        read = call()
        assert (read.allowed, read.count, read.remaining) == (True, 1, 2)
    assert limiter.sliding(key + "s", 3, 60, cost=0).count == 0
    assert limiter.token(key + "t", 3, 60, cost=0).remaining == 3
    assert limiter.fixed(key, 3, 60).count == 2  # the reads counted nothing


def test_all_or_nothing(limiter: librl.Limiter, key: str) -> None:
    minute, day = f"{key}:min", f"{key}:day"
    ok = limiter.all(librl.Fixed(minute, 2, 60), librl.Sliding(day, 100, "1d"))
    assert ok
    assert ok.retry_after_ms == 0
    assert [d.count for d in ok.decisions] == [1, 1]
    assert limiter.all(librl.Fixed(minute, 2, 60), librl.Sliding(day, 100, "1d"))
    denied = limiter.all(librl.Fixed(minute, 2, 60), librl.Sliding(day, 100, "1d"))
    assert not denied
    assert denied.retry_after_ms > 0
    assert not denied.decisions[0].allowed
    assert denied.decisions[1].allowed  # not a reason for the denial
    # Nothing recorded in the per-day limit by the denied call (a PEEK
    # answers as if it were made: the two admitted calls plus itself).
    assert limiter.sliding(day, 100, "1d", peek=True).count == 3
    peek = limiter.all(librl.Token(key, 5, 60), peek=True)
    assert peek
    assert len(peek.decisions) == 1


def test_server_errors_are_redis_errors(limiter: librl.Limiter, r: redis.Redis, key: str) -> None:
    with pytest.raises(redis.ResponseError, match="limit"):
        limiter.fixed(key, 0, 60)
    with pytest.raises(redis.ResponseError, match="window"):
        limiter.fixed(key, 1, -5)
    with pytest.raises(redis.ResponseError, match="window"):
        limiter.sliding(key, 1, "5y")
    r.set(key, "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        limiter.token(key, 1, 1)
    with pytest.raises(redis.ResponseError):
        limiter.all(librl.Fixed(key + "1", 1, 1), librl.Fixed(key + "1", 1, 1))


def test_decoded_and_bytes_keys(server: Server, key: str) -> None:
    with server.client(decode_responses=True) as r:
        limiter = librl.Limiter(r)
        assert limiter.fixed(key, 5, 60).count == 1
        assert limiter.fixed(key.encode(), 5, 60).count == 2


def _calls(r: redis.Redis, command: str) -> int:
    stats = r.info("commandstats").get(f"cmdstat_{command}", {})
    return int(stats.get("calls", 0)) if isinstance(stats, dict) else 0


def test_denial_cache_keeps_redis_out(r: redis.Redis, key: str) -> None:
    limiter = librl.Limiter(r, denial_cache=True)
    assert limiter.fixed(key, 1, 60)
    denied = limiter.fixed(key, 1, 60)
    assert not denied
    before = _calls(r, "RL.FIXED")
    again = [limiter.fixed(key, 1, 60) for _ in range(50)]
    assert _calls(r, "RL.FIXED") == before
    assert not any(again)
    assert all(0 < d.retry_after_ms <= denied.retry_after_ms for d in again)
    # Another call (other arguments) still goes to the server.
    assert not limiter.fixed(key, 1, 60, cost=1, aligned=False, peek=True)
    assert _calls(r, "RL.FIXED") == before + 1
    # Cost beyond the limit (-1): never cached.
    assert limiter.fixed(key, 1, 60, cost=2).retry_after_ms == -1
    assert limiter.fixed(key, 1, 60, cost=2).retry_after_ms == -1
    assert _calls(r, "RL.FIXED") == before + 3
    # Admitted calls are never cached.
    assert limiter.fixed(key + "x", 5, 60)
    assert limiter.fixed(key + "x", 5, 60).count == 2


def test_denial_cache_expires(r: redis.Redis, key: str) -> None:
    limiter = librl.Limiter(r, denial_cache=True)
    # Two calls in one 150 ms window, however loaded the machine is.
    while not (denied := limiter.fixed(key, 1, "150ms")).retry_after_ms:
        pass
    assert not limiter.fixed(key, 1, "150ms")  # cached
    time.sleep(denied.retry_after_ms / 1000 + 0.01)
    assert limiter.fixed(key, 1, "150ms")


def test_denial_cache_all(r: redis.Redis, key: str) -> None:
    limiter = librl.Limiter(r, denial_cache=True)
    clauses = (librl.Fixed(key + "a", 1, 60), librl.Fixed(key + "b", 5, 60))
    assert limiter.all(*clauses)
    assert not limiter.all(*clauses)
    before = _calls(r, "RL.ALL")
    assert not limiter.all(*clauses)
    assert _calls(r, "RL.ALL") == before
    limiter.clear_denial_cache()
    assert not limiter.all(*clauses)
    assert _calls(r, "RL.ALL") == before + 1


def test_a_reply_longer_than_known_is_read_as_far_as_known(r: redis.Redis, key: str) -> None:
    # RL.CONCURRENT's reply is the six integers and a seventh: the limiter
    # reply's parser reads the six and ignores the rest (docs/commands.md,
    # The limiter reply), as it will a field a later librl adds.
    reply = r.execute_command("RL.CONCURRENT", key, 2, 30)
    assert len(reply) == 7
    assert parse_decision(reply) == librl.Decision(True, 1, 0, 2, 1, 30000)


def test_a_block_deleted_elsewhere_is_honoured_within_the_max_age(
    r: redis.Redis, server: Server, key: str
) -> None:
    max_age = 0.2
    limiter = librl.Limiter(r, denial_cache=True, denial_cache_max_age=max_age)

    def call() -> librl.Decision:
        return limiter.fixed(key, 1, 60, block="1h")

    assert call()
    sent = time.monotonic()
    blocked = call()
    assert not blocked
    assert blocked.retry_after_ms > 59 * 60_000
    # The operator lifts the block from elsewhere (redis-cli DEL).
    with server.client() as operator:
        operator.delete(key)
    cached = 0
    while not call():
        cached += 1
        assert time.monotonic() - sent < max_age + 1, "the lifted block is still cached"
        time.sleep(0.01)
    took = time.monotonic() - sent
    assert cached > 0  # the denial was cached meanwhile ...
    assert took < max_age + 0.1  # ... at most its max age

    # Sooner: forget_denials after a DEL, clear_denial_cache after an
    # override set elsewhere.
    limiter = librl.Limiter(r, denial_cache=True)
    assert not call()  # the loop's admitted call filled the limit: blocked again
    r.delete(key)
    assert not call()  # cached
    limiter.forget_denials(key)
    assert call()
    plan, okey = key + ":plan", key + ":o"
    assert limiter.fixed(plan, 1, 60, override=okey)
    assert not limiter.fixed(plan, 1, 60, override=okey)
    r.execute_command("RL.OVERRIDE", "SET", okey, 10, "1m")
    assert not limiter.fixed(plan, 1, 60, override=okey)  # cached
    limiter.clear_denial_cache()
    raised = limiter.fixed(plan, 1, 60, override=okey)
    assert raised
    assert raised.limit == 10
    limiter.forget_denials(okey)  # an override key is a key the cache knows
    with pytest.raises(TypeError):
        limiter.forget_denials(42)  # type: ignore[arg-type]


def test_denial_cache_max_age_option(r: redis.Redis, key: str) -> None:
    off = librl.Limiter(r, denial_cache=True, denial_cache_max_age=0)
    assert off.fixed(key, 1, 60)
    before = _calls(r, "RL.FIXED")
    assert not off.fixed(key, 1, 60)
    assert not off.fixed(key, 1, 60)
    assert _calls(r, "RL.FIXED") == before + 2  # max age 0: nothing cached
    for age in ("500ms", timedelta(seconds=2), 3, 0.5):
        librl.Limiter(r, denial_cache=True, denial_cache_max_age=age)
    with pytest.raises(ValueError, match="denial_cache_max_age must be >= 0"):
        librl.Limiter(r, denial_cache=True, denial_cache_max_age=-1.0)
    with pytest.raises(ValueError, match="denial_cache_max_age"):
        librl.Limiter(r, denial_cache=True, denial_cache_max_age="soon")
