"""block and queue (docs/http.md, Lockouts and queues) in the clauses the
checks send, and the turn an admitted request waits for, without Redis;
the conformance cases check them over HTTP."""

from __future__ import annotations

import re
from typing import Any, Dict

import pytest

from librl import Decision
from librl.http import ConfigError, Engine, Request, parse
from librl.http._decide import turn_ms
from librl.http._plan import Plan


def checks(*policies: Dict[str, Any]) -> Plan:
    plan = Engine(parse({"policies": list(policies)})).plan(Request("GET", "/", {}, "127.0.0.1"))
    assert isinstance(plan, Plan)
    return plan


TOKEN = {"name": "t", "algorithm": "token", "limit": 1, "window": "1s", "queue": "2s"}
FIXED = {"name": "f", "algorithm": "fixed", "limit": 1, "window": "1s", "block": "1h"}


def test_the_clauses_book_turns_and_start_blocks_and_their_refunds_do_neither() -> None:
    token, fixed = checks(TOKEN, FIXED).checks
    assert token.clause().args()[-2:] == ("RESERVE", "2000ms")
    assert fixed.clause().args()[-2:] == ("BLOCK", "3600000ms")
    for check in (token, fixed):
        words = check.clause(refund=True).args()
        assert "RESERVE" not in words
        assert "BLOCK" not in words


def test_a_request_waits_for_the_latest_turn_of_its_enforced_queues() -> None:
    plan = checks(TOKEN, {**TOKEN, "name": "u"}, {**TOKEN, "name": "s", "mode": "shadow"})
    replies = [Decision(True, 1, wait, 1, 0, 2000) for wait in (700, 1200, 1900)]
    assert turn_ms(plan.checks, replies) == 1200  # the shadow policy's turn is not waited for
    assert turn_ms(checks(FIXED).checks, [Decision(True, 1, 0, 1, 0, 1000)]) == 0


@pytest.mark.parametrize(
    ("policy", "path"),
    [
        ({**FIXED, "queue": "1s"}, "policies[0].queue"),
        (
            {"name": "c", "algorithm": "concurrency", "limit": 1, "lease": "1s", "block": "1m"},
            "policies[0].block",
        ),
    ],
)
def test_queue_only_on_token_and_no_block_on_concurrency(policy: Dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"configuration: {path}: ")):
        parse({"policies": [policy]})
