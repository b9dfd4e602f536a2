"""The configuration reader without Redis (docs/http.md, Start-up
validation): the walker over the schema's generated tree, and the
cross-field rules after it, with the messages of conformance/README.md,
Configuration errors."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from librl.http import ConfigError, parse

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
        ([1], "(document): must be an object"),
        ({"policies": [P], "timeot": 1}, "timeot: unknown field"),
        ({}, "policies: missing"),
        ({"policies": [P], "timeout": None}, "timeout: must be a duration from 1 ms to 60000 ms"),
        ({"policies": [P], "mode": "x"}, "mode: must be one of enforce, shadow"),
        ({"policies": [P], "deny": {"status": 600}}, "deny.status: must be an integer from 400"),
        ({"policies": [P], "deny": {"message": "\ud800"}}, "deny.message: must be 1 to 1024"),
        ({"policies": [P], "exempt_loopback": 1}, "exempt_loopback: must be true or false"),
        ({"policies": [policy(limit=True, window=1)]}, "policies[0].limit: must be an integer"),
        ({"policies": [policy(rate="5/sec")]}, "policies[0].rate: must be a rate: a count from 1"),
        ({"policies": [policy(cost=0, rate="1/s")]}, "policies[0].cost: must be an integer"),
        (
            {"policies": [P], "routes": [{"path": "/", "methods": [], "policies": []}]},
            "routes[0].methods: must not be empty",
        ),
        (
            {"policies": [P], "trusted_proxies": ["fe80::1%eth0"]},
            "trusted_proxies[0]: must be an IP address or a CIDR network",
        ),
        # The cross-field rules, after the walker.
        (
            {"policies": [P], "trusted_proxies": ["10.0.0.0/33"]},
            "trusted_proxies[0]: must be an IP address or a CIDR network",
        ),
        ({"policies": [P, P]}, 'policies[1].name: "p" is used by an earlier policy'),
        (
            {"policies": [P], "routes": [{"path": "/", "policies": ["q"]}]},
            'routes[0].policies[0]: no policy is named "q"',
        ),
        (
            {"policies": [policy(rate="5/s", limit=5)]},
            "policies[0].rate: give rate, or limit and window, not both",
        ),
        ({"policies": [policy(window="1s")]}, "policies[0].limit: missing (give limit and window"),
        ({"policies": [policy(limit=1)]}, "policies[0].window: missing (give limit and window"),
        (
            {"policies": [policy(algorithm="sliding", rate="1/s", aligned=True)]},
            "policies[0].aligned: aligned is for fixed policies, not sliding",
        ),
        ({"policies": [policy(rate="1/s", burst=2)]}, "policies[0].burst: burst is for token"),
        ({"policies": [P], "fail": "local"}, "fail: local is the Rust integration's mode; use"),
    ],
)
def test_refusals_name_the_field(doc: object, message: str) -> None:
    assert error(doc).startswith(f"librl: configuration: {message}")


def test_defaults_fill_what_the_document_leaves_out() -> None:
    config = parse({"policies": [policy(rate="5 per 2 minutes", algorithm="sliding")]})
    assert (config.timeout_ms, config.prefix, config.deny_status, config.deny_message) == (
        250,
        "rl:",
        429,
        "Too Many Requests",
    )
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
    routes: List[Any] = [route.path, route.methods, route.key]
    assert routes == ["/Limited/", frozenset({"M-SEARCH"}), b"/limited"]
