"""A case's steps, run against an app over real HTTP and against its Redis
(conformance/README.md, Steps): requests sent as the case writes them
(the path and method as is, header values as bytes), responses matched
exactly as the README says, Redis commands and their replies."""

from __future__ import annotations

import http.client
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

import redis
from redis.crc import key_slot


class Mismatch(AssertionError):
    """A step that did not match: the case, the step's index, what differed;
    `took_ms`, for a request that did not match, how long it took."""

    def __init__(self, message: str, took_ms: Optional[float] = None) -> None:
        super().__init__(message)
        self.took_ms = took_ms


def header_bytes(value: Union[str, Dict[str, str]]) -> bytes:
    """A case's header value: a string is its UTF-8 bytes; {"hex": ...} those bytes."""
    if isinstance(value, dict):
        return bytes.fromhex(value["hex"])
    return value.encode()


def header_lines(value: Any) -> List[bytes]:
    return [header_bytes(v) for v in value] if isinstance(value, list) else [header_bytes(value)]


@dataclass
class Response:
    status: int
    #: Lower-case names; a header sent on several lines is its lines joined by ", ".
    headers: Dict[str, str]
    body: bytes
    #: From sending the request to the whole response read, in milliseconds.
    elapsed_ms: int = 0


class NoResponse(Exception):
    """The app closed the connection without answering."""


def send(port: int, request: Dict[str, Any], timeout: float = 10.0) -> Optional[Response]:
    """One request on a fresh connection from 127.0.0.1, the path and method
    as written (http.client normalizes neither). With `disconnect_after_ms`,
    the socket is closed that long after the request was sent, unread: None.
    NoResponse when the app closes the connection without an answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    start = time.monotonic()
    try:
        body = request.get("body")
        encoded = body.encode() if isinstance(body, str) else None
        conn.putrequest(request.get("method", "GET"), request["path"], skip_accept_encoding=True)
        for name, value in request.get("headers", {}).items():
            for line in header_lines(value):
                conn.putheader(name, line)
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
        headers: Dict[str, str] = {}
        for name, value in response.getheaders():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        body_read = response.read()
        elapsed = int((time.monotonic() - start) * 1000)
        return Response(response.status, headers, body_read, elapsed)
    finally:
        conn.close()


def media_type(value: str) -> str:
    """A Content-Type as media types compare (RFC 9110, 8.3.1): case and the
    spaces around `;` do not count, so a servlet container's
    `text/plain;charset=utf-8` is the `text/plain; charset=utf-8` sent."""
    return re.sub(r"\s*;\s*", ";", value.strip()).lower()


def load_average() -> str:
    """Said with a timing mismatch: it tells a stalled machine from a wrong
    wait when CI meets one."""
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


def matches(expected: Any, actual: Any) -> bool:
    """A value of a case against what came back: exact, or a matcher
    ({"range": [lo, hi]}, {"re": ...} in full, {"any": true})."""
    if isinstance(expected, dict):
        if "range" in expected:
            lo, hi = expected["range"]
            return isinstance(actual, int) and not isinstance(actual, bool) and lo <= actual <= hi
        if "re" in expected:
            return isinstance(actual, str) and re.fullmatch(expected["re"], actual) is not None
        if "any" in expected:
            return True
        return (
            isinstance(actual, dict)
            and set(actual) == set(expected)
            and all(matches(v, actual[k]) for k, v in expected.items())
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(matches(e, a) for e, a in zip(expected, actual))
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return expected == actual
    return type(expected) is type(actual) and bool(expected == actual)


def check_response(expect: Dict[str, Any], got: Response) -> List[str]:
    """What differs between a response and a step's `expect`; [] when it matches."""
    problems = []
    if expect.get("failed") and got.status != 500:
        problems.append(f"status {got.status}, expected a failed handler's 500 (or no response)")
    if "status" in expect and got.status != expect["status"]:
        # The time says whether the app waited out its Redis timeout.
        problems.append(
            f"status {got.status} after {got.elapsed_ms} ms, expected {expect['status']} "
            f"({load_average()})"
        )
    for name, value in expect.get("headers", {}).items():
        actual = got.headers.get(name.lower())
        if actual is None or not matches(value, actual):
            problems.append(f"header {name}: {actual!r}, expected {value!r}")
    for name in expect.get("absent", []):
        if name.lower() in got.headers:
            problems.append(
                f"header {name} present ({got.headers[name.lower()]!r}), expected absent"
            )
    if "content_type" in expect:
        actual = got.headers.get("content-type", "")
        if not media_type(actual).startswith(media_type(expect["content_type"])):
            problems.append(f"content-type {actual!r}, expected {expect['content_type']!r}...")
    if "body" in expect:
        try:
            parsed = json.loads(got.body)
        except ValueError:
            problems.append(f"body is not JSON: {got.body[:200]!r}")
        else:
            for field, value in expect["body"].items():
                if not isinstance(parsed, dict) or field not in parsed:
                    problems.append(f"body has no {field!r}: {parsed!r}")
                elif not matches(value, parsed[field]):
                    problems.append(f"body {field}: {parsed[field]!r}, expected {value!r}")
    if "body_text" in expect and got.body != expect["body_text"].encode():
        problems.append(f"body {got.body[:200]!r}, expected {expect['body_text']!r}")
    if "elapsed_ms" in expect and not matches(expect["elapsed_ms"], got.elapsed_ms):
        problems.append(
            f"answered in {got.elapsed_ms} ms, expected {expect['elapsed_ms']!r} ({load_average()})"
        )
    return problems


def decoded(reply: Any) -> Any:
    if isinstance(reply, bytes):
        return reply.decode(errors="replace")
    if isinstance(reply, (list, tuple)):
        return [decoded(r) for r in reply]
    return reply


class Redis:
    """A case's Redis as its steps see it: one primary, or a cluster's.
    Replies come back as the server sent them (no client-side conversion:
    SET answers "OK", not True)."""

    def __init__(self, ports: Sequence[int], cluster: bool) -> None:
        self.primaries = [redis.Redis(host="127.0.0.1", port=p) for p in ports]
        for r in self.primaries:
            r.response_callbacks.clear()
        self.cluster = cluster

    def close(self) -> None:
        for r in self.primaries:
            r.close()

    def _owner(self, key: bytes) -> redis.Redis:
        """The primary serving the key's slot (the cluster's own map)."""
        slot = key_slot(key)
        for lo, hi, primary, *_ in self.primaries[0].execute_command("CLUSTER", "SLOTS"):
            if lo <= slot <= hi:
                port = int(primary[1])
                return next(
                    r for r in self.primaries if r.connection_pool.connection_kwargs["port"] == port
                )
        raise LookupError(f"no primary serves slot {slot}")

    def command(self, argv: List[Any]) -> Any:
        if not self.cluster:
            return self.primaries[0].execute_command(*argv)
        if str(argv[0]).upper() == "DBSIZE":
            return sum(int(r.execute_command("DBSIZE")) for r in self.primaries)
        # The server says which arguments are keys (the module declares them).
        keys = self.primaries[0].execute_command("COMMAND", "GETKEYS", *argv)
        key = keys[0] if keys else b""
        return self._owner(key if isinstance(key, bytes) else str(key).encode()).execute_command(
            *argv
        )

    def flush(self) -> None:
        for r in self.primaries:
            r.execute_command("FLUSHALL")

    def pause(self, ms: int) -> None:
        for r in self.primaries:
            r.execute_command("CLIENT", "PAUSE", ms, "ALL")

    @staticmethod
    def _scan(r: redis.Redis) -> Iterator[bytes]:
        """Every key of one primary (SCAN's raw replies: no callbacks here)."""
        cursor = b"0"
        while True:
            cursor, keys = r.execute_command("SCAN", cursor, "COUNT", 1000)
            yield from keys
            if cursor == b"0":
                return

    def all_keys(self) -> List[Tuple[bytes, str]]:
        """Every key of every primary with its type, sorted."""
        out = []
        for r in self.primaries:
            for key in self._scan(r):
                out.append((key, decoded(r.execute_command("TYPE", key))))
        return sorted(out)

    def every_key_expires(self) -> Optional[str]:
        for r in self.primaries:
            for key in self._scan(r):
                ttl = r.execute_command("PTTL", key)
                # -2: the key expired since SCAN listed it.
                if ttl == -1 or ttl == 0:
                    return f"key {key!r} has PTTL {ttl}"
        return None


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
EXPECT_FIELDS = {
    "status",
    "headers",
    "absent",
    "content_type",
    "body",
    "body_text",
    "failed",
    "elapsed_ms",
}
#: A request inside a parallel step: no repeat, and maybe a delay.
PARALLEL_FIELDS = {"request", "expect", "after_ms"}
STEP_KINDS = {
    "request": {"request", "expect", "repeat", "within_ms"},
    "parallel": {"parallel"},
    "redis": {"redis", "expect"},
    "sleep_ms": {"sleep_ms"},
    "redis_pause_ms": {"redis_pause_ms"},
    "check": {"check"},
    "redis_hang": {"redis_hang"},
    "reload": {"reload", "expect"},
}
#: Where the app's Redis is: a real one, a cluster, a port where nothing
#: listens, or a listener that accepts and never answers (until told to).
REDIS_KINDS = ("standalone", "cluster", "down", "hang")


def case_problems(case: Dict[str, Any]) -> List[str]:
    """What in a case this runner does not know (conformance/README.md, A
    case): a member, a step, a request or expect field; [] when none."""
    problems = [f"unknown member {k!r}" for k in sorted(set(case) - CASE_FIELDS)]
    if case.get("redis", "standalone") not in REDIS_KINDS:
        problems.append(f"unknown redis {case['redis']!r}")
    if ("steps" in case) == ("startup_error" in case):
        problems.append("needs steps or startup_error, not both")
    for i, step in enumerate(case.get("steps", [])):
        kinds = [k for k in STEP_KINDS if k in step]
        if len(kinds) != 1:
            problems.append(f"step {i}: not one kind of step")
            continue
        extra = set(step) - STEP_KINDS[kinds[0]]
        if kinds[0] == "request":
            extra |= _request_problems(step)
        if kinds[0] == "parallel":
            inner = step["parallel"]
            if not isinstance(inner, list) or len(inner) < 2:
                extra.add("parallel (not a list of two or more requests)")
            else:
                for j, sub in enumerate(inner):
                    if not isinstance(sub, dict) or "request" not in sub:
                        extra.add(f"parallel[{j}] (not a request)")
                        continue
                    extra |= {f"parallel[{j}].{k}" for k in set(sub) - PARALLEL_FIELDS}
                    extra |= {f"parallel[{j}].{k}" for k in _request_problems(sub)}
        if kinds[0] == "check" and step["check"] != "every_key_expires":
            extra.add(f"check {step['check']!r}")
        if kinds[0] == "redis_hang" and case.get("redis") != "hang":
            extra.add("redis_hang (only in a redis: hang case)")
        if kinds[0] == "reload" and not _reload_expect_ok(step.get("expect")):
            extra.add('reload\'s expect ("reloaded" or {"error": path})')
        problems += [f"step {i}: unknown {k}" for k in sorted(extra)]
    return problems


def _reload_expect_ok(expect: Any) -> bool:
    return expect == "reloaded" or (
        isinstance(expect, dict) and set(expect) == {"error"} and isinstance(expect["error"], str)
    )


def _request_problems(step: Dict[str, Any]) -> Set[str]:
    request, expect = step["request"], step.get("expect", {})
    problems = {f"request.{k}" for k in set(request) - REQUEST_FIELDS}
    problems |= {f"expect.{k}" for k in set(expect) - EXPECT_FIELDS}
    if "disconnect_after_ms" in request and "expect" in step:
        problems.add("expect (a request disconnected unread expects nothing)")
    if expect.get("failed") and "status" in expect:
        problems.add("expect.status (failed is the status)")
    return problems


def request_step(step: Dict[str, Any], port: int) -> List[str]:
    """One request of a step, sent and checked: what differs, [] when it matches."""
    expect = step.get("expect", {})
    try:
        got = send(port, step["request"])
    except NoResponse as e:
        return [] if expect.get("failed") else [f"no response: {e}"]
    if got is None:
        return []
    problems = check_response(expect, got)
    if problems:
        problems.append(f"response {got.status} {got.headers} {got.body[:300]!r}")
    return problems


def parallel_step(steps: List[Dict[str, Any]], port: int) -> List[str]:
    """Each request on its own connection at once (or `after_ms` after the
    step began), all awaited; what differs, per request."""
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


#: Hangs or forwards the app's Redis connections (a `redis: hang` case).
Hang = Callable[[bool], None]
#: Writes a configuration where the app reads it, signals the app, and
#: returns the line it printed on stderr about it ("" if none in time).
Reload = Callable[[Any], str]


def reload_problems(expect: Any, line: str) -> List[str]:
    """A reload's line on the app's stderr against the step's expect."""
    if expect == "reloaded":
        if line != "librl: configuration reloaded":
            return [f"the app printed {line!r}, expected 'librl: configuration reloaded'"]
        return []
    path = expect["error"]
    if not line.startswith("librl: configuration: ") or path not in line:
        return [f"the app printed {line!r}, expected the start-up error naming {path!r}"]
    return []


def run_steps(
    case: Dict[str, Any],
    port: int,
    r: Optional[Redis],
    hang: Optional[Hang] = None,
    reload: Optional[Reload] = None,
) -> None:
    """Every step in order; the first that does not match raises Mismatch."""
    for index, step in enumerate(case["steps"]):
        where = f"{case['name']} step {index}"
        if "request" in step:
            start = time.monotonic()
            # Each request's time, said with a step over its budget: one slow
            # request (a timeout) reads differently from every one slow (a
            # stalled machine).
            each: List[float] = []
            for attempt in range(step.get("repeat", 1)):
                began = time.monotonic()
                problems = request_step(step, port)
                each.append((time.monotonic() - began) * 1000)
                if problems:
                    spent = f"took {each[-1]:.0f} ms"
                    raise Mismatch(
                        f"{where} (request {attempt + 1}, {spent}): {'; '.join(problems)}",
                        took_ms=each[-1],
                    )
            # Fractions kept: a fast app answers a step in under 1 ms, which
            # must still be over a budget of 0 ms.
            took = (time.monotonic() - start) * 1000
            if "within_ms" in step and took > step["within_ms"]:
                over = f"took {took:.1f} ms, more than {step['within_ms']} ms"
                requests = ", ".join(f"{ms:.0f}" for ms in each)
                raise Mismatch(f"{where}: {over}; each request's ms: {requests} ({load_average()})")
        elif "parallel" in step:
            problems = parallel_step(step["parallel"], port)
            if problems:
                raise Mismatch(f"{where}: {' | '.join(problems)}")
        elif "redis" in step:
            if r is None:
                raise Mismatch(f"{where}: a redis step in a case without Redis")
            try:
                reply = decoded(r.command(step["redis"]))
            except redis.ResponseError as e:
                reply = f"error: {e}"
            if not matches(step["expect"], reply):
                raise Mismatch(
                    f"{where}: {step['redis']} replied {reply!r}, expected {step['expect']!r}"
                )
        elif "sleep_ms" in step:
            time.sleep(step["sleep_ms"] / 1000)
        elif "redis_pause_ms" in step:
            if r is None:
                raise Mismatch(f"{where}: a pause in a case without Redis")
            r.pause(step["redis_pause_ms"])
        elif "redis_hang" in step:
            if hang is None:
                raise Mismatch(f"{where}: redis_hang in a case whose Redis does not hang")
            hang(bool(step["redis_hang"]))
        elif "reload" in step:
            if reload is None:
                raise Mismatch(f"{where}: this runner cannot reload the app")
            problems = reload_problems(step["expect"], reload(step["reload"]))
            if problems:
                raise Mismatch(f"{where}: {'; '.join(problems)}")
        elif step.get("check") == "every_key_expires":
            if r is None:
                raise Mismatch(f"{where}: a key check in a case without Redis")
            problem = r.every_key_expires()
            if problem:
                raise Mismatch(f"{where}: {problem}")
        else:
            raise Mismatch(f"{where}: a step this runner does not know: {step!r}")
