"""The Python integrations beyond the conformance cases: each framework's
own idiom for per-view policies (FastAPI dependency, Django decorator,
Flask decorator), user resolvers, the decision hook with the Prometheus
example, configuration files, and start-up errors. Real servers, real
HTTP, a real Redis with the module."""

from __future__ import annotations

import functools
import hashlib
import http.client
import json
import logging
from pathlib import Path
from typing import Any, Dict, List, MutableMapping, Optional

import django_app
import flask
import metrics
import pytest
import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpResponse
from django.urls import path as django_path
from fastapi import Depends, FastAPI
from prometheus_client import REGISTRY
from starlette.requests import Request as StarletteRequest

from http_servers import get, serving
from librl.http import ConfigError, DecisionEvent, load
from librl.http.django import check, rate_limit
from librl.http.fastapi import RateLimit as FastAPIRateLimit
from librl.http.flask import RateLimit as FlaskRateLimit
from servers import Server

CONFIG: Dict[str, Any] = {
    "exempt_loopback": False,
    "timeout": "5s",  # not a timeout test: a loaded machine must not fail it open (as 250 ms did)
    "policies": [
        {"name": "everywhere", "algorithm": "fixed", "limit": 100, "window": "60s"},
        {"name": "view", "algorithm": "fixed", "limit": 1, "window": "60s", "key": "user"},
    ],
    "routes": [{"path": "/", "policies": ["everywhere"]}],
}


def view_policy_holds(port: int, path: str, user_header: str = "X-User") -> None:
    """``path`` is checked by the "view" policy alone (one request per user),
    others by the routes' "everywhere"."""
    status, headers, _ = get(port, path, {user_header: "ann"})
    assert status == 200
    assert headers["ratelimit-policy"] == '"view";q=1;w=60'
    status, headers, body = get(port, path, {user_header: "ann"})
    assert status == 429
    assert headers["content-type"].startswith("application/problem+json")
    assert json.loads(body)["policy"] == "view"
    assert get(port, path, {user_header: "bob"})[0] == 200  # another user's counter
    status, headers, _ = get(port, "/elsewhere", {user_header: "ann"})
    assert (status, headers["ratelimit-policy"]) == (200, '"everywhere";q=100;w=60')


def test_fastapi_dependency_and_user_resolver(url: str) -> None:
    limits = FastAPIRateLimit(CONFIG, url=url, user=lambda scope: _header(scope, b"x-user"))
    app = FastAPI()
    limits.install(app, middleware=False)  # only the dependency checks

    @app.get("/search", dependencies=[Depends(limits.policies("view"))])
    async def search() -> Dict[str, List[str]]:
        return {"results": []}

    @app.get("/{rest:path}")
    async def other(rest: str) -> str:
        return "ok"

    with serving("fastapi", app) as running:
        status, headers, _ = get(running.port, "/search", {"X-User": "ann"})
        assert (status, headers["ratelimit-policy"]) == (200, '"view";q=1;w=60')
        status, _, body = get(running.port, "/search", {"X-User": "ann"})
        assert status == 429
        assert json.loads(body)["policy"] == "view"
        assert get(running.port, "/search", {"X-User": "bob"})[0] == 200
        status, headers, _ = get(running.port, "/elsewhere")
        assert (status, "ratelimit" in headers) == (200, False)
    with pytest.raises(ValueError, match="no policy named 'nope'"):
        limits.policies("nope")


def _header(scope: MutableMapping[str, Any], name: bytes) -> Optional[str]:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode())
    return None


def user_from_header(request: Any) -> Optional[str]:
    """A Django user resolver, named by its dotted path in settings.LIBRL."""
    name = request.headers.get("X-User")
    return str(name) if name else None


@rate_limit("view")
def decorated(request: Any) -> HttpResponse:
    return HttpResponse("ok")


def api_key_required(view: Any) -> Any:
    """An application's authentication decorator: 401 unless the key is known."""

    @functools.wraps(view)
    def authenticated(request: Any) -> Any:
        if request.headers.get("X-Api-Key") != "known":
            return HttpResponse("unknown API key", status=401)
        return view(request)

    return authenticated


@api_key_required
@check("per-key")
def secured(request: Any) -> HttpResponse:
    return HttpResponse("ok")


@api_key_required
def secured_by_the_middleware(request: Any) -> HttpResponse:
    return HttpResponse("ok")


urlpatterns = [
    django_path("search", decorated),
    django_path("elsewhere", lambda request: HttpResponse("ok")),
    django_path("secured", secured),
    django_path("secured-by-the-middleware", rate_limit("per-key")(secured_by_the_middleware)),
]


def test_django_decorator_and_user_setting(url: str) -> None:
    django_app.make_app(CONFIG, url=url)  # configures Django once per process
    saved = settings.ROOT_URLCONF
    settings.ROOT_URLCONF = __name__
    settings.LIBRL = {"config": CONFIG, "url": url, "user": f"{__name__}.user_from_header"}
    try:
        with serving("django", WSGIHandler()) as running:
            view_policy_holds(running.port, "/search")
    finally:
        settings.ROOT_URLCONF = saved


def test_django_check_runs_after_the_views_authentication(url: str) -> None:
    config = {
        "policies": [
            {
                "name": "per-key",
                "algorithm": "fixed",
                "limit": 1,
                "window": "60s",
                "key": "api-key",
            },
        ],
    }
    django_app.make_app(config, url=url)
    saved = settings.ROOT_URLCONF
    settings.ROOT_URLCONF = __name__
    settings.LIBRL = {"config": config, "url": url}
    try:
        with serving("django", WSGIHandler()) as running:
            # check() under the authentication decorator: an unknown key is
            # the application's 401 every time, never counted, never 429.
            for _ in range(3):
                status, headers, _ = get(running.port, "/secured", {"X-Api-Key": "unknown"})
                assert (status, "ratelimit" in headers) == (401, False)
            assert get(running.port, "/secured", {"X-Api-Key": "known"})[0] == 200
            status, headers, _ = get(running.port, "/secured", {"X-Api-Key": "known"})
            assert (status, headers.get("retry-after") is not None) == (429, True)
            # The middleware's check (process_view) runs before the view's
            # decorators: the unknown key is counted, then refused with 429.
            statuses = [
                get(running.port, "/secured-by-the-middleware", {"X-Api-Key": "other"})[0]
                for _ in range(2)
            ]
            assert statuses == [401, 429]
    finally:
        settings.ROOT_URLCONF = saved


def test_django_check_names_a_policy_of_the_configuration(url: str) -> None:
    django_app.make_app(CONFIG, url=url)
    saved = settings.ROOT_URLCONF
    settings.ROOT_URLCONF = __name__
    settings.LIBRL = {"config": CONFIG, "url": url}
    try:
        with serving("django", WSGIHandler()) as running:
            # CONFIG has no policy "per-key": the view's check raises, a 500.
            assert get(running.port, "/secured", {"X-Api-Key": "known"})[0] == 500
    finally:
        settings.ROOT_URLCONF = saved


def test_django_without_settings_is_improperly_configured() -> None:
    django_app.make_app(CONFIG)
    settings.LIBRL = {"url": "redis://127.0.0.1:1"}
    with pytest.raises(ImproperlyConfigured, match=r"settings\.LIBRL must be a dict with 'config'"):
        WSGIHandler()


def rows_of(request: Any) -> int:
    """A cost resolver found in this module by the name the file gives
    (LIBRL["resolvers"] names the module)."""
    return int(request.headers.get("X-Rows", "1"))


def switched(request: Any) -> str:
    """A mode resolver found in this module, as rows_of is."""
    return "off" if request.headers.get("X-Off") else "enforce"


BY_MODULE: Dict[str, Any] = {
    "mode": "code:switched",
    "policies": [
        {
            "name": "rows-by-module",
            "algorithm": "fixed",
            "limit": 5,
            "window": "60s",
            "key": "global",
            "cost": "code:rows_of",
        },
    ],
}


def test_django_resolvers_found_in_a_module_by_name(url: str) -> None:
    django_app.make_app(CONFIG, url=url)
    settings.LIBRL = {"config": BY_MODULE, "url": url, "resolvers": __name__}
    with serving("django", WSGIHandler()) as running:
        status, headers, _ = get(running.port, "/", {"X-Rows": "3"})
        assert (status, headers["ratelimit-policy"]) == (200, '"rows-by-module";q=5;w=60')
        assert headers["ratelimit"] == '"rows-by-module";r=2;t=60'
        status, headers, _ = get(running.port, "/", {"X-Rows": "3", "X-Off": "1"})
        assert (status, "ratelimit" in headers) == (200, False)  # off: not counted
        assert get(running.port, "/", {"X-Rows": "3"})[0] == 429
        assert get(running.port, "/", {"X-Rows": "2"})[0] == 200


def test_django_a_resolver_the_module_lacks_fails_at_start_up() -> None:
    django_app.make_app(CONFIG)
    config = {**BY_MODULE, "policies": [{**BY_MODULE["policies"][0], "cost": "code:nope"}]}
    settings.LIBRL = {"config": config, "url": "redis://127.0.0.1:1", "resolvers": __name__}
    with pytest.raises(
        ConfigError,
        match=rf'policies\[0\]\.cost: no cost resolver is registered as "nope" '
        rf"\(the module {__name__} has no function nope\)",
    ):
        WSGIHandler()
    # The mode's name is looked up as the costs' are.
    settings.LIBRL = {
        "config": {**BY_MODULE, "mode": "code:BY_MODULE"},  # not a function
        "url": "redis://127.0.0.1:1",
        "resolvers": __name__,
    }
    with pytest.raises(ConfigError, match=r'mode: no mode resolver is registered as "BY_MODULE"'):
        WSGIHandler()
    settings.LIBRL = {"config": CONFIG, "resolvers": "no_such_module.views"}
    with pytest.raises(ImproperlyConfigured, match=r"'no_such_module\.views' is neither a module"):
        WSGIHandler()


BY_PROJECT: Dict[str, Any] = {
    "exempt_loopback": False,
    "timeout": "5s",
    "identities": {"user": ["attribute:project"]},
    "policies": [
        {"name": "by-project", "algorithm": "fixed", "limit": 1, "window": "60s", "key": "user"}
    ],
}


def project_from_header(request: Any) -> Any:
    """What an application's authentication leaves on the request: a
    project id as an int (a boolean stands for a value of another type)."""
    given = request.headers.get("X-Project")
    return True if given == "true" else int(given) if given else None


def by_project(view: Any) -> Any:
    """A Django authentication decorator leaving the project on the request."""

    @functools.wraps(view)
    def authenticated(request: Any) -> Any:
        request.project = project_from_header(request)
        return view(request)

    return authenticated


@by_project
@check("by-project")
def project_view(request: Any) -> HttpResponse:
    return HttpResponse("ok")


urlpatterns.append(django_path("project", project_view))


def project_app(framework: str, url: str) -> Any:
    """``/project`` checked by BY_PROJECT after the application's own code
    set the attribute, in each framework's idiom."""
    if framework == "fastapi":
        limits = FastAPIRateLimit(BY_PROJECT, url=url)
        app = FastAPI()
        limits.install(app, middleware=False)

        async def authenticate(request: StarletteRequest) -> None:
            request.state.project = project_from_header(request)

        depends = [Depends(authenticate), Depends(limits.policies("by-project"))]

        async def project() -> str:
            return "ok"

        app.get("/project", dependencies=depends)(project)
        return app
    if framework == "flask":
        flask_app = flask.Flask(__name__)

        @flask_app.before_request
        def login() -> None:
            flask.g.project = project_from_header(flask.request)

        extension = FlaskRateLimit(flask_app, config=BY_PROJECT, url=url)

        @flask_app.get("/project")
        @extension.policies("by-project")
        def project_in_flask() -> str:
            return "ok"

        return flask_app
    django_app.make_app(CONFIG, url=url)
    settings.ROOT_URLCONF = __name__
    settings.LIBRL = {"config": BY_PROJECT, "url": url}
    return WSGIHandler()


@pytest.mark.parametrize("framework", ["fastapi", "django", "flask"])
def test_an_integer_attribute_keys_by_its_decimal_text(framework: str, url: str) -> None:
    saved = settings.ROOT_URLCONF if settings.configured else None
    try:
        with serving(framework, project_app(framework, url)) as running:
            assert get(running.port, "/project", {"X-Project": "42"})[0] == 200
            assert get(running.port, "/project", {"X-Project": "42"})[0] == 429
            assert get(running.port, "/project", {"X-Project": "43"})[0] == 200
            # A boolean is no value: the request's address is the subject.
            assert get(running.port, "/project", {"X-Project": "true"})[0] == 200
            client = redis.Redis.from_url(url)
            keys = ["rl:{user:42}:by-project", "rl:{user:43}:by-project"]
            assert client.exists(*keys, "rl:{ip:127.0.0.1}:by-project") == 3
            assert client.dbsize() == 3
    finally:
        if saved is not None:
            settings.ROOT_URLCONF = saved


def test_flask_decorator_and_g_user(url: str) -> None:
    app = flask.Flask(__name__)

    @app.before_request
    def login() -> None:
        flask.g.user = flask.request.headers.get("X-User")

    limits = FlaskRateLimit(app, config=CONFIG, url=url)

    @app.get("/search")
    @limits.policies("view")
    def search() -> str:
        return "ok"

    @app.get("/elsewhere")
    def elsewhere() -> str:
        return "ok"

    with serving("flask", app) as running:
        view_policy_holds(running.port, "/search")
    with pytest.raises(ValueError, match="no policy named 'nope'"):
        limits.policies("nope")


def sample(name: str, labels: Dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.parametrize("framework", ["fastapi", "django", "flask"])
def test_decision_hook_feeds_prometheus(
    framework: str, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from http_servers import factories

    events: List[DecisionEvent] = []

    def hook(event: DecisionEvent) -> None:
        metrics.record(event)
        events.append(event)

    config = {
        "exempt_loopback": False,
        "timeout": "5s",
        "mode": "shadow",
        "policies": [{"name": "hooked", "algorithm": "fixed", "limit": 1, "window": "60s"}],
    }
    denied = {"outcome": "would_deny"}
    before = sample("librl_http_decisions_total", denied)
    before_policy = sample("librl_http_policy_denials_total", {"policy": "hooked"})
    app = factories()[framework](config, url=url, on_decision=hook)
    with caplog.at_level(logging.WARNING, logger="librl.http"), serving(framework, app) as running:
        assert get(running.port, "/a")[0] == 200
        status, headers, _ = get(running.port, "/a")
        assert status == 200  # shadow: never refused
        assert "retry-after" not in headers
    assert sample("librl_http_decisions_total", denied) == before + 1
    assert sample("librl_http_policy_denials_total", {"policy": "hooked"}) == before_policy + 1
    assert [e.outcome for e in events] == ["allowed", "would_deny"]
    check = events[1].checks[0]
    assert (check.policy, check.subject, check.key, check.cost) == (
        "hooked",
        "ip:127.0.0.1",
        "rl:{ip:127.0.0.1}:hooked",
        1,
    )
    assert check.decision is not None
    assert not check.decision.allowed
    assert "would be denied by policy 'hooked'" in caplog.text


def test_a_failing_hook_is_logged_and_ignored(url: str, caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: DecisionEvent) -> None:
        raise RuntimeError("metrics are down")

    app = django_app.make_app(
        {"exempt_loopback": False, "policies": CONFIG["policies"][:1]}, url=url, on_decision=broken
    )
    with caplog.at_level(logging.ERROR, logger="librl.http"), serving("django", app) as running:
        assert get(running.port, "/")[0] == 200
    assert "the decision hook failed" in caplog.text


def test_configuration_files(tmp_path: Path) -> None:
    yaml_file = tmp_path / "policies.yaml"
    yaml_file.write_text("policies:\n  - {name: p, rate: 5/10s, algorithm: token, burst: 9}\n")
    config = load(yaml_file)
    assert (config.policies[0].limit, config.policies[0].window_ms) == (5, 10_000)
    json_file = tmp_path / "policies.json"
    json_file.write_text(json.dumps(CONFIG))
    assert [p.name for p in load(str(json_file)).policies] == ["everywhere", "view"]
    assert load(config) is config
    examples = Path(__file__).resolve().parents[3] / "conformance" / "examples" / "policies.yaml"
    assert load(examples).routes[0].path == "/upload"
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(
        ConfigError, match=r"^librl: configuration: \(file\): .*bad\.json is not JSON: "
    ):
        load(bad)
    (tmp_path / "bad.yaml").write_text("policies: [")
    with pytest.raises(
        ConfigError, match=r"^librl: configuration: \(file\): .*bad\.yaml is not YAML: "
    ):
        load(tmp_path / "bad.yaml")
    with pytest.raises(
        ConfigError, match=r"^librl: configuration: \(file\): cannot read .*missing\.yaml: "
    ):
        load(tmp_path / "missing.yaml")
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(ConfigError, match=r"\(document\): must be an object"):
        load(tmp_path / "list.json")


@pytest.mark.parametrize("fail", ["open", "closed"])
@pytest.mark.parametrize("framework", ["fastapi", "django", "flask"])
def test_redis_failing_mid_exchange_counts_a_served_request_only(
    framework: str, fail: str, url: str, redis_server: Server
) -> None:
    """docs/http.md, One decision per request: the ip group is admitted,
    then the api-key group's RL.ALL fails (its key is a string:
    WRONGTYPE). Fail open serves the request, without headers, and the ip
    group stays counted; fail closed refuses it with the 503, and refunds
    the ip group first."""
    from http_servers import factories

    config = {
        "exempt_loopback": False,
        "timeout": "5s",
        "fail": fail,
        "policies": [
            {"name": "by-ip", "algorithm": "fixed", "limit": 5, "window": "60s"},
            {"name": "by-key", "algorithm": "fixed", "limit": 5, "window": "60s", "key": "api-key"},
        ],
    }
    key_id = "2bb80d537b1da3e38bd30361aa855686"  # sha256("secret")[:32]
    with redis_server.client() as r:
        r.set(f"rl:{{api-key:{key_id}}}:by-key", "not a limiter")
        app = factories()[framework](config, url=url)
        with serving(framework, app) as running:
            status, headers, body = get(running.port, "/", {"X-Api-Key": "secret"})
        assert "ratelimit" not in headers
        # PEEK reports the count a call would make: what is recorded, plus one.
        peeked = r.execute_command("RL.FIXED", "rl:{ip:127.0.0.1}:by-ip", 5, 60, "PEEK")[1]
    if fail == "open":
        assert (status, peeked) == (200, 2)
    else:
        assert (status, peeked) == (503, 1)
        assert json.loads(body)["detail"] == (
            "The rate limiter is unavailable, and this service does not admit unlimited requests."
        )


#: Spellings of a path and whether each is checked against a /limited route
#: (docs/http.md, The canonical path); each framework hands the path it got
#: (raw under uvicorn, decoded once under waitress) and must agree.
SPELLINGS = [
    ("/limited", True),
    ("//limited", True),
    ("/a//../limited", True),
    ("/limited/", True),
    ("/./limited", True),
    ("/x/../limited", True),
    ("/../../limited", True),
    ("/limited;jsessionid=1", True),
    ("/LIMITED", True),
    ("/%6Cimited", True),
    ("/limited%2Fx", True),
    ("/limited%252Fx", True),
    ("/limited?x=1", True),
    ("/limited%3Fx", False),  # a decoded ? is part of the segment
    ("/limitedx", False),
    ("/lim%FFited", False),
    ("/other/limited", False),
]


@pytest.mark.parametrize("framework", ["fastapi", "django", "flask"])
def test_every_spelling_of_a_route_path_is_checked_against_it(framework: str, url: str) -> None:
    from http_servers import factories

    config = {
        "exempt_loopback": False,
        "timeout": "5s",
        "policies": [{"name": "p", "algorithm": "fixed", "limit": 100, "window": "60s"}],
        "routes": [{"path": "/LIMITED/", "policies": ["p"]}],
    }
    app = factories()[framework](config, url=url)
    with serving(framework, app) as running:
        checked = {path: "ratelimit" in get(running.port, path)[1] for path, _ in SPELLINGS}
    assert checked == dict(SPELLINGS)


@pytest.mark.parametrize("framework", ["fastapi", "django", "flask"])
def test_header_values_are_keyed_by_their_bytes(
    framework: str, url: str, redis_server: Server
) -> None:
    """X-Api-Key sent as the bytes FC 6E EF ("\u00fcn\u00ef" in Latin-1) is hashed as
    those three bytes, whether the server hands them over as bytes (ASGI)
    or as Latin-1 text (WSGI); so is an unsafe header-key value."""
    from http_servers import factories

    config = {
        "exempt_loopback": False,
        "timeout": "5s",
        "policies": [
            {"name": "k", "algorithm": "fixed", "limit": 5, "window": "60s", "key": "api-key"},
            {"name": "h", "algorithm": "fixed", "limit": 5, "window": "60s", "key": "header:X-T"},
        ],
    }
    raw = b"\xfc\x6e\xef"
    digest = hashlib.sha256(raw).hexdigest()[:32]
    app = factories()[framework](config, url=url)
    with serving(framework, app) as running:
        assert get(running.port, "/", {"X-Api-Key": raw, "X-T": raw})[0] == 200
    with redis_server.client() as r:
        assert sorted(r.keys()) == [
            f"rl:{{api-key:{digest}}}:k".encode(),
            f"rl:{{header:x-t:sha256-{digest}}}:h".encode(),
        ]


def test_a_reply_after_the_timeout_is_refunded_when_fail_is_closed(
    url: str, redis_server: Server
) -> None:
    """A blocking client with a socket timeout of its own longer than the
    configuration's: Redis is paused past the 50 ms timeout, then admits
    the call; the reply came, late, so fail closed refunds what it
    admitted before the 503."""
    config = {
        "exempt_loopback": False,
        "fail": "closed",
        "timeout": "50ms",
        "policies": [{"name": "late", "algorithm": "fixed", "limit": 5, "window": "60s"}],
    }
    app = flask.Flask(__name__)
    with redis_server.client() as r, redis_server.client(socket_timeout=5) as own:
        FlaskRateLimit(app, config=config, client=own)

        @app.get("/")
        def index() -> str:
            return "ok"

        with serving("flask", app) as running:
            r.execute_command("CLIENT", "PAUSE", 300, "WRITE")
            status, _, _ = get(running.port, "/")
        assert status == 503
        # PEEK reports the count a call would make: nothing recorded, plus one.
        assert r.execute_command("RL.FIXED", "rl:{ip:127.0.0.1}:late", 5, 60, "PEEK")[1] == 1


def test_override_key_is_the_key_the_middleware_reads(url: str, redis_server: Server) -> None:
    config = {
        "policies": [
            {
                "name": "plan",
                "algorithm": "fixed",
                "limit": 2,
                "window": "1m",
                "key": "header:X-Tenant",
                "overridable": True,
            },
        ],
    }
    app = flask.Flask(__name__)
    limits = FlaskRateLimit(app, config=config, url=url)
    app.add_url_rule("/", "ok", lambda: "ok")
    okey = limits.override_key("plan", header="acme")
    assert okey == "rl:{header:x-tenant:acme}:override:plan"
    assert limits.override_key("plan", "acme") == okey
    redis_server.client().execute_command("RL.OVERRIDE", "SET", okey, 7, "1m")
    with serving("flask", app) as running:
        _, acme, _ = get(running.port, "/", {"X-Tenant": "acme"})
        _, other, _ = get(running.port, "/", {"X-Tenant": "other"})
    assert (acme["x-ratelimit-limit"], other["x-ratelimit-limit"]) == ("7", "2")
    with pytest.raises(ValueError, match="keyed by header, not user"):
        limits.override_key("plan", user="acme")
    with pytest.raises(ValueError, match="no policy named 'nope'"):
        limits.override_key("nope", header="acme")
    with pytest.raises(TypeError, match="give the subject once"):
        limits.override_key("plan", "acme", header="acme")


def test_flask_refusal_passes_after_request_and_werkzeugs_rules(url: str) -> None:
    """A refusal is a Flask response like any other: what after_request
    adds is sent, a Location it sets is still made a URI by Werkzeug, and
    a HEAD gets the headers without the body."""
    config = {
        "exempt_loopback": False,
        "timeout": "5s",
        "headers": "legacy",
        "policies": [{"name": "once", "algorithm": "fixed", "limit": 1, "window": "60s"}],
    }
    app = flask.Flask(__name__)
    FlaskRateLimit(app, config=config, url=url)
    app.add_url_rule("/", "ok", lambda: "ok", methods=["GET", "HEAD"])

    @app.after_request
    def stamp(response: flask.Response) -> flask.Response:
        response.headers["X-Stamp"] = "1"
        if flask.request.headers.get("X-Move"):
            response.headers["Location"] = "/é"
        return response

    with serving("flask", app) as running:
        assert get(running.port, "/")[0] == 200
        status, headers, body = get(running.port, "/")
        assert (status, headers["x-stamp"], headers["x-ratelimit-remaining"]) == (429, "1", "0")
        assert headers["content-length"] == str(len(body))
        assert json.loads(body)["status"] == 429
        assert "location" not in headers
        status, headers, _ = get(running.port, "/", {"X-Move": "1"})
        assert (status, headers["location"]) == (429, "/%C3%A9")
        conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=10)
        try:
            conn.request("HEAD", "/")
            response = conn.getresponse()
            assert (response.status, response.read()) == (429, b"")
            assert response.getheader("content-length") == headers["content-length"]
        finally:
            conn.close()
