"""The Redis exchange of one request, without Redis (docs/http.md, One
decision per request): which RL.ALL calls a request's checks make, in
which order, given the module's replies; what a failure part-way refunds;
which concurrency slots a request holds and which are released
(docs/http.md, Concurrency limits)."""

from __future__ import annotations

from typing import List, Optional, Tuple

from librl import AllDecision, Decision
from librl.http import Config, Engine, Request, parse
from librl.http._decide import Exchange, Release, Step
from librl.http._plan import Check, Plan

CONFIG = parse(
    {
        "exempt_loopback": False,
        "api_key_header": "X-Api-Key",
        "policies": [
            {"name": "a", "algorithm": "fixed", "limit": 5, "window": "60s"},
            {"name": "b", "algorithm": "fixed", "limit": 5, "window": "60s", "key": "api-key"},
            {"name": "c", "algorithm": "token", "limit": 5, "window": "60s", "key": "global"},
            {"name": "d", "algorithm": "sliding", "limit": 5, "window": "60s"},
        ],
    }
)


#: A concurrency policy (overridable) beside a fixed one for the same
#: subject, and a fixed one for another.
SLOTS = parse(
    {
        "exempt_loopback": False,
        "policies": [
            {"name": "a", "algorithm": "fixed", "limit": 5, "window": "60s"},
            {
                "name": "s",
                "algorithm": "concurrency",
                "limit": 2,
                "lease": "30s",
                "cost": 2,
                "overridable": True,
            },
            {"name": "c", "algorithm": "token", "limit": 5, "window": "60s", "key": "global"},
        ],
    }
)

LEASE = 1_754_500_000_123_001


def checks(config: Config = CONFIG) -> List[Check]:
    """CONFIG: four checks in three subject groups: ip (a, d), api-key (b),
    global (c). SLOTS: two groups, ip (a, s) and global (c)."""
    request = Request("GET", "/", {"x-api-key": [b"secret"]}, "203.0.113.7")
    plan = Engine(config).plan(request)
    assert isinstance(plan, Plan)
    return plan.checks


def reply(allowed: bool, n: int, leases: Optional[List[int]] = None) -> AllDecision:
    """An RL.ALL reply of ``n`` clauses; ``leases``: each clause's lease id."""
    decisions = tuple(
        Decision(allowed, 1, 0 if allowed else 500, 5, 4, 60_000, lease)
        for lease in (leases or [0] * n)
    )
    return AllDecision(allowed, 0 if allowed else 500, decisions)


def shape(step: Step) -> Tuple[List[str], bool, bool]:
    """(the keys' policies, PEEK, a refund); a release: (["release <policy>
    <id> <its words>"], False, True)."""
    if isinstance(step, Release):
        words = " ".join(map(str, step.clause.lease_words("RELEASE", step.lease_id, False)))
        return [f"release {str(step.clause.key).rsplit(':', 1)[1]} {words}"], False, True
    clauses, peek = step
    names = [str(clause.key).rsplit(":", 1)[1] for clause in clauses]
    return names, peek, any(clause.refund for clause in clauses)


def run(
    exchange: Exchange, allowed: List[bool], leases: Optional[List[List[int]]] = None
) -> List[Tuple[List[str], bool, bool]]:
    sent = []
    for i, ok in enumerate(allowed):
        step = exchange.next_call()
        assert step is not None
        sent.append(shape(step))
        if isinstance(step, Release):
            exchange.answer(None)
        else:
            exchange.answer(reply(ok, len(step[0]), leases[i] if leases else None))
    return sent


def test_one_call_per_subject_in_order_of_first_appearance() -> None:
    exchange = Exchange(checks())
    assert run(exchange, [True, True, True]) == [
        (["a", "d"], False, False),
        (["b"], False, False),
        (["c"], False, False),
    ]
    assert exchange.next_call() is None
    verdict = exchange.verdict()
    assert verdict.admitted
    assert len(verdict.replies) == 4


def test_after_a_denial_later_groups_are_peeked_and_earlier_ones_refunded() -> None:
    exchange = Exchange(checks())
    assert run(exchange, [True, False, True, True]) == [
        (["a", "d"], False, False),
        (["b"], False, False),
        (["c"], True, False),  # PEEK: a reply for the headers, nothing recorded
        (["a", "d"], False, True),  # the admitted ip group given back
    ]
    assert exchange.next_call() is None
    assert not exchange.verdict().admitted
    assert exchange.failure_refunds() == []  # already refunded


def test_a_failure_refunds_only_the_groups_redis_admitted() -> None:
    exchange = Exchange(checks())
    run(exchange, [True])
    assert exchange.next_call() is not None  # the api-key group, never answered
    refunds = exchange.failure_refunds()
    assert [shape(call) for call in refunds] == [(["a", "d"], False, True)]
    assert exchange.failure_refunds() == []  # never twice


def test_a_refund_sent_is_not_sent_again_after_a_failure() -> None:
    exchange = Exchange(checks())
    run(exchange, [True, False, True])
    refund = exchange.next_call()  # the denial's refund of the ip group: no answer comes
    assert refund is not None
    assert shape(refund) == (["a", "d"], False, True)
    assert exchange.failure_refunds() == []


def test_a_failure_before_any_answer_refunds_nothing() -> None:
    exchange = Exchange(checks())
    assert exchange.next_call() is not None
    assert exchange.failure_refunds() == []


RELEASE_S = f"release s RL.CONCURRENT rl:{{ip:203.0.113.7}}:s 2 30000ms RELEASE {LEASE}"


def test_an_admitted_request_holds_its_slots_released_without_override() -> None:
    exchange = Exchange(checks(SLOTS))
    sent = run(exchange, [True, True], [[0, LEASE], [0]])
    assert sent == [(["a", "s"], False, False), (["c"], False, False)]
    # The clause that took the slots: COST and OVERRIDE.
    taken = [str(w) for w in checks(SLOTS)[1].clause().args()]
    assert taken == [
        "CONCURRENT",
        "rl:{ip:203.0.113.7}:s",
        "2",
        "30000ms",
        "COST",
        "2",
        "OVERRIDE",
        "rl:{ip:203.0.113.7}:override:s",
    ]
    verdict = exchange.verdict()
    assert verdict.admitted
    # The release names the lease and one key: no COST, no OVERRIDE.
    assert [shape(release) for release in verdict.leases] == [([RELEASE_S], False, True)]


def test_a_denial_releases_the_slots_of_an_earlier_group_and_refunds_the_rest() -> None:
    exchange = Exchange(checks(SLOTS))
    sent = run(exchange, [True, False, True, True], [[0, LEASE], [0], [], []])
    assert sent == [
        (["a", "s"], False, False),
        (["c"], False, False),
        (["a"], False, True),  # the fixed policy's refund, in RL.ALL
        ([RELEASE_S], False, True),  # the concurrency policy's slots, released
    ]
    assert exchange.next_call() is None
    verdict = exchange.verdict()
    assert (verdict.admitted, verdict.leases) == (False, [])


def test_a_denied_group_takes_no_slots() -> None:
    exchange = Exchange(checks(SLOTS))
    assert run(exchange, [False, True]) == [(["a", "s"], False, False), (["c"], True, False)]
    assert exchange.next_call() is None
    assert exchange.verdict().leases == []
    assert exchange.held() == []


def test_a_failure_gives_back_the_slots_or_the_served_request_holds_them() -> None:
    exchange = Exchange(checks(SLOTS))
    run(exchange, [True], [[0, LEASE]])
    assert exchange.next_call() is not None  # the global group, never answered
    # fail: open serves the request, which holds the slots Redis gave.
    assert [shape(release) for release in exchange.held()] == [([RELEASE_S], False, True)]
    # fail: closed refunds the group and releases its slots.
    assert [shape(step) for step in exchange.failure_refunds()] == [
        (["a"], False, True),
        ([RELEASE_S], False, True),
    ]


def test_slots_admitted_without_a_lease_are_not_released() -> None:
    # The module's monitor and off modes admit with lease 0: nothing is held.
    exchange = Exchange(checks(SLOTS))
    run(exchange, [True, True], [[0, 0], [0]])
    assert exchange.verdict().leases == []


#: Policy a enforced, s and g shadow (docs/http.md, Shadow mode): s shares
#: the ip subject with a, g is global.
SHADOWED = parse(
    {
        "policies": [
            {"name": "a", "algorithm": "fixed", "limit": 5, "window": "60s"},
            {"name": "s", "algorithm": "fixed", "limit": 5, "window": "60s", "mode": "shadow"},
            {"name": "g", "algorithm": "fixed", "limit": 5, "window": "60s", "key": "global"},
            {
                "name": "h",
                "algorithm": "fixed",
                "limit": 5,
                "window": "60s",
                "key": "global",
                "mode": "shadow",
            },
        ],
    }
)


def test_shadow_policies_go_in_their_own_calls_after_the_enforced_ones() -> None:
    exchange = Exchange(checks(SHADOWED))
    assert run(exchange, [True, True, False, True]) == [
        (["a"], False, False),
        (["g"], False, False),
        (["s"], False, False),  # the ip subject's shadow group
        (["h"], False, False),
    ]
    assert exchange.next_call() is None  # a shadow denial refunds nothing
    verdict = exchange.verdict()
    assert (verdict.admitted, verdict.shadow_denied) == (True, True)


def test_an_enforced_denial_neither_peeks_nor_refunds_a_shadow_group() -> None:
    exchange = Exchange(checks(SHADOWED))
    assert run(exchange, [True, False, True, True]) == [
        (["a"], False, False),
        (["g"], False, False),
        (["s"], False, False),  # sent as it is, counted
        (["h"], False, False),
    ]
    refund = exchange.next_call()
    assert refund is not None
    assert shape(refund) == (["a"], False, True)  # only the enforced group is given back
    assert exchange.next_call() is None
    assert not exchange.verdict().admitted


def test_the_top_level_shadow_checks_every_policy_as_enforce_would() -> None:
    exchange = Exchange(checks(parse({**SHADOWED.source, "mode": "shadow"})))
    assert run(exchange, [True, False]) == [(["a", "s"], False, False), (["g", "h"], False, False)]


def test_a_shadow_policy_that_denied_is_not_refunded_after_the_response() -> None:
    config = parse(
        {
            "policies": [
                {"name": "a", "algorithm": "fixed", "limit": 5, "window": "60s", "count": "failed"},
                {
                    "name": "s",
                    "algorithm": "fixed",
                    "limit": 5,
                    "window": "60s",
                    "count": "failed",
                    "mode": "shadow",
                },
            ],
        }
    )
    exchange = Exchange(checks(config))
    run(exchange, [True, False])
    planned = checks(config)
    calls = Engine(config).settlement(planned, exchange.verdict(), 200)
    assert [shape(call) for call in calls] == [(["a"], False, True)]
