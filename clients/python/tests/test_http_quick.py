"""A route's quick plan (docs/http/python.md, What a request costs): the
RL.ALL words made at start-up for a route whose one policy needs nothing
of a request but its subject are the words the whole plan sends, and an
admitted request's headers are the ones it makes; every other route gets
the whole plan; a reply the quick path does not expect is read as the
whole plan reads it."""

from __future__ import annotations

import http.client
import time
from typing import Any, Dict

import flask
import pytest

from http_servers import get, serving
from librl import Decision
from librl._args import all_args
from librl.http import Engine, Request, parse
from librl.http._headers import response_headers, served_headers
from librl.http._plan import Plan, Quick
from librl.http.flask import RateLimit as FlaskRateLimit
from servers import Server

#: One policy of each shape a quick plan takes.
QUICK = [
    {"algorithm": "fixed", "limit": 5, "window": "60s"},
    {"algorithm": "fixed", "limit": 5, "window": "1500ms", "aligned": True, "cost": 3},
    {"algorithm": "sliding", "limit": 5, "window": "1m", "key": "header:X-Tenant"},
    {"algorithm": "approx", "limit": 5, "window": "1m", "overridable": True, "key": "api-key"},
    {"algorithm": "token", "rate": "10/s", "burst": 20, "block": "5m", "key": "global"},
]

#: Policies whose requests need the whole plan.
WHOLE = [
    {"algorithm": "concurrency", "limit": 2, "lease": "30s"},
    {"algorithm": "fixed", "limit": 5, "window": "60s", "cost": "body-bytes"},
    {"algorithm": "fixed", "limit": 5, "window": "60s", "cost": "header:X-Cost"},
    {"algorithm": "fixed", "limit": 5, "window": "60s", "count": "failed"},
    {"algorithm": "fixed", "limit": 5, "window": "60s", "mode": "shadow"},
    {"algorithm": "token", "rate": "10/s", "queue": "1s"},
]


def request() -> Request:
    headers = {"x-tenant": [b"acme"], "x-api-key": [b"secret"]}
    return Request("GET", "/", headers, "203.0.113.7")


@pytest.mark.parametrize("policy", QUICK, ids=lambda p: p["algorithm"])
def test_a_quick_plan_sends_the_words_of_the_whole_plan(policy: Dict[str, Any]) -> None:
    config = parse({"prefix": "app:", "policies": [{"name": "p", **policy}]})
    engine = Engine(config)
    quick = engine.quick_plan(request())
    assert isinstance(quick, tuple)
    fast, subject = quick
    whole = engine.plan(request())
    assert isinstance(whole, Plan)
    (check,) = whole.checks
    assert subject == check.subject
    assert fast.words(subject) == all_args((check.clause(),), False)
    assert fast.key(subject) == check.key
    (planned,) = fast.plan(config, request(), subject).checks
    assert (planned.key, planned.override_key, planned.cost) == (
        check.key,
        check.override_key,
        check.cost,
    )


@pytest.mark.parametrize("policy", WHOLE, ids=lambda p: str(list(p.items())[-1]))
def test_other_policies_get_the_whole_plan(policy: Dict[str, Any]) -> None:
    engine = Engine(parse({"policies": [{"name": "p", **policy}]}))
    assert isinstance(engine.quick_plan(request()), Plan)


def test_two_policies_a_shadow_configuration_and_a_hook_get_the_whole_plan() -> None:
    one = {"name": "a", "algorithm": "fixed", "limit": 5, "window": "60s"}
    two = {"name": "b", "algorithm": "fixed", "limit": 9, "window": "60s"}
    assert isinstance(Engine(parse({"policies": [one, two]})).quick_plan(request()), Plan)
    shadow = parse({"mode": "shadow", "policies": [one]})
    assert isinstance(Engine(shadow).quick_plan(request()), Plan)
    hooked = Engine(parse({"policies": [one]}), lambda event: None)
    assert isinstance(hooked.quick_plan(request()), Plan)
    # A view's own policies: made once per set of names.
    engine = Engine(parse({"policies": [one, two]}))
    first = engine.quick_plan(request(), ("b",))
    assert isinstance(first, tuple)
    assert isinstance(first[0], Quick)
    assert engine.quick_plan(request(), ("b",))[0] is first[0]  # type: ignore[index]
    assert isinstance(engine.quick_plan(request(), ("a", "b")), Plan)
    with pytest.raises(ValueError, match="no policy named 'c'"):
        engine.quick_plan(request(), ("c",))
    with pytest.raises(ValueError, match="no policy named 'c'"):
        engine.quick_plan(request(), ("c",))  # not kept: it raises every time


def one_policy(name: str, limit: int, **top: Any) -> Dict[str, Any]:
    """A configuration of one fixed window a minute long, per client address."""
    policy = {"name": name, "algorithm": "fixed", "limit": limit, "window": "60s"}
    return {"exempt_loopback": False, **top, "policies": [policy]}


def test_a_reply_of_tuples_is_read_as_the_whole_plan_reads_it(redis_server: Server) -> None:
    """A client whose callback gives RL.ALL's reply as tuples: the quick
    path hands it to parse_all, and the request is decided as usual."""
    config = one_policy("t", 1, headers="legacy")
    app = flask.Flask(__name__)
    with redis_server.client() as r, redis_server.client() as own:
        r.delete("rl:{ip:127.0.0.1}:t")

        def as_tuples(reply: Any, **options: Any) -> Any:
            return tuple(tuple(x) if isinstance(x, list) else x for x in reply)

        own.set_response_callback("RL.ALL", as_tuples)
        FlaskRateLimit(app, config=config, client=own)
        app.add_url_rule("/", "ok", lambda: "ok")
        with serving("flask", app) as running:
            first, first_headers, _ = get(running.port, "/")
            second, second_headers, body = get(running.port, "/")
    assert (first, first_headers["x-ratelimit-remaining"]) == (200, "0")
    assert (second, second_headers["x-ratelimit-remaining"]) == (429, "0")
    assert b'"policy":"t"' in body


def test_a_reply_it_cannot_read_applies_the_fail_mode(redis_server: Server) -> None:
    """A reply that is no RL.ALL reply (a callback's): fail closed
    answers 503, as it does when Redis cannot answer."""
    config = one_policy("u", 5, fail="closed")
    app = flask.Flask(__name__)
    with redis_server.client() as own:
        own.set_response_callback("RL.ALL", lambda reply, **options: b"not a reply")
        FlaskRateLimit(app, config=config, client=own)
        app.add_url_rule("/", "ok", lambda: "ok")
        with serving("flask", app) as running:
            status, _, _ = get(running.port, "/")
    assert status == 503


def test_the_quick_words_go_to_a_real_server(redis_server: Server) -> None:
    config = parse(
        {"policies": [{"name": "q", "algorithm": "token", "rate": "10/s", "overridable": True}]}
    )
    quick = Engine(config).quick_plan(request())
    assert isinstance(quick, tuple)
    fast, subject = quick
    with redis_server.client() as r:
        r.delete(fast.key(subject))
        reply = r.execute_command(*fast.words(subject))
    assert reply[0] == 1
    assert reply[2][3] == 10  # the rate, as the whole plan sends it


@pytest.mark.parametrize("style", ["both", "ietf", "legacy", "draft6", "none"])
@pytest.mark.parametrize("limit", [20, 7], ids=["burst", "override"])
def test_an_admitted_requests_headers_are_the_whole_plans(style: str, limit: int) -> None:
    """The headers a quick plan makes from the reply's numbers, without a
    Decision, are the ones the whole plan makes from its Decision: a
    token policy's rate shown for its burst, an override's limit as it
    is."""
    config = parse(
        {
            "headers": style,
            "policies": [{"name": "p", "algorithm": "token", "rate": "10/s", "burst": 20}],
        }
    )
    (policy,) = config.policies
    decision = Decision(True, 3, 0, limit, limit - 3, 1500)
    _, whole = response_headers(config, (policy,), (decision,), False)
    assert served_headers(config, policy, limit, limit - 3, 1500) == whole


def test_a_unix_reset_counts_from_now() -> None:
    config = parse(
        {
            "headers": "legacy",
            "legacy_reset": "unix",
            "policies": [{"name": "p", "algorithm": "fixed", "limit": 5, "window": "60s"}],
        }
    )
    before = int(time.time())
    headers = dict(served_headers(config, config.policies[0], 5, 4, 30_000))
    assert before + 30 <= int(headers["X-RateLimit-Reset"]) <= int(time.time()) + 31


def test_flask_replaces_the_apps_own_rate_limit_headers_and_keeps_the_rest(
    redis_server: Server,
) -> None:
    """A view that set X-RateLimit-Limit (and Retry-After, which an
    admitted request's headers do not hold): the middleware's replaces
    the first, the second is the application's."""
    config = one_policy("own", 5, headers="legacy")
    app = flask.Flask(__name__)
    with redis_server.client() as r, redis_server.client() as own:
        r.delete("rl:{ip:127.0.0.1}:own")
        FlaskRateLimit(app, config=config, client=own)
        app.add_url_rule(
            "/", "ok", lambda: ("ok", 200, {"X-RateLimit-Limit": "99", "Retry-After": "5"})
        )
        with serving("flask", app) as running:
            conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=10)
            conn.request("GET", "/")
            response = conn.getresponse()
            lines = response.getheaders()
            conn.close()
    assert [v for k, v in lines if k.lower() == "x-ratelimit-limit"] == ["5"]
    assert [v for k, v in lines if k.lower() == "retry-after"] == ["5"]
