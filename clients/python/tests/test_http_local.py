"""The `local` fail mode's limiter (docs/http.md, Fail modes), without
Redis: librl-core's decisions (conformance/vectors/algorithms.json, run by
test_http_vectors.py through ``algorithm`` below), all-or-nothing checks,
concurrency slots, the key bound, and bad input refused before anything
changes."""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Sequence

import pytest

from librl._args import Clause, Concurrent, Fixed, Sliding, Token
from librl.http._local import LocalLimiter


def clause(given: Dict[str, Any], cost: int) -> Clause:
    """An algorithms.json sequence's policy as the clause the middleware builds."""
    algorithm, limit, window = given["algorithm"], given["limit"], f"{given['window_ms']}ms"
    if algorithm == "fixed":
        return Fixed("k", limit, window, aligned=given.get("aligned", False), cost=cost)
    if algorithm == "token":
        return Token("k", limit, window, burst=given.get("burst"), cost=cost)
    return Sliding("k", limit, window, approx=algorithm == "approx", cost=cost)


def algorithm(given: Dict[str, Any]) -> List[List[int]]:
    """algorithms.json's function: each call's six integers, one limiter."""
    local = LocalLimiter(10)
    out = []
    for now, cost in given["calls"]:
        d = local.check([clause(given, cost)], now_ms=now).decisions[0]
        out.append(
            [int(d.allowed), d.count, d.retry_after_ms, d.limit, d.remaining, d.reset_after_ms]
        )
    return out


def counts(local: LocalLimiter, clauses: Sequence[Clause], now: int) -> List[int]:
    return [d.count for d in local.check(clauses, peek=True, now_ms=now).decisions]


def test_a_request_one_clause_refuses_is_counted_by_none() -> None:
    local = LocalLimiter(100)
    minute, burst = Fixed("m", 10, 60), Fixed("b", 1, 10)
    first = local.check([minute, burst], now_ms=1_000)
    assert first.allowed
    assert [d.count for d in first.decisions] == [1, 1]
    for now in (1_001, 2_000, 3_000):
        verdict = local.check([minute, burst], now_ms=now)
        assert not verdict.allowed
        assert verdict.decisions[0].allowed, "the minute clause alone admits"
        assert not verdict.decisions[1].allowed
        assert verdict.retry_after_ms == verdict.decisions[1].retry_after_ms
    assert local.check([minute], now_ms=3_000).decisions[0].count == 2
    assert local.check([minute, burst], now_ms=10_999).retry_after_ms == 1
    assert local.check([minute, burst], now_ms=11_000).allowed


def test_the_longest_wait_and_never_win() -> None:
    local = LocalLimiter(10)
    assert local.check([Fixed("a", 1, 1), Fixed("b", 1, 5)], now_ms=0).allowed
    assert local.check([Fixed("a", 1, 1), Fixed("b", 1, 5)], now_ms=0).retry_after_ms == 5_000
    never = local.check([Fixed("a", 1, 1), Fixed("c", 1, 1, cost=2)], now_ms=0)
    assert never.retry_after_ms == -1
    assert never.decisions[1].remaining == 1


def test_peek_decides_and_records_nothing() -> None:
    local = LocalLimiter(10)
    for _ in range(3):
        verdict = local.check([Fixed("k", 1, 1)], peek=True, now_ms=0)
        assert verdict.allowed
        assert verdict.decisions[0].count == 1
    assert len(local) == 0


def test_every_algorithm_fills_then_refuses() -> None:
    for policy, admitted in (
        (Fixed("f", 3, 60), 3),
        (Sliding("s", 3, 60), 3),
        (Sliding("a", 3, 60, approx=True), 3),
        (Token("t", 3, 60, burst=5), 5),
        (Concurrent("c", 2, 60), 2),
    ):
        local = LocalLimiter(10)
        for i in range(admitted):
            assert local.check([policy], now_ms=1_000).allowed, (policy, i)
        verdict = local.check([policy], now_ms=1_000)
        assert not verdict.allowed, policy
        assert verdict.decisions[0].remaining == 0


def test_concurrency_slots_are_held_until_released() -> None:
    local = LocalLimiter(10)
    slots = Concurrent("c", 2, "10s")
    a = local.check([slots], now_ms=5).decisions[0]
    b = local.check([slots], now_ms=6).decisions[0]
    assert (a.lease_id, b.lease_id) == (5_001, 5_002)
    full = local.check([slots], now_ms=7).decisions[0]
    assert (full.allowed, full.lease_id, full.retry_after_ms) == (False, 0, 9_998)
    assert local.release(slots, a.lease_id, now_ms=8)
    assert not local.release(slots, a.lease_id, now_ms=8), "released once"
    c = local.check([slots], now_ms=9).decisions[0]
    assert (c.allowed, c.count, c.lease_id) == (True, 2, 5_003)
    # A lease ends by itself; releasing it afterwards frees nothing.
    assert not local.release(slots, b.lease_id, now_ms=10_006)
    assert local.check([slots], now_ms=10_006).decisions[0].count == 2


def test_a_refused_request_takes_no_slot() -> None:
    local = LocalLimiter(10)
    slots, once = Concurrent("c", 1, 10), Fixed("f", 1, 10)
    assert local.check([slots, once], now_ms=0).allowed
    local.release(slots, 1, now_ms=0)
    refused = local.check([Concurrent("d", 1, 10), once], now_ms=1)
    assert not refused.allowed
    assert refused.decisions[0].allowed
    assert refused.decisions[0].lease_id == 0, "nothing taken"
    assert local.check([Concurrent("d", 1, 10)], now_ms=2).allowed


def test_releasing_the_last_lease_drops_the_key_once_ids_caught_up() -> None:
    local = LocalLimiter(10)
    slots = Concurrent("c", 1, 10)
    lease = local.check([slots], now_ms=100).decisions[0].lease_id
    assert local.release(slots, lease, now_ms=200)
    assert len(local) == 0
    # The next id is still above every one given before.
    assert local.check([slots], now_ms=200).decisions[0].lease_id == 200_001


def test_a_key_goes_when_its_limiter_is_empty_again() -> None:
    local = LocalLimiter(10)
    assert local.check([Fixed("k", 1, 1)], now_ms=0).allowed
    assert not local.check([Fixed("k", 1, 1)], now_ms=999).allowed
    assert local.check([Fixed("k", 1, 1)], now_ms=1_000).decisions[0].count == 1
    assert len(local) == 1


def test_a_full_store_evicts_the_keys_closest_to_expiry() -> None:
    local = LocalLimiter(20)
    for i in range(10):
        local.check([Fixed(f"short{i}", 5, 1)], now_ms=0)
        local.check([Fixed(f"long{i}", 5, 3600)], now_ms=0)
    assert len(local) == 20
    local.check([Fixed("new", 5, 60)], now_ms=0)
    # The tenth closest to expiry and its equals went: the short windows.
    assert len(local) == 11
    assert counts(local, [Fixed("long0", 5, 3600), Fixed("short0", 5, 1)], 0) == [2, 1]
    # Expired keys go first, evicting nothing live.
    local.check([Fixed(f"x{i}", 5, 60) for i in range(9)], now_ms=0)
    assert len(local) == 20
    local.check([Fixed("one-more", 5, 60)], now_ms=60_000)
    assert len(local) == 11
    assert counts(local, [Fixed(f"long{i}", 5, 3600) for i in range(10)], 60_000) == [2] * 10


def test_one_key_is_never_evicted_for_itself() -> None:
    local = LocalLimiter(1)
    assert local.check([Fixed("a", 2, 60)], now_ms=0).allowed
    assert local.check([Fixed("a", 2, 60)], now_ms=0).decisions[0].count == 2
    assert local.check([Fixed("b", 2, 60)], now_ms=0).allowed
    assert len(local) == 1
    assert counts(local, [Fixed("a", 2, 60)], 0) == [1], "a was evicted: afresh"


def test_a_changed_algorithm_starts_afresh() -> None:
    local = LocalLimiter(10)
    assert local.check([Fixed("k", 1, 60)], now_ms=0).allowed
    assert local.check([Token("k", 1, 60)], now_ms=0).allowed


def test_a_token_window_changed_rescales_the_bucket() -> None:
    local = LocalLimiter(10)
    # 2 of 4 tokens taken, per 1 s; then per 2 s: the same 2 tokens missing.
    assert local.check([Token("k", 4, "1s", cost=2)], now_ms=0).allowed
    d = local.check([Token("k", 4, "2s")], now_ms=0).decisions[0]
    assert (d.count, d.remaining, d.reset_after_ms) == (3, 1, 1_500)


def test_a_clock_that_steps_back_stands_still() -> None:
    local = LocalLimiter(10)
    assert local.check([Fixed("k", 2, 1)], now_ms=5_000).allowed
    d = local.check([Fixed("k", 2, 1)], now_ms=10).decisions[0]
    assert (d.allowed, d.count, d.reset_after_ms) == (True, 2, 1_000)


def test_the_wall_clock_without_now() -> None:
    local = LocalLimiter(10)
    assert local.check([Fixed("k", 1, 60)]).allowed
    assert not local.check([Fixed("k", 1, 60)]).allowed
    lease = local.check([Concurrent("c", 1, 60)]).decisions[0].lease_id
    assert local.release(Concurrent("c", 1, 60), lease)


def test_reply_integers_saturate_as_the_modules() -> None:
    # 2^50 tokens refilled at 1 per 3650 days: full again after ~2^88 ms.
    local = LocalLimiter(10)
    d = local.check([Token("k", 1, "3650d", burst=2**50, cost=2**50)], now_ms=0).decisions[0]
    assert (d.allowed, d.count, d.reset_after_ms) == (True, 2**50, 2**63 - 1)


def test_overrides_block_and_reserve_are_not_read() -> None:
    local = LocalLimiter(10)
    token = Token("k", 1, 60, reserve="10s", block="1m", override="okey")
    assert local.check([token], now_ms=0).allowed
    d = local.check([token], now_ms=0).decisions[0]
    assert (d.allowed, d.retry_after_ms) == (False, 60_000), "no turn booked"


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (Fixed("k", 0, 60), ValueError),
        (Fixed("k", 2**50 + 1, 60), ValueError),
        (Fixed("k", 1, "0ms"), ValueError),
        (Fixed("k", 1, "3651d"), ValueError),
        (Fixed("k", 1, "soon"), ValueError),
        (Fixed("k", 1, 60, refund=1), ValueError),
        (Token("k", 1, 60, burst=0), ValueError),
        (Sliding("k", 1, 60, cost=0), ValueError),
        (Concurrent("k", 1, 60, cost=2**51), ValueError),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(bad: Clause, error: type) -> None:
    local = LocalLimiter(10)
    with pytest.raises(error):
        local.check([Fixed("good", 1, 60), bad], now_ms=0)
    assert len(local) == 0


def test_bad_calls_are_refused() -> None:
    local = LocalLimiter(10)
    with pytest.raises(ValueError, match="now_ms"):
        local.check([Fixed("k", 1, 60)], now_ms=-1)
    with pytest.raises(TypeError):
        local.check([Fixed("k", 1, 60)], now_ms=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        local.check(["FIXED k 1 60"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="Concurrent"):
        local.release(Fixed("k", 1, 60), 1)  # type: ignore[arg-type]
    assert len(local) == 0


def test_threads_never_admit_more_than_the_limit() -> None:
    local = LocalLimiter(1000)
    policy = Fixed("k", 500, 3600)
    admitted: List[bool] = []

    def run() -> None:
        for _ in range(200):
            admitted.append(local.check([policy], now_ms=0).allowed)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert admitted.count(True) == 500
