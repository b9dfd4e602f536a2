"""Unit tests, no server: the argv of every command and option, argument
checks, reply parsing (RESP2 and RESP3 shapes) and the denial cache's clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster
from redis.exceptions import ConnectionError, InvalidResponse, SlotNotCoveredError

import librl
from librl import _args, _cache, _cluster
from librl._types import parse_all, parse_decision, parse_list, parse_override


def fixed(*a: Any, **kw: Any) -> list[Any]:
    return list(librl.Fixed(*a, **kw).args())


def sliding(*a: Any, **kw: Any) -> list[Any]:
    return list(librl.Sliding(*a, **kw).args())


def token(*a: Any, **kw: Any) -> list[Any]:
    return list(librl.Token(*a, **kw).args())


def test_fixed_argv() -> None:
    assert fixed("k", 10, 60) == ["FIXED", "k", 10, 60]
    assert fixed(b"k", 10, "1m", aligned=True, cost=3, block="1h", override="o") == [
        "FIXED", b"k", 10, "1m", "ALIGNED", "COST", 3, "BLOCK", "1h", "OVERRIDE", "o",
    ]  # fmt: skip
    assert fixed("k", 10, 60, refund=4) == ["FIXED", "k", 10, 60, "REFUND", 4]


def test_sliding_argv() -> None:
    assert sliding("k", 5, timedelta(seconds=1.5)) == ["SLIDING", "k", 5, "1500ms"]
    assert sliding("k", 5, 60, approx=True, cost=2, override=b"o") == [
        "SLIDING", "k", 5, 60, "APPROX", "COST", 2, "OVERRIDE", b"o",
    ]  # fmt: skip


def test_token_argv() -> None:
    assert token("k", 10, 1) == ["TOKEN", "k", 10, 1]
    assert token("k", 10, "1s", burst=50, cost=5, reserve=timedelta(seconds=2), block=30) == [
        "TOKEN", "k", 10, "1s", "BURST", 50, "COST", 5, "RESERVE", "2000ms", "BLOCK", 30,
    ]  # fmt: skip
    assert token("k", 1, 1, wait=0) == ["TOKEN", "k", 1, 1, "WAIT", 0]
    assert token("k", 1, 1, wait=timedelta(0)) == ["TOKEN", "k", 1, 1, "WAIT", "0ms"]
    assert token("k", 1, 1, refund=2, override="o") == [
        "TOKEN", "k", 1, 1, "REFUND", 2, "OVERRIDE", "o",
    ]  # fmt: skip


def test_all_argv() -> None:
    clauses = (librl.Fixed("a", 1, 1, aligned=True), librl.Token("b", 2, 3, burst=4))
    assert _args.all_args(clauses, False) == [
        "RL.ALL", "FIXED", "a", 1, 1, "ALIGNED", "TOKEN", "b", 2, 3, "BURST", 4,
    ]  # fmt: skip
    assert _args.all_args(clauses, True)[-1] == "PEEK"
    with pytest.raises(ValueError, match="at least one clause"):
        _args.all_args((), False)
    with pytest.raises(TypeError, match="clauses"):
        _args.all_args(("FIXED",), False)  # type: ignore[arg-type]


def test_override_argv() -> None:
    assert _args.override_set_args("o", 5, 60, None, None) == ["RL.OVERRIDE", "SET", "o", 5, 60]
    assert _args.override_set_args("o", 5, "1m", 10, timedelta(days=1)) == [
        "RL.OVERRIDE", "SET", "o", 5, "1m", "BURST", 10, "TTL", "86400000ms",
    ]  # fmt: skip
    assert _args.override_list_args(0, None, None) == ["RL.OVERRIDE", "LIST", 0]
    assert _args.override_list_args(7, "rl:*", 100) == [
        "RL.OVERRIDE", "LIST", 7, "MATCH", "rl:*", "COUNT", 100,
    ]  # fmt: skip


def test_without_override() -> None:
    # A call split while its slot is half-moved: OVERRIDE dropped, the
    # override's values in place of the call's own (docs/overrides.md).
    o = librl.Override(7, 60000, None, None)
    fixed: list[_args.Arg] = [
        "RL.FIXED", "k", 10, 60, "ALIGNED", "COST", 2, "OVERRIDE", "BURST", "PEEK",
    ]  # fmt: skip
    assert _args.without_override(fixed, None) == [
        "RL.FIXED",
        "k",
        10,
        60,
        "ALIGNED",
        "COST",
        2,
        "PEEK",
    ]
    assert _args.without_override(fixed, o) == [
        "RL.FIXED", "k", 7, "60000ms", "ALIGNED", "COST", 2, "PEEK",
    ]  # fmt: skip
    token: list[_args.Arg] = ["RL.TOKEN", "k", 10, 1, "BURST", 50, "WAIT", 0, "OVERRIDE", "o"]
    assert _args.without_override(token, o) == [
        "RL.TOKEN",
        "k",
        7,
        "60000ms",
        "WAIT",
        0,
        "BURST",
        7,
    ]
    burst = librl.Override(7, 60000, 20, 5000)
    assert _args.without_override(token, burst)[-2:] == ["BURST", 20]
    assert _args.without_override(token, None) == ["RL.TOKEN", "k", 10, 1, "BURST", 50, "WAIT", 0]
    renew: list[_args.Arg] = ["RL.CONCURRENT", "k", 5, "30s", "RENEW", 123, "OVERRIDE", "o"]
    assert _args.without_override(renew, o) == ["RL.CONCURRENT", "k", 7, "60000ms", "RENEW", 123]


def test_refund_words() -> None:
    # What gives back an admitted clause of a split RL.ALL that was denied.
    assert _args.refund_words(["RL.FIXED", "k", 10, 60, "ALIGNED", "COST", 3, "BLOCK", 5]) == [
        "RL.FIXED", "k", 10, 60, "ALIGNED", "REFUND", 3,
    ]  # fmt: skip
    assert _args.refund_words(["RL.TOKEN", "k", 7, "60000ms", "BURST", 7]) == [
        "RL.TOKEN", "k", 7, "60000ms", "BURST", 7, "REFUND", 1,
    ]  # fmt: skip
    assert _args.refund_words(["RL.SLIDING", "k", 5, 60, "APPROX"]) == [
        "RL.SLIDING", "k", 5, 60, "APPROX", "REFUND", 1,
    ]  # fmt: skip


def test_clause_value_semantics() -> None:
    a = librl.Fixed("k", 1, 60)
    assert a == librl.Fixed("k", 1, 60)
    assert a != librl.Sliding("k", 1, 60)
    assert hash(a) == hash(librl.Fixed("k", 1, 60))
    assert repr(a) == "<Fixed FIXED k 1 60>"
    assert a.keys() == ("k",)
    assert librl.Fixed("k", 1, 60, override="o").keys() == ("k", "o")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (60, 60),
        ("1500ms", "1500ms"),
        ("24h", "24h"),
        (timedelta(milliseconds=1), "1ms"),
        (timedelta(minutes=1), "60000ms"),
        (timedelta(days=3650), "315360000000ms"),
    ],
)
def test_durations(value: Any, expected: Any) -> None:
    assert _args.duration("window", value) == expected


@pytest.mark.parametrize("value", [1.5, 60.0, True, None, b"60", [60]])
def test_duration_types(value: Any) -> None:
    with pytest.raises(TypeError, match=r"window must be int seconds, a datetime\.timedelta"):
        librl.Fixed("k", 1, value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (timedelta(microseconds=1500), "not a whole number of milliseconds"),
        (timedelta(microseconds=1), "not a whole number of milliseconds"),
        (timedelta(0), "must be positive"),
        (timedelta(seconds=-1), "must be positive"),
    ],
)
def test_duration_values(value: timedelta, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        librl.Sliding("k", 1, value)


def test_zero_wait_allowed_but_not_negative() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        librl.Token("k", 1, 1, reserve=timedelta(milliseconds=-1))
    with pytest.raises(ValueError, match="must be positive"):
        librl.Token("k", 1, 1, block=timedelta(0))


def test_ranges_are_left_to_the_server() -> None:
    # The server's ERR message names the argument and the range; the client
    # sends what it is given.
    assert fixed("k", 0, -5, cost=0) == ["FIXED", "k", 0, -5, "COST", 0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 1.0}, "limit must be an int, not float"),
        ({"limit": "10"}, "limit must be an int, not str"),
        ({"limit": True}, "limit must be an int, not bool"),
        ({"cost": 2.5}, "cost must be an int, not float"),
        ({"cost": False}, "cost must be an int, not bool"),
        ({"key": 42}, "key must be str or bytes, not int"),
        ({"override": 42}, "override must be str or bytes, not int"),
        ({"refund": 1.0}, "refund must be an int, not float"),
    ],
)
def test_types(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"key": "k", "limit": 10, "window": 60}
    args.update(kwargs)
    with pytest.raises(TypeError, match=message):
        librl.Fixed(**args)


def test_mutually_exclusive() -> None:
    with pytest.raises(ValueError, match="cost and refund are mutually exclusive"):
        librl.Fixed("k", 1, 1, cost=2, refund=1)
    with pytest.raises(ValueError, match="cost and refund are mutually exclusive"):
        librl.Sliding("k", 1, 1, cost=2, refund=1)
    with pytest.raises(ValueError, match="reserve and wait are mutually exclusive"):
        librl.Token("k", 1, 1, reserve=1, wait=1)


class _Numpyish:
    def __index__(self) -> int:
        return 7


def test_index_types_are_ints() -> None:
    assert fixed("k", _Numpyish(), _Numpyish()) == ["FIXED", "k", 7, 7]


def test_parse_replies() -> None:
    d = parse_decision([1, 2, 0, 10, 8, 60000])
    assert d == librl.Decision(True, 2, 0, 10, 8, 60000)
    assert d
    assert not parse_decision([0, 10, 5, 10, 0, 5])
    a = parse_all([0, 500, [1, 1, 0, 5, 4, 1000], [0, 3, 500, 3, 0, 500]])
    assert not a
    assert a.retry_after_ms == 500
    assert a.decisions[1] == librl.Decision(False, 3, 500, 3, 0, 500)
    assert parse_override(None) is None
    assert parse_override([5, 60000, 0, -1]) == librl.Override(5, 60000, None, None)
    assert parse_override([5, 60000, 9, 1234]) == librl.Override(5, 60000, 9, 1234)
    assert parse_list([b"12", [[b"o", 5, 1000, 0, -1]]]) == (
        12,
        [librl.OverrideEntry(b"o", 5, 1000, None, None)],
    )
    assert parse_list(["0", []]) == (0, [])
    for bad in (None, [1, 2], b"OK"):
        with pytest.raises(InvalidResponse):
            parse_decision(bad)
    with pytest.raises(InvalidResponse):
        parse_all(None)
    with pytest.raises(InvalidResponse):
        parse_override([1, 2])
    with pytest.raises(InvalidResponse):
        parse_list([0, [[1]]])


def test_longer_replies_are_read_as_far_as_known() -> None:
    # A later librl may add fields after the ones a client knows
    # (docs/commands.md, The limiter reply): read those, ignore the rest,
    # whatever their type.
    known = librl.Decision(True, 2, 0, 10, 8, 60000)
    assert parse_decision([1, 2, 0, 10, 8, 60000, 7, b"new", [1, 2]]) == known
    assert parse_decision((1, 2, 0, 10, 8, 60000, 7)) == known
    leased = parse_decision([1, 2, 0, 10, 8, 60000, 2**53 - 1, 42], lease=True)
    assert leased == librl.Decision(True, 2, 0, 10, 8, 60000, 2**53 - 1)
    assert parse_decision([1, 2, 0, 10, 8, 60000], lease=False).lease_id == 0
    reply = [1, 0, [1, 1, 0, 5, 4, 1000, 9], [1, 1, 0, 2, 1, 30000, 77, 9], [0]]
    a = parse_all(reply, (False, True))
    assert a.decisions == (
        librl.Decision(True, 1, 0, 5, 4, 1000),
        librl.Decision(True, 1, 0, 2, 1, 30000, 77),
    )
    assert parse_override([5, 60000, 0, -1, b"later"]) == librl.Override(5, 60000, None, None)
    assert parse_list([b"0", [[b"o", 5, 1000, 0, -1, 3]], b"later"]) == (
        0,
        [librl.OverrideEntry(b"o", 5, 1000, None, None)],
    )
    # Shorter than known is still an error, and so is a lease id missing.
    for bad in ([1, 2, 0, 10, 8], b"abcdef", "abcdef"):
        with pytest.raises(InvalidResponse):
            parse_decision(bad)
    with pytest.raises(InvalidResponse):
        parse_decision([1, 2, 0, 10, 8, 60000], lease=True)
    with pytest.raises(InvalidResponse):
        parse_all([1, 0, [1, 1, 0, 5, 4, 1000]], (False, True))
    with pytest.raises(InvalidResponse):
        parse_override(b"OKAY")


def test_decision_is_frozen() -> None:
    d = librl.Decision(True, 1, 0, 1, 0, 1)
    with pytest.raises(AttributeError):
        d.allowed = False  # type: ignore[misc]


def test_limiter_refuses_wrong_clients() -> None:
    with pytest.raises(TypeError, match="AsyncLimiter"):
        librl.Limiter(redis.asyncio.Redis())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Limiter"):
        librl.AsyncLimiter(redis.Redis())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        librl.Limiter(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pipelines"):
        librl.Limiter(redis.Redis().pipeline())
    with pytest.raises(TypeError, match="pipelines"):
        librl.AsyncLimiter(redis.asyncio.Redis().pipeline())


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_denial_cache_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(_cache, "monotonic", clock)
    cache = _cache.DenialCache(10)
    denied = librl.Decision(False, 5, 1000, 5, 0, 1500)
    # Sent at 1000.000, the reply arrived 20 ms later.
    cache.put(("a",), ["k"], denied, 1000.0, 1000.020, 0)
    clock.now = 1000.020
    assert cache.get(("a",)) == denied
    clock.now = 1000.5209  # 500.9 ms after the reply: 500 ms are taken off
    assert cache.get(("a",)) == librl.Decision(False, 5, 500, 5, 0, 1000)
    clock.now = 1000.9999  # the entry ends 1000 ms after sending, never later
    hit = cache.get(("a",))
    assert hit is not None
    assert hit.retry_after_ms >= 1
    clock.now = 1001.0
    assert cache.get(("a",)) is None
    assert len(cache) == 0


def test_denial_cache_max_age(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(_cache, "monotonic", clock)
    cache = _cache.DenialCache(10, 0.3)
    blocked = librl.Decision(False, 1, 3_600_000, 1, 0, 3_600_000)
    cache.put(("a",), ["k"], blocked, 1000.0, 1000.0, 0)
    clock.now = 1000.2999
    assert cache.get(("a",)) is not None
    clock.now = 1000.3  # the max age, counted from sending, however long the block
    assert cache.get(("a",)) is None
    assert _cache.DenialCache(10).get(("a",)) is None


def test_denial_cache_all(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(_cache, "monotonic", clock)
    cache = _cache.DenialCache(10)
    ok = librl.Decision(True, 1, 0, 5, 4, 60000)
    short = librl.Decision(False, 3, 200, 3, 0, 200)
    long = librl.Decision(False, 9, 5000, 9, 0, 5000)
    reply = librl.AllDecision(False, 5000, (ok, short, long))
    cache.put(("all",), ["a", "b", "c"], reply, 1000.0, 1000.0, 0)
    clock.now = 1000.1
    hit = cache.get(("all",))
    assert isinstance(hit, librl.AllDecision)
    assert hit.retry_after_ms == 4900
    assert [d.retry_after_ms for d in hit.decisions] == [0, 100, 4900]
    # Cached only until the first denying clause could change its mind.
    clock.now = 1000.2
    assert cache.get(("all",)) is None
    # A clause that no wait helps: not cached at all.
    never = librl.AllDecision(False, -1, (short, librl.Decision(False, 9, -1, 9, 0, 0)))
    cache.put(("never",), ["a"], never, 1000.0, 1000.0, 0)
    assert cache.get(("never",)) is None


def test_denial_cache_forget_and_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(_cache, "monotonic", clock)
    cache = _cache.DenialCache(3)
    d = librl.Decision(False, 1, 1000, 1, 0, 1000)
    cache.put(("1",), ["k1"], d, 1000.0, 1000.0, cache.generation)
    cache.put(("2",), [b"k1", "k2"], d, 1000.0, 1000.0, cache.generation)
    cache.put(("3",), ["k3"], d, 1000.0, 1000.0, cache.generation)
    cache.forget_keys(["k1"])
    assert cache.get(("1",)) is None
    assert cache.get(("2",)) is None
    assert cache.get(("3",)) == d
    cache.put(("4",), ["k4"], d, 1000.0, 1000.0, cache.generation)
    cache.put(("5",), ["k5"], d, 1000.0, 1000.0, cache.generation)
    cache.put(("6",), ["k6"], d, 1000.0, 1000.0, cache.generation)  # full: the oldest goes
    assert len(cache) == 3
    assert cache.get(("3",)) is None
    # A denial sent before a refund or override change is not remembered.
    before = cache.generation
    cache.forget_keys(["k9"])
    cache.put(("7",), ["k7"], d, 1000.0, 1000.0, before)
    assert cache.get(("7",)) is None
    cache.clear()
    assert len(cache) == 0
    with pytest.raises(ValueError, match="at least 1"):
        _cache.DenialCache(0)


def test_key_position_hint() -> None:
    class Parser:
        commands: dict[str, Any]

    parser = Parser()
    parser.commands = {
        "rl.fixed": {"flags": ["write", "movablekeys"], "first_key_pos": 1, "last_key_pos": 1,
                     "step_count": 1},
        "rl.token": {"flags": {"write", "movablekeys"}, "first_key_pos": 1, "last_key_pos": 1,
                     "step_count": 1},
        "rl.all": {"flags": {"write", "movablekeys"}, "first_key_pos": 0, "last_key_pos": 0,
                   "step_count": 0},
        "get": {"flags": ["readonly"], "first_key_pos": 1, "last_key_pos": 1, "step_count": 1},
    }  # fmt: skip
    table = _cluster.hint_key_positions(parser)
    assert table is parser.commands
    assert parser.commands["rl.fixed"]["flags"] == ["write"]
    assert parser.commands["rl.token"]["flags"] == {"write"}
    assert parser.commands["rl.all"]["flags"] == {"write", "movablekeys"}  # not hinted
    assert _cluster.hint_key_positions(object()) is None


def test_retries() -> None:
    class Old:
        cluster_error_retry_attempts = 5

    class Retry:
        def get_retries(self) -> int:
            return 2

    class New:
        retry = Retry()

    assert _cluster.retries(Old()) == 5
    assert _cluster.retries(New()) == 2
    assert _cluster.retries(object()) == 3


class _ScriptedConnection:
    """A connection whose replies are scripted: each reply an error to raise
    or a value to return."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = replies
        self.sent = 0
        self.disconnected = 0

    def pack_commands(self, commands: Any) -> Any:
        return commands

    def send_packed_command(self, packed: Any) -> None:
        self.sent += 1

    def can_read(self, timeout: float) -> bool:
        return True

    def read_response(self) -> Any:
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def disconnect(self) -> None:
        self.disconnected += 1


class _FlakyCluster(RedisCluster):
    """A RedisCluster whose slot map and node are scripted (no server)."""

    def __init__(self, failures: list[Exception]) -> None:  # no super(): nothing to connect
        self.cluster_error_retry_attempts = 2
        self.reinitialized = 0
        self.conn = _ScriptedConnection([*failures, [1, 1, 0, 5, 4, 1000]])
        outer = self

        class Nodes:
            def initialize(self) -> None:
                outer.reinitialized += 1

        class Pool:
            def get_connection(self) -> Any:
                if outer.conn.replies and isinstance(outer.conn.replies[0], SlotNotCoveredError):
                    raise outer.conn.replies.pop(0)
                return outer.conn

            def release(self, conn: Any) -> None:
                pass

        class Node:
            redis_connection = type("Redis", (), {"connection_pool": Pool()})()

        self.node = Node()
        self.nodes_manager = Nodes()  # type: ignore[assignment]

    def get_node_from_key(self, key: Any, replica: bool = False) -> Any:
        return self.node

    def keyslot(self, key: Any) -> int:
        return 0


def test_cluster_retries_like_redis_cluster() -> None:
    client = _FlakyCluster([SlotNotCoveredError("stale"), ConnectionError("gone")])
    assert librl.Limiter(client).fixed("k", 5, 1)
    assert client.reinitialized == 2  # the stale map is reloaded, as after a lost connection
    assert client.conn.sent == 2  # the connection error was retried
    assert client.conn.disconnected == 1  # and its half-read connection dropped
    client = _FlakyCluster([ConnectionError("1"), ConnectionError("2"), ConnectionError("3")])
    with pytest.raises(ConnectionError, match="3"):
        librl.Limiter(client).fixed("k", 5, 1)
    assert client.conn.sent == 3  # the first try and cluster_error_retry_attempts=2 more
    client = _FlakyCluster([redis.ResponseError("ERR no")])
    with pytest.raises(redis.ResponseError):
        librl.Limiter(client).fixed("k", 5, 1)
    assert client.conn.sent == 1  # server errors are not retried
    # A held call (a WAIT option) is not resent after a connection error:
    # it may have run, and a resend could take a second lease.
    client = _FlakyCluster([ConnectionError("lost")])
    with pytest.raises(ConnectionError):
        librl.Limiter(client).token("k", 5, 1, wait=1)
    assert client.conn.sent == 1
