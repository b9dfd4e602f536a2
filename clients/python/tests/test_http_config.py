"""The configuration reader without Redis (docs/http.md, Start-up
validation), beyond conformance/vectors (durations, rates and whole
messages, run by test_http_vectors.py): what only Python refuses, and
the Config the walker builds."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List

import pytest

from librl.http import ConfigError, _schema, load, parse
from librl.http._configuration import rate
from servers import ROOT

P = {"name": "p", "algorithm": "fixed", "limit": 1, "window": "1s"}


def policy(**fields: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {"name": "p", "algorithm": "fixed", **fields}
    return {k: v for k, v in out.items() if v is not None}


def error(doc: object) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(doc)
    return str(caught.value)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        # A lone surrogate (JSON "\ud800") is no text: it could not be sent.
        ({"policies": [P], "deny": {"message": "\ud800"}}, "deny.message: must be 1 to 1024"),
        # Digits past what int() reads are out of bounds, not an exception.
        ({"policies": [policy(rate="9" * 5000 + "/s")]}, "policies[0].rate: must be a rate"),
        ({"policies": [policy(limit=1, window="9" * 5000)]}, "policies[0].window: must be a"),
    ],
)
def test_refusals_python_adds(doc: object, message: str) -> None:
    """What conformance/vectors/config-errors.json cannot say for every
    language; the rest of the walker's messages are its vectors."""
    assert error(doc).startswith(f"librl: configuration: {message}")


def test_defaults_fill_what_the_document_leaves_out() -> None:
    config = parse({"policies": [policy(rate="5 per 2 minutes", algorithm="sliding")]})
    assert (config.timeout_ms, config.prefix, config.deny.status, config.deny.message) == (
        250,
        "rl:",
        429,
        "Too Many Requests",
    )
    assert (config.fail_deny.status, config.fail_deny.body) == (503, "problem")
    p = config.policies[0]
    assert (p.limit, p.window_ms, p.aligned, p.key, p.cost, p.count) == (
        5,
        120_000,
        False,  # aligned: false is allowed on any algorithm
        "ip",
        1,
        "all",
    )


def test_whole_numbers_are_integers_and_routes_are_canonical() -> None:
    config = parse(
        {
            "timeout": 1.0,
            "policies": [policy(limit=5.0, window=60, key="header:X-T", cost="header:X-Cost")],
            "routes": [{"path": "/Limited/", "methods": ["M-SEARCH"], "policies": ["p"]}],
        }
    )
    p = config.policies[0]
    assert (config.timeout_ms, p.limit, p.window_ms) == (1000, 5, 60_000)
    assert (p.key, p.key_header, p.cost, p.cost_header) == ("header", "x-t", "header", "X-Cost")
    route = config.routes[0]
    routes: List[Any] = [route.path, route.methods, route.folded]
    assert routes == ["/Limited/", frozenset({"M-SEARCH"}), b"/limited"]


def test_the_schemas_rate_pattern_and_the_grammar_agree() -> None:
    """The schema states the rate grammar as a pattern (for JSON Schema
    validators); the reader parses it (rate()). On every string of
    conformance/vectors/rates.json they agree on what is a rate, bounds
    aside."""
    (field,) = [f for f in _schema.OBJECTS["policy"] if f.name == "rate"]
    assert field.pattern is not None
    vectors = json.loads((ROOT / "conformance" / "vectors" / "rates.json").read_text())["vectors"]
    texts = [v["input"]["value"] for v in vectors if isinstance(v["input"]["value"], str)]
    assert len(texts) > 50
    for text in texts:
        by_pattern = re.search(field.pattern, text) is not None
        assert by_pattern == (rate(text) is not None), text


def test_a_file_is_substituted_from_the_environment(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text(
        'prefix: "${APP_PREFIX:-app:}"\n'
        "policies:\n"
        "  - {name: p, algorithm: fixed, limit: ${APP_LIMIT}, window: ${APP_WINDOW:-1m}}\n"
    )
    monkeypatch.setenv("APP_LIMIT", "50")
    monkeypatch.delenv("APP_PREFIX", raising=False)
    monkeypatch.delenv("APP_WINDOW", raising=False)
    config = load(str(path))
    assert (config.prefix, config.policies[0].limit, config.policies[0].window_ms) == (
        "app:",
        50,
        60_000,
    )
    monkeypatch.delenv("APP_LIMIT")
    with pytest.raises(ConfigError, match=re.escape("librl: configuration: ${APP_LIMIT}: not set")):
        load(str(path))
    path.write_text("policies: [{name: p, algorithm: fixed, limit: ${1X}, window: 1s}]\n")
    with pytest.raises(ConfigError, match=re.escape("${1X}: not a ${VAR}")):
        load(str(path))


def test_a_dict_is_not_substituted() -> None:
    assert error({"prefix": "${X}", "policies": [P]}).startswith("librl: configuration: prefix:")


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (
            {"policies": [{"name": "p", "algorithm": "fixed", "limit": "code:plan"}]},
            "policies[0].limit",
        ),
        (
            {
                "policies": [
                    {
                        "name": "p",
                        "algorithm": "fixed",
                        "limit": 5,
                        "window": "60s",
                        "cost": "code:rows",
                    }
                ]
            },
            "policies[0].cost",
        ),
        (
            {
                "mode": "code:switch",
                "policies": [{"name": "p", "algorithm": "fixed", "limit": 5, "window": "60s"}],
            },
            "mode",
        ),
    ],
)
def test_unregistered_resolvers_are_refused_naming_the_field(
    doc: Dict[str, Any], field: str
) -> None:
    # Taken as a number or a mode, a code:<name> value would fail every request.
    kind = field.rpartition(".")[2]
    with pytest.raises(
        ConfigError, match=re.escape(f"librl: configuration: {field}: no {kind} resolver is")
    ):
        parse(doc)


ROUTE = {"path": "/", "policies": ["p"]}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        # A route's json beside the body it inherits from deny.
        (
            {"policies": [P], "deny": {"body": "text"}, "routes": [{**ROUTE, "deny": {"json": 1}}]},
            "routes[0].deny.json: json is sent only with body: json",
        ),
        # A route's body: json takes deny's json, and has none here.
        (
            {"policies": [P], "routes": [{**ROUTE, "deny": {"body": "json"}}]},
            "routes[0].deny.json: missing (body: json sends it)",
        ),
        ({"policies": [P], "fail_deny": {"body": "json"}}, "fail_deny.json: missing"),
        (
            {"policies": [P], "routes": [{**ROUTE, "deny": {"headers": {"a": "1", "A": "2"}}}]},
            'routes[0].deny.headers.A: "A" is given twice',
        ),
        (
            {"policies": [P], "fail_deny": {"headers": {"Content-Length": "1"}}},
            "fail_deny.headers.Content-Length: the integration sets this header itself",
        ),
    ],
)
def test_refusal_rules_name_the_refusal_and_field(doc: Dict[str, Any], message: str) -> None:
    assert message in error(doc)


def test_a_route_deny_replaces_the_fields_it_gives_at_start_up() -> None:
    config = parse(
        {
            "policies": [P],
            "deny": {"body": "json", "json": {"e": 1}, "headers": {"X-A": "1"}},
            "routes": [{**ROUTE, "deny": {"status": 418, "headers": {"X-B": "2"}}}],
        }
    )
    shape = config.routes[0].deny
    assert shape is not None
    assert (shape.status, shape.body, shape.payload, shape.headers) == (
        418,
        "json",
        b'{"e":1}',
        (("X-B", "2"),),
    )
