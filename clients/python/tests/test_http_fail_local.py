"""fail: local (docs/http.md, Fail modes) without Redis: a request's
checks decided by the process's own limiters, enforced all-or-nothing,
shadow ones apart; the conformance case fail-local-when-redis-is-down
checks it over HTTP with Redis down."""

from __future__ import annotations

from typing import Any, Dict, List

from librl.http import Engine, Request, parse
from librl.http._fail import decide_locally
from librl.http._local import LocalLimiter
from librl.http._plan import Check, Plan


def checks(*policies: Dict[str, Any], **top: Any) -> List[Check]:
    config = parse({"fail": "local", **top, "policies": list(policies)})
    assert config.fail == "local"
    plan = Engine(config).plan(Request("GET", "/", {"x-api-key": [b"k"]}, "127.0.0.1"))
    assert isinstance(plan, Plan)
    return plan.checks


def test_a_refused_request_is_counted_by_no_enforced_policy() -> None:
    local = LocalLimiter(10)
    wide = {"name": "wide", "algorithm": "fixed", "limit": 5, "window": "60s"}
    narrow = {"name": "narrow", "algorithm": "fixed", "limit": 1, "window": "60s", "key": "api-key"}
    both = checks(wide, narrow)
    assert decide_locally(local, both).admitted
    second = decide_locally(local, both)
    assert not second.admitted
    # The refusal counted nothing in wide: its count is still 1.
    assert decide_locally(local, checks(wide)).replies[0].count == 2


def test_shadow_policies_are_decided_apart_and_never_refuse() -> None:
    local = LocalLimiter(10)
    trial = {"name": "trial", "algorithm": "fixed", "limit": 1, "window": "60s", "mode": "shadow"}
    open_ = {"name": "open", "algorithm": "fixed", "limit": 9, "window": "60s"}
    assert decide_locally(local, checks(trial, open_)).admitted
    verdict = decide_locally(local, checks(trial, open_))
    assert verdict.admitted
    assert verdict.shadow_denied


def test_slots_are_held_when_served_and_freed_at_once_when_refused() -> None:
    local = LocalLimiter(10)
    slot = {"name": "slot", "algorithm": "concurrency", "limit": 1, "lease": "10s"}
    served = decide_locally(local, checks(slot))
    assert served.admitted
    assert len(served.leases) == 1
    assert not decide_locally(local, checks(slot)).admitted  # the slot is held
    held = served.leases[0]
    assert local.release(held.clause, held.lease_id)
    assert decide_locally(local, checks(slot)).admitted
