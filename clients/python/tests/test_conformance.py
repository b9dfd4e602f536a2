"""conformance/cases/*.json in FastAPI (uvicorn), Django and Flask (waitress),
over real HTTP, against a real Redis 7.0 with the module and a real
3-primary cluster (conformance/README.md, The runner contract)."""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any, Dict, List, Optional, Set, Tuple

import pytest
import redis
from redis.cluster import RedisCluster

from http_servers import factories, serving
from servers import ROOT, Cluster, Server, free_port, start_cluster, start_server

CASES_DIR = ROOT / "conformance" / "cases"
FRAMEWORKS = ("fastapi", "django", "flask")
#: What these integrations cannot do (a case's `requires`): nothing now
#: that they have the `local` fail mode.
LACKS: Set[str] = set()


def load_cases() -> List[Dict[str, Any]]:
    cases = []
    for path in sorted(CASES_DIR.glob("*.json")):
        cases.extend(json.loads(path.read_text())["cases"])
    return cases


CASES = load_cases()
#: Per framework, the cases it does not pass yet (conformance/README.md,
#: Pending): reported as PENDING instead of run.
PENDING: Dict[str, List[str]] = json.loads((ROOT / "conformance" / "pending.json").read_text())[
    "cases"
]


def pending_everywhere(case: Dict[str, Any]) -> bool:
    """Pending for every framework here: this runner need not read it yet."""
    return all(case["name"] in PENDING.get(f, []) for f in FRAMEWORKS)


#: The case format (conformance/README.md), read strictly: a member this
#: runner does not know (a typo such as "header" for "headers", a new step
#: kind) fails the case instead of checking nothing.
CASE_FIELDS = {
    "name",
    "rule",
    "redis",
    "requires",
    "config",
    "startup_error",
    "cross_field",
    "steps",
}
REQUEST_FIELDS = {"method", "path", "headers", "body", "chunked", "disconnect_after_ms"}
EXPECT_FIELDS = {"status", "headers", "absent", "content_type", "body", "body_text", "failed"}
#: A queued request is answered when its turn comes: the time it took.
EXPECT_FIELDS.add("elapsed_ms")
#: A request of a parallel step: no repeat, maybe a delay.
PARALLEL_FIELDS = {"request", "expect", "after_ms"}
#: Each step kind, by the member that names it, and every member it may have.
STEP_FIELDS = {
    "request": {"request", "expect", "repeat"},
    "parallel": {"parallel"},
    "sleep_ms": {"sleep_ms"},
    "redis": {"redis", "expect"},
    "redis_pause_ms": {"redis_pause_ms"},
    "check": {"check"},
}


def format_problem(case: Dict[str, Any]) -> Optional[str]:
    """What in ``case`` is outside the format this runner reads, or None."""
    unknown = set(case) - CASE_FIELDS
    if unknown:
        return f"case: unknown members {sorted(unknown)}"
    if ("steps" in case) == ("startup_error" in case):
        return "case: give steps or startup_error"
    if case.get("redis", "standalone") not in ("standalone", "cluster", "down"):
        return f"case: unknown redis {case['redis']!r}"
    for i, step in enumerate(case.get("steps", [])):
        kinds = [kind for kind in STEP_FIELDS if kind in step]
        if len(kinds) != 1:
            return f"step {i}: not one step kind: {sorted(step)}"
        unknown = set(step) - STEP_FIELDS[kinds[0]]
        if kinds[0] == "request":
            unknown |= request_problems(step)
        if kinds[0] == "parallel":
            inner = step["parallel"]
            if not isinstance(inner, list) or len(inner) < 2:
                return f"step {i}: parallel is not a list of two or more requests"
            for j, sub in enumerate(inner):
                if not isinstance(sub, dict) or "request" not in sub:
                    return f"step {i}: parallel[{j}] is not a request"
                unknown |= {f"parallel[{j}].{k}" for k in set(sub) - PARALLEL_FIELDS}
                unknown |= {f"parallel[{j}].{k}" for k in request_problems(sub)}
        if kinds[0] == "check" and step["check"] != "every_key_expires":
            unknown.add(f"check {step['check']!r}")
        if unknown:
            return f"step {i}: unknown members {sorted(unknown)}"
    return None


def request_problems(step: Dict[str, Any]) -> Set[str]:
    request, expect = step["request"], step.get("expect", {})
    unknown = {f"request.{k}" for k in set(request) - REQUEST_FIELDS}
    unknown |= {f"expect.{k}" for k in set(expect) - EXPECT_FIELDS}
    if "disconnect_after_ms" in request and "expect" in step:
        unknown.add("expect (a request disconnected unread expects nothing)")
    if expect.get("failed") and "status" in expect:
        unknown.add("expect.status (failed is the status)")
    return unknown


#: Step kinds and Redis kinds only the black-box runner serves (a reload
#: by SIGHUP, a listener that never answers): conformance/check.sh runs
#: these cases against scripts/serve-example for each framework.
BLACK_BOX_STEPS = {"reload", "redis_hang"}
BLACK_BOX_REDIS = {"hang"}


def black_box_only(case: Dict[str, Any]) -> bool:
    return case.get("redis") in BLACK_BOX_REDIS or any(
        kind in step for step in case.get("steps", []) for kind in BLACK_BOX_STEPS
    )


def test_every_case_is_in_the_format_this_runner_reads() -> None:
    problems = {
        c["name"]: format_problem(c)
        for c in CASES
        if not pending_everywhere(c) and not black_box_only(c) and format_problem(c) is not None
    }
    assert not problems, problems


@pytest.fixture(scope="module")
def standalone() -> Iterator[Server]:
    s = start_server("redis")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[Cluster]:
    c = start_cluster("redis")
    yield c
    c.stop()


class Redis:
    """The case's Redis as its steps see it: one server or a cluster."""

    def __init__(self, server: Optional[Server], cluster: Optional[Cluster]) -> None:
        self.primaries: List[redis.Redis] = (
            [n.client() for n in cluster.nodes] if cluster else [server.client()] if server else []
        )
        self.cluster = RedisCluster(host="127.0.0.1", port=cluster.port) if cluster else None

    def close(self) -> None:
        for r in self.primaries:
            r.close()
        if self.cluster is not None:
            self.cluster.close()

    def command(self, argv: List[Any]) -> Any:
        if self.cluster is None:
            return self.primaries[0].execute_command(*argv)
        if argv[0].upper() == "DBSIZE":
            return sum(int(r.execute_command("DBSIZE")) for r in self.primaries)
        return self.cluster.execute_command(*argv)  # routed to the owner of its key

    def flush(self) -> None:
        for r in self.primaries:
            r.execute_command("FLUSHALL")

    def pause(self, ms: int) -> None:
        for r in self.primaries:
            r.execute_command("CLIENT", "PAUSE", ms, "ALL")

    def every_key_expires(self) -> Optional[str]:
        for r in self.primaries:
            for key in r.scan_iter(count=1000):
                ttl = r.pttl(key)
                if ttl <= 0:
                    return f"key {key!r} has PTTL {ttl}"
        return None


def matches(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict):
        if "range" in expected:
            lo, hi = expected["range"]
            return isinstance(actual, int) and not isinstance(actual, bool) and lo <= actual <= hi
        if "re" in expected:
            return isinstance(actual, str) and re.fullmatch(expected["re"], actual) is not None
        if "any" in expected:
            return True
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(matches(e, a) for e, a in zip(expected, actual))
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    return bool(expected == actual)


def decoded(reply: Any) -> Any:
    if reply is True:
        return "OK"  # redis-py's callbacks turn SET's simple string OK into True
    if isinstance(reply, bytes):
        return reply.decode()
    if isinstance(reply, (list, tuple)):
        return [decoded(r) for r in reply]
    return reply


class Connection(http.client.HTTPConnection):
    """http.client, sending a request line's bytes as they are: a case's
    path may hold any byte (``{"hex": ...}``), which http.client would
    encode as ASCII."""

    def _encode_request(self, request: str) -> bytes:
        return request.encode("latin-1")


def case_bytes(value: Any) -> bytes:
    """A case's bytes: a string's UTF-8, or ``{"hex": ...}`` exactly."""
    if isinstance(value, dict):
        return bytes.fromhex(value["hex"])
    return str(value).encode()


class NoResponse(Exception):
    """The app closed the connection without answering."""


def send(port: int, request: Dict[str, Any]) -> Optional[Tuple[int, Dict[str, str], bytes]]:
    """One request on a fresh connection; a header given as a list is sent
    as that many lines, and a value (or the path) as ``{"hex": ...}`` as
    those bytes. With ``disconnect_after_ms``, the socket is closed that
    long after the request was sent, unread: None."""
    conn = Connection("127.0.0.1", port, timeout=10)
    try:
        body = request.get("body")
        encoded = body.encode() if body is not None else None
        path = case_bytes(request["path"]).decode("latin-1")
        conn.putrequest(request.get("method", "GET"), path, skip_accept_encoding=True)
        for name, value in request.get("headers", {}).items():
            for line in value if isinstance(value, list) else [value]:
                conn.putheader(name, case_bytes(line))
        if request.get("chunked"):
            conn.putheader("Transfer-Encoding", "chunked")
            conn.endheaders()
            data = encoded or b""
            conn.send((b"%x\r\n%s\r\n" % (len(data), data) if data else b"") + b"0\r\n\r\n")
        elif encoded is not None:
            conn.putheader("Content-Length", str(len(encoded)))
            conn.endheaders(encoded)
        else:
            conn.endheaders()
        if "disconnect_after_ms" in request:
            time.sleep(request["disconnect_after_ms"] / 1000)
            return None
        try:
            response = conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError) as e:
            raise NoResponse(str(e)) from e
        got_headers: Dict[str, str] = {}
        for name, value in response.getheaders():
            got_headers[name.lower()] = value
        return response.status, got_headers, response.read()
    finally:
        conn.close()


def check_response(
    expect: Dict[str, Any], status: int, headers: Dict[str, str], body: bytes
) -> List[str]:
    problems = []
    if expect.get("failed") and status != 500:
        problems.append(f"status {status}, expected a failed handler's 500 (or no response)")
    if "status" in expect and status != expect["status"]:
        problems.append(f"status {status}, expected {expect['status']}")
    for name, value in expect.get("headers", {}).items():
        got = headers.get(name.lower())
        if got is None or not matches(value, got):
            problems.append(f"header {name}: {got!r}, expected {value!r}")
    for name in expect.get("absent", []):
        if name.lower() in headers:
            problems.append(f"header {name} present ({headers[name.lower()]!r}), expected absent")
    if "content_type" in expect:
        got = headers.get("content-type", "")
        if not got.startswith(expect["content_type"]):
            problems.append(f"content-type {got!r}, expected {expect['content_type']!r}...")
    if "body" in expect:
        try:
            parsed = json.loads(body)
        except ValueError:
            problems.append(f"body is not JSON: {body[:200]!r}")
        else:
            for field, value in expect["body"].items():
                if not isinstance(parsed, dict) or field not in parsed:
                    problems.append(f"body has no {field!r}: {parsed!r}")
                elif not matches(value, parsed[field]):
                    problems.append(f"body {field}: {parsed[field]!r}, expected {value!r}")
    if "body_text" in expect and body.decode(errors="replace") != expect["body_text"]:
        problems.append(f"body {body[:200]!r}, expected {expect['body_text']!r}")
    return problems


def request_step(step: Dict[str, Any], port: int) -> List[str]:
    """One request of a step, sent and checked: what differs, [] when it
    matches."""
    expect = step.get("expect", {})
    start = time.monotonic()
    try:
        got = send(port, step["request"])
    except NoResponse as e:
        return [] if expect.get("failed") else [f"no response: {e}"]
    if got is None:
        return []
    # From sending the request to having read the whole response.
    elapsed_ms = round((time.monotonic() - start) * 1000)
    status, headers, body = got
    problems = check_response(expect, status, headers, body)
    if "elapsed_ms" in expect and not matches(expect["elapsed_ms"], elapsed_ms):
        problems.append(f"took {elapsed_ms} ms, expected {expect['elapsed_ms']!r}")
    if problems:
        problems.append(f"response {status} {headers} {body[:300]!r}")
    return problems


def parallel_step(steps: List[Dict[str, Any]], port: int) -> List[str]:
    """Each request on its own connection at once (or ``after_ms`` after
    the step began), all awaited; what differs, per request."""
    results: List[List[str]] = [[] for _ in steps]
    start = time.monotonic()

    def one(i: int) -> None:
        delay = start + steps[i].get("after_ms", 0) / 1000 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        try:
            results[i] = request_step(steps[i], port)
        except Exception as e:  # reported with the others, not lost in a thread
            results[i] = [f"{type(e).__name__}: {e}"]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(steps))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [f"request {i}: {'; '.join(p)}" for i, p in enumerate(results) if p]


def run_steps(case: Dict[str, Any], port: int, r: Redis) -> None:
    for index, step in enumerate(case["steps"]):
        where = f"{case['name']} step {index}"
        if "request" in step:
            for attempt in range(step.get("repeat", 1)):
                problems = request_step(step, port)
                assert not problems, f"{where} (request {attempt + 1}): {'; '.join(problems)}"
        elif "parallel" in step:
            problems = parallel_step(step["parallel"], port)
            assert not problems, f"{where}: {' | '.join(problems)}"
        elif "redis" in step:
            reply = decoded(r.command(step["redis"]))
            assert matches(step["expect"], reply), (
                f"{where}: {step['redis']} replied {reply!r}, expected {step['expect']!r}"
            )
        elif "sleep_ms" in step:
            time.sleep(step["sleep_ms"] / 1000)
        elif "redis_pause_ms" in step:
            r.pause(step["redis_pause_ms"])
        elif step.get("check") == "every_key_expires":
            lasting = r.every_key_expires()
            assert lasting is None, f"{where}: {lasting}"
        else:
            raise AssertionError(f"{where}: unknown step {step!r}")


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(framework: str, case: Dict[str, Any], request: pytest.FixtureRequest) -> None:
    if case["name"] in PENDING.get(framework, []):
        pytest.skip(
            f"PENDING: {framework} does not pass {case['name']} yet (conformance/pending.json)"
        )
    if black_box_only(case):
        pytest.skip(f"{case['name']}: run by the black-box runner (conformance/check.sh)")
    problem = format_problem(case)
    assert problem is None, f"{case['name']}: {problem}"
    missing = set(case.get("requires", [])) & LACKS
    if missing:
        pytest.skip(f"the Python integrations lack {', '.join(sorted(missing))}")
    make_app = factories()[framework]
    if "startup_error" in case:
        with pytest.raises(ValueError, match=re.escape(case["startup_error"])):
            make_app(case["config"], url="redis://127.0.0.1:1")
        return
    kind = case.get("redis", "standalone")
    server = request.getfixturevalue("standalone") if kind == "standalone" else None
    cluster = request.getfixturevalue("redis_cluster") if kind == "cluster" else None
    r = Redis(server, cluster)
    try:
        r.flush()
        if kind == "cluster":
            assert cluster is not None
            location = {"cluster_nodes": ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes)}
        elif kind == "down":
            location = {"url": f"redis://127.0.0.1:{free_port()}"}
        else:
            assert server is not None
            location = {"url": f"redis://127.0.0.1:{server.port}"}
        app = make_app(case["config"], **location)
        with serving(framework, app) as running:
            run_steps(case, running.port, r)
    finally:
        r.close()
