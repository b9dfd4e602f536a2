"""The black-box runner is not lax: cases that must fail do (a wrong status,
a wrong or missing header, a header that must be absent, a wrong body, a
missing Redis key, a wrong reply, a request slower than expected or a step
over its time budget, a Redis that hangs taken for one that answers, a
reload that does not print what it must, a start-up that does not fail or
fails for another field), run against a real example, beside the same
case unchanged, which passes. The first framework of LIBRL_EXAMPLES
serves them (skipped without one); the matcher's own edge cases, and the
hanging Redis, run without."""

from __future__ import annotations

import copy
import os
import socket
from typing import Any, Callable, Dict, List, Optional, cast

import pytest
from servers import Server

import test_blackbox
from blackbox import Clusters, examples, run_case
from contract import Case
from examples import Example
from hanging import HangingRedis
from steps import Mismatch, Response, case_problems, check_response, matches

BASE: Case = {
    "name": "selftest-base",
    "rule": "conformance/README.md#steps",
    "config": {
        "exempt_loopback": False,
        "timeout": "2s",
        "policies": [{"name": "p", "algorithm": "fixed", "limit": 1, "window": "60s"}],
    },
    "steps": [
        {
            "request": {"method": "GET", "path": "/"},
            "expect": {
                "status": 200,
                "body_text": "ok",
                "headers": {"X-RateLimit-Remaining": "0"},
                "elapsed_ms": {"range": [0, 30000]},
            },
        },
        {
            "request": {"method": "GET", "path": "/"},
            "expect": {
                "status": 429,
                "content_type": "application/problem+json",
                "headers": {"RateLimit-Policy": '"p";q=1;w=60'},
                "body": {"policy": "p", "limit": 1},
            },
        },
        {"redis": ["EXISTS", "rl:{ip:127.0.0.1}:p"], "expect": 1},
        {"redis": ["DBSIZE"], "expect": 1},
        {
            "parallel": [
                {"request": {"method": "GET", "path": "/"}, "expect": {"status": 429}},
                {
                    "after_ms": 20,
                    "request": {"method": "GET", "path": "/"},
                    "expect": {"status": 429},
                },
            ]
        },
        {
            "repeat": 2,
            "request": {"method": "GET", "path": "/"},
            "expect": {"status": 429},
            "within_ms": 30000,
        },
    ],
}


def mutated(change: Callable[[Case], None]) -> Case:
    case = copy.deepcopy(BASE)
    change(case)
    return case


def expect_of(step: int) -> Callable[[Case], Dict[str, Any]]:
    return lambda case: case["steps"][step]["expect"]


MUST_FAIL: Dict[str, Callable[[Case], None]] = {
    "wrong-status": lambda c: expect_of(0)(c).update(status=201),
    "wrong-header-value": lambda c: expect_of(0)(c)["headers"].update(
        {"X-RateLimit-Remaining": "1"}
    ),
    "missing-header": lambda c: expect_of(0)(c)["headers"].update({"X-Not-Sent": "x"}),
    "header-that-must-be-absent": lambda c: expect_of(1)(c).update(absent=["RateLimit-Policy"]),
    "wrong-content-type": lambda c: expect_of(1)(c).update(content_type="text/plain"),
    "wrong-body-field": lambda c: expect_of(1)(c)["body"].update(policy="q"),
    "missing-body-field": lambda c: expect_of(1)(c)["body"].update(nope=1),
    "wrong-body-text": lambda c: expect_of(0)(c).update(body_text="ko"),
    "missing-key": lambda c: c["steps"].append(
        {"redis": ["EXISTS", "rl:{ip:127.0.0.1}:q"], "expect": 1}
    ),
    "wrong-reply": lambda c: c["steps"][3].update(expect=2),
    "range-missed": lambda c: expect_of(1)(c)["body"].update(limit={"range": [2, 5]}),
    "parallel-request-wrong": lambda c: c["steps"][4]["parallel"][1]["expect"].update(status=200),
    "failed-but-answered": lambda c: c["steps"][1].update(expect={"failed": True}),
    "slower-than-expected": lambda c: expect_of(0)(c).update(elapsed_ms={"range": [30000, 40000]}),
    "over-the-time-budget": lambda c: c["steps"][5].update(within_ms=0),
    # Whether or not the app reloads, it cannot print an error for a valid file.
    "reload-that-must-fail-but-reloads": lambda c: c["steps"].append(
        {"reload": c["config"], "expect": {"error": "policies[0].limit"}}
    ),
}

#: Redis hangs, then comes back: the app refuses while it hangs (fail:
#: closed, so the refusal shows), then serves with headers once Redis
#: answers (after a pause longer than any breaker's first back-off).
HANG: Case = {
    "name": "selftest-hang",
    "rule": "conformance/README.md#a-case",
    "redis": "hang",
    "config": {
        "exempt_loopback": False,
        "timeout": "300ms",
        "fail": "closed",
        "policies": [{"name": "p", "algorithm": "fixed", "limit": 5, "window": "60s"}],
    },
    "steps": [
        {"request": {"method": "GET", "path": "/"}, "expect": {"status": 503}},
        {"redis_hang": False},
        {"sleep_ms": 1500},
        {"request": {"method": "GET", "path": "/"}, "expect": {"status": 200}},
        {"redis": ["EXISTS", "rl:{ip:127.0.0.1}:p"], "expect": 1},
    ],
}


def framework() -> str:
    names = examples()
    if not names:
        pytest.skip("LIBRL_EXAMPLES names no framework")
    return names[0]


def test_the_unchanged_case_passes(standalone: Server, clusters: Clusters) -> None:
    run_case(framework(), BASE, standalone, clusters)


@pytest.mark.parametrize("mutation", list(MUST_FAIL))
def test_a_case_that_must_fail_fails(mutation: str, standalone: Server, clusters: Clusters) -> None:
    # The failure carries the app's stderr: its account of a timeout or a
    # fail-open tells a stalled machine from a broken rule.
    with pytest.raises(Mismatch, match="the app's stderr: "):
        run_case(framework(), mutated(MUST_FAIL[mutation]), standalone, clusters)


def test_the_hang_case_passes(standalone: Server, clusters: Clusters) -> None:
    run_case(framework(), HANG, standalone, clusters)


def test_a_hanging_redis_taken_for_an_answering_one_fails(
    standalone: Server, clusters: Clusters
) -> None:
    case = copy.deepcopy(HANG)
    case["steps"][0]["expect"] = {"status": 200}
    with pytest.raises(Mismatch):
        run_case(framework(), case, standalone, clusters)


def test_a_hanging_redis_holds_then_forwards(standalone: Server) -> None:
    hanging = HangingRedis(standalone.port)
    try:
        with socket.create_connection(("127.0.0.1", hanging.port), timeout=0.3) as s:
            s.sendall(b"PING\r\n")
            with pytest.raises(socket.timeout):
                s.recv(64)
            hanging.set_hanging(False)
            s.settimeout(5)
            assert s.recv(64) == b"+PONG\r\n"
    finally:
        hanging.close()


STARTUP: Case = {
    "name": "selftest-startup",
    "rule": "conformance/README.md#a-case",
    "config": {"policies": [{"name": "p", "algorithm": "fixed", "limit": 0, "window": "60s"}]},
    "startup_error": "policies[0].limit",
}


def test_a_startup_case_passes(standalone: Server, clusters: Clusters) -> None:
    run_case(framework(), STARTUP, standalone, clusters)


def test_a_startup_case_naming_another_field_fails(standalone: Server, clusters: Clusters) -> None:
    case = {**STARTUP, "startup_error": "policies[0].window"}
    with pytest.raises(AssertionError, match=r"does not name"):
        run_case(framework(), case, standalone, clusters)


def test_a_startup_case_whose_configuration_starts_fails(
    standalone: Server, clusters: Clusters
) -> None:
    case = {**STARTUP, "config": BASE["config"]}
    with pytest.raises(TimeoutError, match=r"started instead of refusing"):
        run_case(framework(), case, standalone, clusters)


def test_stopping_leaves_no_process() -> None:
    example = Example(framework(), BASE["config"], {"REDIS_URL": "redis://127.0.0.1:1"})
    example.wait_ready(60)
    example.stop()
    assert example.proc.poll() is not None


def response(
    status: int = 200, headers: Optional[Dict[str, str]] = None, body: bytes = b""
) -> Response:
    return Response(status, headers or {}, body)


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        (1, True),
        (True, 1),
        (0, False),
        ("1", 1),
        (1, "1"),
        (None, 0),
        ([1, 2], [1, 2, 3]),
        ({"range": [1, 5]}, True),
        ({"range": [1, 5]}, "3"),
        ({"re": "a"}, "ab"),
        ({"a": 1}, {"a": 1, "b": 2}),
    ],
)
def test_matcher_refuses_near_misses(expected: Any, actual: Any) -> None:
    assert not matches(expected, actual)


def test_every_difference_is_reported() -> None:
    expect: Dict[str, Any] = {
        "status": 429,
        "headers": {"Retry-After": "1"},
        "absent": ["X-A"],
        "content_type": "application/problem+json",
        "body": {"policy": "p"},
    }
    got = response(200, {"x-a": "1", "content-type": "text/plain"}, b"ok")
    problems: List[str] = check_response(expect, got)
    assert len(problems) == 5, problems


@pytest.mark.parametrize(
    "case",
    [
        {**BASE, "stpes": []},
        {**BASE, "steps": [{"request": {"path": "/"}, "expect": {"stauts": 200}}]},
        {**BASE, "steps": [{"request": {"path": "/", "header": {}}}]},
        {**BASE, "steps": [{"sleep": 10}]},
        {**BASE, "steps": [{"check": "every_key_expire"}]},
        {**BASE, "redis": "sentinel"},
        {**BASE, "steps": [{"redis_hang": False}]},
        {**BASE, "steps": [{"reload": {}, "expect": "done"}]},
        {**BASE, "steps": [{"reload": {}}]},
        {**BASE, "steps": [{"request": {"path": "/"}, "within": 10}]},
        {**BASE, "startup_error": "policies"},
    ],
)
def test_a_case_the_runner_does_not_know_is_refused(case: Case) -> None:
    assert case_problems(case) != []


TIMED: Case = {"name": "selftest-timed", "redis": "hang", "steps": []}
UNTIMED: Case = {"name": "selftest-untimed", "steps": []}
TWO_SECONDS: Case = {"name": "selftest-2s", "config": {"timeout": "2s"}, "steps": []}


@pytest.mark.parametrize(
    ("load", "case", "took_ms", "runs", "raises"),
    [
        (9.0, TIMED, None, 2, False),  # loaded, a timing case: once more, and it passes then
        (0.5, TIMED, None, 1, True),  # a quiet machine: the first failure is final
        (9.0, UNTIMED, None, 1, True),  # no timing: final
        (9.0, UNTIMED, 10.0, 1, True),  # a request well within the 250 ms default: final
        (9.0, UNTIMED, 260.0, 2, False),  # a request that took the default timeout: once more
        (0.5, UNTIMED, 260.0, 1, True),  # the same on a quiet machine: final
        (9.0, TWO_SECONDS, 260.0, 1, True),  # within the case's own 2 s timeout: final
        (9.0, TWO_SECONDS, 2100.0, 2, False),  # took the case's 2 s timeout: once more
    ],
)
def test_a_timing_case_runs_once_more_only_on_a_loaded_machine(
    monkeypatch: pytest.MonkeyPatch,
    load: float,
    case: Case,
    took_ms: Optional[float],
    runs: int,
    raises: bool,
) -> None:
    calls: List[int] = []

    def fails_first(name: str, case: Case, standalone: Any, clusters: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise Mismatch("answered in 900 ms, expected {'range': [0, 200]}", took_ms=took_ms)

    monkeypatch.setattr(test_blackbox, "run_case", fails_first)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    if raises:
        with pytest.raises(Mismatch):
            test_blackbox.test_case("selftest", case, cast(Any, None), cast(Any, None))
    else:
        with pytest.warns(UserWarning, match="run once more"):
            test_blackbox.test_case("selftest", case, cast(Any, None), cast(Any, None))
    assert len(calls) == runs
