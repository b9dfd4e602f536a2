"""examples/python/ratelimit.py: one RL.ALL per request, headers, problem
bodies, fail modes, and its Flask decorator (with a stand-in for Flask, which
the tests do not install)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ratelimit as example
import redis
from ratelimit import Policy
from redis.backoff import NoBackoff
from redis.retry import Retry

import librl
from servers import Server, free_port

POLICIES = (
    Policy("per-second", librl.Fixed, 5, 1, aligned=True),
    Policy("hello", librl.Sliding, 3, 60),
    Policy("uploads", librl.Token, 10, 60, burst=20),
)


def test_importable_without_flask() -> None:
    # In a process of its own: other tests here import Flask.
    assert example.__file__ is not None
    code = "import sys, ratelimit; assert 'flask' not in sys.modules"
    paths = [str(Path(example.__file__).parent), str(Path(librl.__file__).parents[1])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    assert example.__file__.endswith("examples/python/ratelimit.py")


def test_admitted_with_headers(limiter: librl.Limiter, key: str) -> None:
    status, headers, body = example.check(limiter, key, POLICIES)
    assert (status, body) == (200, None)
    assert (
        headers["RateLimit-Policy"] == '"per-second";q=5;w=1, "hello";q=3;w=60, "uploads";q=20;w=60'
    )
    assert headers["RateLimit"].startswith('"hello";r=2;t=')  # the smallest share left
    assert headers["X-RateLimit-Limit"] == "3"
    assert headers["X-RateLimit-Remaining"] == "2"
    assert "Retry-After" not in headers


def test_refusal_counts_nothing(limiter: librl.Limiter, key: str) -> None:
    for _ in range(3):
        assert example.check(limiter, key, POLICIES)[0] == 200
    status, headers, body = example.check(limiter, key, POLICIES)
    assert status == 429
    assert body is not None
    assert body["policy"] == "hello"
    assert body["status"] == 429
    assert 1 <= int(headers["Retry-After"]) <= 60
    # All-or-nothing: the refused request was not counted by the others.
    uploads = limiter.token(f"rl:{{{key}}}:uploads", 10, 60, burst=20, peek=True)
    assert uploads.count == 4  # the three admitted calls, plus the peek itself


def test_cost_beyond_a_limit(limiter: librl.Limiter, key: str) -> None:
    status, headers, body = example.check(limiter, key, POLICIES, cost=6)
    assert status == 429
    assert "Retry-After" not in headers
    assert body is not None
    assert "ever admits" in body["detail"]


def test_fail_modes() -> None:
    dead = librl.Limiter(
        redis.Redis(port=free_port(), socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    )
    assert example.check(dead, "x", POLICIES) == (200, {}, None)
    status, _, body = example.check(dead, "x", POLICIES, fail_open=False)
    assert status == 503
    assert body is not None
    assert body["title"] == "Service Unavailable"


def test_client_id() -> None:
    assert example.client_id(None, "203.0.113.9") == "ip:203.0.113.9"
    hashed = example.client_id("secret", "203.0.113.9")
    assert hashed.startswith("key:")
    assert "secret" not in hashed


class _Request:
    def __init__(self) -> None:
        self.headers: dict[str, str] = {}
        self.remote_addr = "203.0.113.9"


class _Response:
    def __init__(
        self, body: Any, status: int = 200, headers: Any = None, mimetype: str = ""
    ) -> None:
        self.body, self.status, self.mimetype = body, status, mimetype
        self.headers: dict[str, str] = dict(headers or {})


@pytest.fixture
def fake_flask() -> Iterator[types.ModuleType]:
    flask = types.ModuleType("flask")
    flask.request = _Request()  # type: ignore[attr-defined]
    flask.Response = _Response  # type: ignore[attr-defined]
    flask.make_response = _Response  # type: ignore[attr-defined]
    sys.modules["flask"] = flask
    yield flask
    del sys.modules["flask"]


def test_decorator(fake_flask: types.ModuleType, server: Server, key: str) -> None:
    fake_flask.request.remote_addr = key
    with server.client() as r:
        limiter = librl.Limiter(r)

        @example.rate_limited(limiter, Policy("hello", librl.Fixed, 2, 60))
        def hello() -> str:
            return "hello"

        first: Any = hello()
        assert (first.status, first.body) == (200, "hello")
        assert first.headers["X-RateLimit-Remaining"] == "1"
        hello()
        refused: Any = hello()
        assert refused.status == 429
        assert refused.mimetype == "application/problem+json"
        assert json.loads(refused.body)["policy"] == "hello"
