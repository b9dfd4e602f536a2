"""Differential runs (`make differential`): many random valid
configurations, each with a random sequence of requests, seeded, sent to
every framework's `scripts/serve-example NAME`; the statuses, the
rate-limit headers, the refusals' Content-Type and bodies, and the Redis
keys written must be the same in every framework. Any disagreement is
printed as a diff naming the framework, the configuration and the
request, and the run fails.

    differential.py [--configs N] [--seed S] [--requests N]
                    [--frameworks axum,go,...] [--report FILE]

Each configuration is checked against the schema first (librl_schema.py),
so a disagreement is never about a configuration the contract refuses.
Windows are a minute or longer, so a run's own duration does not change a
count, and no two policies of a configuration share one, so which denial
is the most restrictive never hangs on milliseconds; the values that follow
the clock (`t=`, `X-RateLimit-Reset`,
`Retry-After`, the problem's `retry_after` and the seconds in its
`detail`) are compared within a second."""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from servers import Server, start_server

from contract import load_schema
from examples import FRAMEWORKS, Example, StartupFailed, build, stop_all
from librl_schema import LibrlValidator, field_path
from steps import Redis, Response, send

RATE_HEADERS = (
    "RateLimit-Policy",
    "RateLimit",
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "Retry-After",
)
NAMES = ("p0", "p1", "p2", "p3")
PATHS = (
    "/",
    "/a",
    "/a/b",
    "/A",
    "//a",
    "/a/",
    "/a%2Fb",
    "/a;x=1",
    "/x/../a",
    "/b",
    "/c/d",
    "/other",
)


# -- random configurations ----------------------------------------------------


# Windows (and rates' periods) of a minute or more, so a run's own length
# changes no count. Each policy of a configuration gets a window no other
# has: two denials then never wait within a second of each other, and which
# is the most restrictive does not depend on the milliseconds between them.
WINDOWS = (
    ("1m", 60_000),
    ("90s", 90_000),
    ("2m", 120_000),
    (300, 300_000),
    ("7m", 420_000),
    ("1h", 3_600_000),
    ("86400000ms", 86_400_000),
)
RATES = (
    ("3/minute", 60_000),
    ("4/Minute", 60_000),
    ("2 per minute", 60_000),
    ("5/2 minutes", 120_000),
    ("3/60", 60_000),
    ("3 per 5 minutes", 300_000),
    ("4/hour", 3_600_000),
    ("2 per 2 hours", 7_200_000),
)
# Token buckets refill at the rate: slowly, so a run's length refills nothing.
TOKEN_WINDOWS = (("7h", 25_200_000), ("11h", 39_600_000), ("13h", 46_800_000))


def gen_policy(rng: random.Random, name: str, used: Set[int]) -> Dict[str, Any]:
    algorithm = rng.choice(("fixed", "sliding", "approx", "token"))
    p: Dict[str, Any] = {"name": name, "algorithm": algorithm}

    def window(choices: Sequence[Tuple[Any, int]], field: str) -> bool:
        # APPROX's windows are aligned to Unix time: an hour or more, so a
        # request rarely falls on a boundary between two frameworks' sends.
        least = 3_600_000 if algorithm == "approx" else 0
        free = [c for c in choices if c[1] not in used and c[1] >= least]
        if not free:
            return False
        text, ms = rng.choice(free)
        used.add(ms)
        p[field] = text
        return True

    if algorithm == "token":
        p["limit"] = rng.randint(1, 5)
        window(TOKEN_WINDOWS, "window")
        if rng.random() < 0.5:
            p["burst"] = rng.randint(1, 8)
    elif algorithm == "fixed" and rng.random() < 0.2 and 86_400_000 not in used:
        used.add(86_400_000)
        p.update(
            limit=rng.randint(1, 6), window="1d", aligned=True
        )  # a boundary at midnight UTC only
    elif rng.random() < 0.3 and window(RATES, "rate"):
        pass
    else:
        p["limit"] = rng.randint(1, 6)
        if not window(WINDOWS, "window"):
            p["window"] = "1m"
    p["key"] = rng.choice(("ip", "ip", "api-key", "user", "header:X-Tenant", "global"))
    roll = rng.random()
    if roll < 0.15:
        p["cost"] = rng.randint(1, 3)
    elif roll < 0.3:
        p["cost"] = "header:X-Cost"
    elif roll < 0.4 and "rate" not in p:
        p["cost"] = "body-bytes"
        p["limit"] = rng.choice((50, 100, 300))
    if rng.random() < 0.2:
        p["count"] = rng.choice(("failed", "succeeded"))
    if rng.random() < 0.3:
        p["overridable"] = True
    return p


def gen_config(rng: random.Random) -> Dict[str, Any]:
    used: Set[int] = set()
    policies = [gen_policy(rng, name, used) for name in NAMES[: rng.randint(1, 4)]]
    config: Dict[str, Any] = {
        "exempt_loopback": rng.random() < 0.15,
        "timeout": "2s",
        "policies": policies,
    }
    if rng.random() < 0.3:
        config["prefix"] = rng.choice(("app:", "", "x.y/z:"))
    if rng.random() < 0.15:
        config["mode"] = "shadow"
    if rng.random() < 0.4:
        config["headers"] = rng.choice(("both", "ietf", "legacy", "none"))
    if rng.random() < 0.35:
        config["trusted_proxies"] = rng.choice(
            (["127.0.0.1"], ["127.0.0.0/8", "::1"], ["10.0.0.0/8"])
        )
    if rng.random() < 0.2:
        config["api_key_header"] = "X-Key"
    if any(p.get("cost") == "body-bytes" for p in policies):
        config["max_body_bytes"] = rng.choice((64, 200, 1000))
    if rng.random() < 0.3:
        deny: Dict[str, Any] = {"status": rng.choice((429, 429, 403, 503))}
        if rng.random() < 0.4:
            deny["body"] = "text"
            if rng.random() < 0.5:
                deny["message"] = "slow down"
        config["deny"] = deny
    if rng.random() < 0.6:
        routes = []
        for _ in range(rng.randint(1, 4)):
            route: Dict[str, Any] = {
                "path": rng.choice(("/", "/a", "/a/", "/A/b", "/b", "//c", "/c/d")),
                "policies": rng.sample(
                    [p["name"] for p in policies], rng.randint(0, len(policies))
                ),
            }
            if rng.random() < 0.3:
                route["methods"] = rng.choice((["GET"], ["POST", "PUT"], ["GET", "DELETE"]))
            routes.append(route)
        config["routes"] = routes
    return config


def gen_request(rng: random.Random, config: Dict[str, Any]) -> Dict[str, Any]:
    method = rng.choice(("GET", "GET", "GET", "POST", "PUT", "DELETE"))
    request: Dict[str, Any] = {"method": method, "path": rng.choice(PATHS)}
    if rng.random() < 0.2:
        request["path"] += "?q=1"
    headers: Dict[str, Any] = {}
    key_header = config.get("api_key_header", "X-Api-Key")
    roll = rng.random()
    if roll < 0.3:
        headers[key_header] = rng.choice(("k1", "k2", " k1 "))
    elif roll < 0.35:
        headers[key_header] = {"hex": "fc6eef"}
    elif roll < 0.4:
        headers[key_header] = ""
    if rng.random() < 0.3:
        headers["X-Tenant"] = rng.choice(("acme", "beta", "a b", ""))
    roll = rng.random()
    if roll < 0.3:
        headers["X-Cost"] = rng.choice(("1", "2", "007"))
    elif roll < 0.4:
        headers["X-Cost"] = rng.choice(("", "x", "0", "+1", ["1", "1"]))
    if rng.random() < 0.3:
        headers["X-Conformance-User"] = rng.choice(("alice", "bob", "carol@example.com"))
    if rng.random() < 0.25:
        headers["X-Conformance-Status"] = rng.choice(("404", "500", "201"))
    if rng.random() < 0.3:
        headers["X-Forwarded-For"] = rng.choice(
            ("198.51.100.7", "1.1.1.1, 198.51.100.8", "2001:db8::1%eth0", "nonsense", "10.0.0.5")
        )
    if headers:
        request["headers"] = headers
    if method in ("POST", "PUT"):
        request["body"] = "x" * rng.choice((0, 1, 10, 63, 64, 65, 150, 300))
        if rng.random() < 0.3:
            request["chunked"] = True
    return request


# -- running and comparing --------------------------------------------------------

TIMING = re.compile(r"(?<=;t=)\d+|(?<=retry in )\d+(?= s\.)")


@dataclass
class Outcome:
    """What one framework answered: the exact part, and the clock's numbers."""

    exact: Any
    clock: List[int] = field(default_factory=list)

    def agrees(self, other: Outcome) -> bool:
        return (
            self.exact == other.exact
            and len(self.clock) == len(other.clock)
            and all(
                abs(a - b) <= tol
                for (a, b), tol in zip(zip(self.clock, other.clock), tolerances(self))
            )
        )


def tolerances(o: Outcome) -> List[int]:
    # Seconds within 1; the problem's retry_after (ms, the last number when present) within 1500.
    tol = [1] * len(o.clock)
    if isinstance(o.exact, dict) and o.exact.get("retry_after_ms") == "#":
        tol[-1] = 1500
    return tol


def outcome(got: Response) -> Outcome:
    clock: List[int] = []

    def timed(text: str) -> str:
        def mark(m: re.Match[str]) -> str:
            clock.append(int(m.group(0)))
            return "#"

        return TIMING.sub(mark, text)

    headers = {}
    for name in RATE_HEADERS:
        value = got.headers.get(name.lower())
        if value is None:
            continue
        if name in ("X-RateLimit-Reset", "Retry-After") and value.isdigit():
            clock.append(int(value))
            value = "#"
        headers[name] = timed(value)
    exact: Dict[str, Any] = {"status": got.status, "headers": headers}
    if got.body != b"ok":
        exact["content_type"] = got.headers.get("content-type")
        try:
            body = json.loads(got.body)
        except ValueError:
            exact["body"] = got.body.decode(errors="replace")
        else:
            if isinstance(body, dict):
                if isinstance(body.get("detail"), str):
                    body["detail"] = timed(body["detail"])
                if isinstance(body.get("retry_after"), int):
                    retry = body.pop("retry_after")
                    exact["retry_after_ms"] = "#"
                    exact["body"] = body
                    return Outcome(exact, [*clock, retry])
            exact["body"] = body
    return Outcome(exact, clock)


@dataclass
class Run:
    framework: str
    startup: Optional[str] = None
    outcomes: List[Outcome] = field(default_factory=list)
    keys: List[Tuple[str, str]] = field(default_factory=list)
    error: Optional[str] = None


def start(framework: str, server: Server, config: Dict[str, Any]) -> Tuple[Run, Optional[Example]]:
    """The framework's example serving `config` against its own flushed Redis."""
    run = Run(framework)
    r = Redis([server.port], cluster=False)
    try:
        r.flush()
    finally:
        r.close()
    example = Example(framework, config, {"REDIS_URL": f"redis://127.0.0.1:{server.port}"})
    try:
        example.wait_ready(60)
    except StartupFailed as e:
        run.startup = f"exit {e.code}: {e.stderr.strip().splitlines()[-1:]}"
        example.stop()
        return run, None
    return run, example


def ask(run: Run, example: Optional[Example], request: Dict[str, Any]) -> None:
    if example is None or run.error is not None:
        return
    try:
        got = send(example.port, request)
        assert got is not None, "the differential run never disconnects unread"
        run.outcomes.append(outcome(got))
    except Exception as e:
        # Which request, and what the example said before it stopped answering.
        tail = example.stderr().strip().splitlines()[-3:]
        run.error = f"request {len(run.outcomes)}: {type(e).__name__}: {e}; stderr: {tail}"


def finish(run: Run, example: Optional[Example], server: Server, config: Dict[str, Any]) -> None:
    if example is None:
        return
    example.stop()
    r = Redis([server.port], cluster=False)
    try:
        prefix = config.get("prefix", "rl:")
        run.keys = [(k.decode(errors="replace").removeprefix(prefix), t) for k, t in r.all_keys()]
    finally:
        r.close()


def run_config(
    pool: concurrent.futures.ThreadPoolExecutor,
    servers: Dict[str, Server],
    config: Dict[str, Any],
    requests: Sequence[Dict[str, Any]],
) -> List[Run]:
    """Every framework started side by side, then each request sent to all of
    them at once (so clock-aligned windows see the same moment), then stopped."""
    names = list(servers)
    started = list(pool.map(lambda f: start(f, servers[f], config), names))
    try:
        for request in requests:
            n = len(started)
            list(pool.map(ask, [s[0] for s in started], [s[1] for s in started], [request] * n))
    finally:
        for (run, example), name in zip(started, names):
            finish(run, example, servers[name], config)
    return [run for run, _ in started]


def groups(values: Dict[str, Any], same: Any) -> List[List[str]]:
    """Frameworks grouped by agreeing values, the largest group first."""
    out: List[List[str]] = []
    for name, value in values.items():
        for group in out:
            if same(values[group[0]], value):
                group.append(name)
                break
        else:
            out.append([name])
    return sorted(out, key=len, reverse=True)


def compare(
    runs: List[Run], config: Dict[str, Any], requests: Sequence[Dict[str, Any]]
) -> List[Dict[str, Any]]:
    diffs: List[Dict[str, Any]] = []

    def report(what: str, values: Dict[str, Any], same: Any, request: Optional[int] = None) -> None:
        found = groups(values, same)
        if len(found) > 1:
            diff: Dict[str, Any] = {
                "what": what,
                "groups": [{"frameworks": g, "value": show(values[g[0]])} for g in found],
            }
            if request is not None:
                diff["request_index"] = request
                diff["request"] = requests[request]
            diffs.append(diff)

    report(
        "startup", {r.framework: r.startup for r in runs}, lambda a, b: (a is None) == (b is None)
    )
    live = [r for r in runs if r.startup is None]
    report("error", {r.framework: r.error for r in live}, lambda a, b: a == b)
    for i in range(len(requests)):
        answered = {r.framework: r.outcomes[i] for r in live if i < len(r.outcomes)}
        report("response", answered, lambda a, b: a.agrees(b), i)
    report(
        "redis keys", {r.framework: r.keys for r in live if r.error is None}, lambda a, b: a == b
    )
    return diffs


def show(value: Any) -> Any:
    if isinstance(value, Outcome):
        return {"exact": value.exact, "clock": value.clock}
    return value


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--requests", type=int, default=15)
    parser.add_argument("--frameworks", default="all")
    parser.add_argument("--report", type=Path)
    args = parser.parse_args(argv)
    frameworks = list(FRAMEWORKS) if args.frameworks == "all" else args.frameworks.split(",")
    validator = LibrlValidator(load_schema())
    for name in frameworks:
        build(name)
    servers = {name: start_server("redis") for name in frameworks}
    found: List[Dict[str, Any]] = []
    # What the runs exercised, from the first framework's answers.
    seen: Dict[str, int] = {}
    started = time.monotonic()
    try:
        with concurrent.futures.ThreadPoolExecutor(len(frameworks)) as pool:
            for index in range(args.configs):
                rng = random.Random(f"{args.seed}:{index}")
                config = gen_config(rng)
                invalid = [f"{field_path(e)}: {e.message}" for e in validator.iter_errors(config)]
                if invalid:
                    raise SystemExit(f"differential: generated an invalid configuration: {invalid}")
                requests = [gen_request(rng, config) for _ in range(args.requests)]
                runs = run_config(pool, servers, config, requests)
                for o in runs[0].outcomes:
                    status = str(o.exact["status"])
                    checked = "with rate-limit headers" if o.exact["headers"] else "without"
                    seen[status] = seen.get(status, 0) + 1
                    seen[checked] = seen.get(checked, 0) + 1
                seen["refused at start-up"] = seen.get("refused at start-up", 0) + (
                    runs[0].startup is not None
                )
                for diff in compare(runs, config, requests):
                    diff.update(seed=args.seed, config_index=index, config=config)
                    found.append(diff)
                    print(json.dumps(diff), flush=True)
                print(
                    f"differential: {index + 1}/{args.configs} configurations,"
                    f" {len(found)} disagreements",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        stop_all()
        for server in servers.values():
            server.stop()
    elapsed = time.monotonic() - started
    summary = {
        "configs": args.configs,
        "seed": args.seed,
        "requests": args.requests,
        "frameworks": frameworks,
        "disagreements": len(found),
        "seen": dict(sorted(seen.items())),
        "seconds": round(elapsed),
    }
    print(json.dumps(summary), file=sys.stderr)
    if args.report is not None:
        args.report.write_text(json.dumps({"summary": summary, "disagreements": found}, indent=1))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
