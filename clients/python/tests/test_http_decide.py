"""The Redis exchange of one request, without Redis (docs/http.md, One
decision per request): which RL.ALL calls a request's checks make, in
which order, given the module's replies; what a failure part-way refunds."""

from __future__ import annotations

from typing import List, Tuple

from librl import AllDecision, Decision
from librl.http import Engine, Request, parse
from librl.http._decide import Call, Exchange
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


def checks() -> List[Check]:
    """Four checks in three subject groups: ip (a, d), api-key (b), global (c)."""
    request = Request("GET", "/", {"x-api-key": [b"secret"]}, "203.0.113.7")
    plan = Engine(CONFIG).plan(request)
    assert isinstance(plan, Plan)
    return plan.checks


def reply(allowed: bool, n: int) -> AllDecision:
    decision = Decision(allowed, 1, 0 if allowed else 500, 5, 4, 60_000)
    return AllDecision(allowed, 0 if allowed else 500, (decision,) * n)


def shape(call: Call) -> Tuple[List[str], bool, bool]:
    """(the keys' policies, PEEK, a refund)."""
    clauses, peek = call
    names = [str(clause.key).rsplit(":", 1)[1] for clause in clauses]
    return names, peek, any(clause.refund for clause in clauses)


def run(exchange: Exchange, allowed: List[bool]) -> List[Tuple[List[str], bool, bool]]:
    sent = []
    for ok in allowed:
        call = exchange.next_call()
        assert call is not None
        sent.append(shape(call))
        exchange.answer(reply(ok, len(call[0])))
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
