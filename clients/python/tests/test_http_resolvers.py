"""Resolvers in code (docs/http.md, Resolvers), without Redis: how their
values become a request's plan, and every way one can be wrong. The
conformance cases check them over HTTP in FastAPI, Django and Flask."""

from __future__ import annotations

import asyncio
import datetime
import types
from typing import Any, Dict, Optional

import pytest

from librl.http import ConfigError, Engine, Request, parse
from librl.http._plan import Plan
from librl.http._refusals import Reply
from librl.http._resolvers import resolve, resolve_async, resolvers_of


def engine(policy: Dict[str, Any], resolvers: Any, **top: Any) -> Engine:
    return Engine(parse({**top, "policies": [policy]}, resolvers))


def planned(e: Engine, native: Any = None) -> Any:
    """The plan of a request from 127.0.0.1, its resolvers called."""
    plan = e.plan(Request("GET", "/", {}, "127.0.0.1", native=native))
    assert isinstance(plan, Plan)
    assert plan.resolving
    return e.resolved(plan, resolve(plan.resolving, plan.request.native))


FIXED = {"name": "p", "algorithm": "fixed", "limit": 5, "window": "60s"}


def test_a_cost_resolver_that_raises_is_the_400() -> None:
    def broken(request: Any) -> int:
        raise RuntimeError("no body")

    e = engine({**FIXED, "cost": "code:elements"}, {"cost": {"elements": broken}})
    reply = planned(e)
    assert isinstance(reply, Reply)
    assert reply.status == 400
    assert b'The cost \\"elements\\" must be an integer from 1 to 2^50.' in reply.body


@pytest.mark.parametrize("value", [0, -1, 2**50 + 1, True, 1.0, "3", None])
def test_a_cost_that_is_no_integer_from_1_to_2_50_is_the_400(value: Any) -> None:
    e = engine({**FIXED, "cost": "code:c"}, {"cost": {"c": lambda request: value}})
    reply = planned(e)
    assert isinstance(reply, Reply)
    assert reply.status == 400


def test_a_cost_resolver_receives_the_framework_request() -> None:
    seen = []

    def cost(request: Any) -> int:
        seen.append(request)
        return 2

    e = engine({**FIXED, "cost": "code:c"}, {"cost": {"c": cost}})
    plan = planned(e, native="the request")
    assert isinstance(plan, Plan)
    assert plan.checks[0].cost == 2
    assert seen == ["the request"]


def test_a_limit_resolver_gives_the_limit_window_and_burst() -> None:
    policy = {"name": "t", "algorithm": "token", "limit": "code:plan"}
    plan = planned(engine(policy, {"limit": {"plan": lambda r: (1, 60_000, 3)}}))
    assert isinstance(plan, Plan)
    checked = plan.checks[0].policy
    assert (checked.limit, checked.window_ms, checked.burst) == (1, 60_000, 3)
    window = datetime.timedelta(minutes=1)
    plan = planned(engine(policy, {"limit": {"plan": lambda r: (2, window)}}))
    assert isinstance(plan, Plan)
    assert plan.checks[0].policy.window_ms == 60_000


def test_a_limit_resolver_giving_nothing_drops_its_policy() -> None:
    policy = {"name": "plan", "algorithm": "fixed", "limit": "code:plan"}
    assert planned(engine(policy, {"limit": {"plan": lambda r: None}})) is None


@pytest.mark.parametrize("value", [5, (0, 1000), (5, 0), (5, "1s"), (5, 1000, 0), (1, 2, 3, 4)])
def test_a_limit_resolver_giving_something_else_fails_naming_it(value: Any) -> None:
    policy = {"name": "plan", "algorithm": "fixed", "limit": "code:plans"}
    with pytest.raises(ValueError, match="the limit resolver 'plans' gave"):
        planned(engine(policy, {"limit": {"plans": lambda r: value}}))


def test_a_mode_resolver_giving_something_else_fails_naming_it() -> None:
    e = engine(FIXED, {"mode": {"switch": lambda r: "monitor"}}, mode="code:switch")
    with pytest.raises(ValueError, match="the mode resolver 'switch' gave 'monitor'"):
        planned(e)


def test_a_mode_resolver_off_checks_nothing_and_shadow_puts_the_request_on_trial() -> None:
    mode: Dict[str, Optional[str]] = {"mode": "off"}
    e = engine(FIXED, {"mode": {"switch": lambda r: mode["mode"]}}, mode="code:switch")
    assert planned(e) is None
    mode["mode"] = "shadow"
    plan = planned(e)
    assert isinstance(plan, Plan)
    assert plan.mode == "shadow"


def test_an_async_resolver_under_wsgi_is_an_error_and_awaited_under_asgi() -> None:
    async def cost(request: Any) -> int:
        return 4

    e = engine({**FIXED, "cost": "code:c"}, {"cost": {"c": cost}})
    with pytest.raises(TypeError, match="the cost resolver 'c' is async"):
        planned(e)
    plan = e.plan(Request("GET", "/", {}, "127.0.0.1"))
    assert isinstance(plan, Plan)
    values = asyncio.run(resolve_async(plan.resolving, None))
    resolved = e.resolved(plan, values)
    assert isinstance(resolved, Plan)
    assert resolved.checks[0].cost == 4


def test_resolvers_of_refuses_an_unknown_kind_and_what_is_not_callable() -> None:
    with pytest.raises(TypeError, match="unknown kinds"):
        resolvers_of({"costs": {}})
    with pytest.raises(TypeError, match="is not callable"):
        resolvers_of({"cost": {"c": 5}})  # type: ignore[dict-item]


def test_a_configuration_without_resolvers_calls_none() -> None:
    plan = Engine(parse({"policies": [FIXED]})).plan(Request("GET", "/", {}, "127.0.0.1"))
    assert isinstance(plan, Plan)
    assert not plan.resolving
    assert plan.checks


def test_a_module_gives_its_functions_by_the_names_the_file_gives() -> None:
    views = types.ModuleType("views")
    views.elements = lambda request: 6  # type: ignore[attr-defined]
    views.LIMIT = 10  # type: ignore[attr-defined]
    found = resolvers_of(views)
    assert (found.module, dict(found.of("cost"))) == ("views", {"elements": views.elements})
    e = engine({**FIXED, "cost": "code:elements"}, views)
    plan = planned(e)
    assert isinstance(plan, Plan)
    assert plan.checks[0].cost == 6
    for name in ("LIMIT", "missing", "__init__"):
        with pytest.raises(ConfigError, match=f"the module views has no function {name}"):
            engine({**FIXED, "cost": f"code:{name}"}, views)
