#!/usr/bin/env python3
"""make bench-http: each framework's HTTP integration against no limiter,
the floor (the same RL.ALL from a bare handler) and the peer its users
would otherwise pick, in the same interleaved rounds (bench/README.md,
"make bench-http").

For every framework, four apps (bench/http/{axum,python,node,go,java}: none,
floor, librl, peer) are started once, each one process pinned to one core,
against one redis-server with the module; then, round after round in a
rotating order, wrk sends each app each load for a few seconds from the
other core: `/open` (a limit that never refuses) and `/half` (a limit of 1
per 10 s and a fresh subject and the spent one in turn: half refused).
Each run records requests per second, wrk's p50 and p99 latency, the app
process's CPU per request (/proc/PID/stat) and Redis's commands per
request (INFO commandstats). Before timing anything, every app is checked:
it answers, sends the headers it should, and /half refuses every other
request.

    python3 bench/http/bench_http.py            # writes bench/results/http.{md,json,png}
    python3 bench/http/bench_http.py --quick    # every row for a second, into target/bench-http-quick/
"""

import argparse
import datetime
import http.client
import json
import math
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import time
from operator import sub, truediv

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
from resp import Server, commandstats  # noqa: E402

MODULE = os.environ.get("LIBRL_MODULE", os.path.join(ROOT, "target", "release", "librl.so"))
DEPS = os.path.join(ROOT, ".deps")
PYDEPS = os.path.join(DEPS, "bench-py")  # matplotlib, as make bench's chart
VARIANTS = ("none", "floor", "librl", "peer")
LOADS = ("open", "half")
CLK_TCK = os.sysconf("SC_CLK_TCK")
SETTLE_S = 0.3

# The issue's targets, judged from the table, never as timed tests.
TARGET_RPS_VS_PEER = 1.1
TARGET_MIDDLEWARE_US = {"Rust": 15, "Node.js": 15, "Go": 15, "Java": 15, "Python": 60}

# Which rate-limit headers each app sends on an admitted /open, by the
# policies file's `headers` (librl, floor) or by what the peer can send.
HEADER_SETS = {
    "both": ("ratelimit-policy", "ratelimit", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"),
    "legacy": ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"),
    "none": (),
}


class Framework:
    """One framework's four apps. `headers` is the header set librl is
    configured to send: the one the peer sends (both sets where the peer
    can send both), so both do the same work."""

    def __init__(self, name, language, command, peer, headers, note="", warmup_s=1):
        self.name, self.language, self.command = name, language, command
        self.peer, self.headers, self.note = peer, headers, note
        # Unrecorded seconds per app and load before the rounds: a JIT needs
        # many thousands of calls per path before its figures settle.
        self.warmup_s = warmup_s


def python_app(framework):
    venv = os.path.join(DEPS, "venv", "bin", "python")
    return lambda variant: [venv, os.path.join(HERE, "python", "app.py"), framework, variant]


#: V8 keeps optimising for seconds: after 1 s of warm-up, four 3 s windows of Express's librl app cost
#: 268, 196, 184 and 170 µs of CPU per request, so Node's apps get more warm-up before the rounds.
NODE_WARMUP_S = 6


def node_app(framework):
    return lambda variant: ["node", os.path.join(HERE, "node", "app.mjs"), framework, variant]


#: The JIT's compiler threads share the app's pinned core and their CPU is the app's: after 15 s, a
#: full run's Spring rounds still fell by round (librl /open 173, 104, 65 µs per request; the floor 129,
#: 73, 50), the larger code path the longer, so the middleware's cost read 31-42 µs where later rounds
#: gave 15. Measured: steady state, as a service that has run a while.
SPRING_WARMUP_S = 30


def java_app(variant):
    """bench/http/java's Spring app, built by scripts/install-bench-deps.sh http into
    .deps/bench-http/java: its jar, then the classpath Maven wrote. A modest heap (the machine is
    shared); the serial collector, which the JVM picks on one core anyway, also when not pinned."""
    out = os.path.join(DEPS, "bench-http", "java")
    with open(os.path.join(out, "classpath")) as f:
        classpath = f.read().strip()
    jar = os.path.join(out, "librl-bench-http-spring-0.1.0.jar")
    return ["java", "-Xms256m", "-Xmx512m", "-XX:+UseSerialGC", "-cp", f"{jar}{os.pathsep}{classpath}",
            "io.librl.bench.spring.BenchApplication", variant]


FRAMEWORKS = [
    Framework("axum", "Rust", lambda v: [os.path.join(ROOT, "target", "release", "librl-bench-http-axum"), v],
              "the same fixed window as a Lua script through redis-rs (bench/lua/fixed_window.lua)", "both",
              "axum's own limiters (tower-governor) keep no shared state; the script's middleware writes "
              "librl's five headers from its reply"),
    Framework("fastapi", "Python", python_app("fastapi"), "slowapi 0.1.10 (limits 5.8.0, fixed window)", "legacy",
              "slowapi sends X-RateLimit-* only"),
    Framework("flask", "Python", python_app("flask"), "Flask-Limiter 4.1.1 (limits 5.8.0, fixed window)", "legacy",
              "Flask-Limiter sends X-RateLimit-* only"),
    Framework("django", "Python", python_app("django"), "django-ratelimit 4.1.0 (Django's RedisCache)", "none",
              "django-ratelimit sends no rate-limit headers, so librl sends none here either"),
    Framework("express", "Node.js", node_app("express"), "express-rate-limit 8.7.5 + rate-limit-redis 6.0.1",
              "both", "express-rate-limit sends both sets (draft-8 and legacy)", warmup_s=NODE_WARMUP_S),
    Framework("fastify", "Node.js", node_app("fastify"), "@fastify/rate-limit 11.2.0 (its Redis store)", "legacy",
              "@fastify/rate-limit sends x-ratelimit-* (or draft-6 ratelimit-*), not both", warmup_s=NODE_WARMUP_S),
    Framework("go", "Go", lambda v: [os.path.join(DEPS, "bench-http", "go-app"), v],
              "ulule/limiter v3.11.2 (its Redis store, stdlib middleware)", "legacy",
              "ulule/limiter sends X-RateLimit-* only (its Reset is a Unix time)"),
    Framework("spring", "Java", java_app, "Bucket4j 8.19.0 (its Lettuce proxy manager, a servlet filter per route)",
              "legacy", "Spring MVC on Tomcat; Bucket4j's filter writes X-RateLimit-* from its consumption probe; "
              "its compare-and-swap is retried while other requests change the same bucket (/open: one "
              "client address), which shows in its Redis commands per request", warmup_s=SPRING_WARMUP_S),
]
# Frameworks whose app is not written yet: listed in the table as not measured.
LATER = []


def log(msg):
    print(f"[bench-http {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def cpu_seconds(pid):
    """utime + stime of the process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def free_ports(n):
    """n distinct loopback ports that are free now, below Linux's ephemeral
    range (32768 and up), so that no outgoing connection (the apps' own to
    Redis, wrk's) takes one before its app binds it."""
    ports = []
    for port in random.sample(range(20000, 32000), 12000):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == n:
            return ports
    raise RuntimeError(f"fewer than {n} free ports between 20000 and 32000")


def get(port, path, headers=None, timeout=10):
    """One GET; (status, {lower-case header: value})."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


class App:
    def __init__(self, framework, variant, port, policies, redis_port, cpu):
        self.framework, self.variant, self.port = framework, variant, port
        self.log_path = os.path.join(policies["dir"], f"{framework.name}-{variant}.log")
        env = dict(os.environ, PORT=str(self.port), REDIS_URL=f"redis://127.0.0.1:{redis_port}",
                   LIBRL_POLICIES=policies[framework.headers],
                   PYTHONPATH=os.pathsep.join([os.path.join(DEPS, "bench-http", "py"),
                                               os.path.join(ROOT, "clients", "python", "src")]))
        pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
        with open(self.log_path, "w") as out:
            self.proc = subprocess.Popen(pin + framework.command(variant), env=env, stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    @property
    def label(self):
        return f"{self.framework.name}/{self.variant}"

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                get(self.port, "/open", timeout=2)
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"{self.label} did not answer in {timeout}s:\n{self.tail()}")

    def tail(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-2000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def check_app(app):
    """The smoke check: /open admitted with the expected headers; /half
    refuses every other request (a fresh subject, then the spent one).
    Returns the rate-limit headers the app sent; raises on a failure."""
    nonce = f"check-{os.getpid()}-{time.monotonic_ns()}"
    status, headers = get(app.port, "/open")
    if status != 200:
        raise RuntimeError(f"{app.label}: GET /open answered {status}, not 200")
    sent = sorted(h for h in headers if "ratelimit" in h)
    if app.variant == "librl":
        expected = set(HEADER_SETS[app.framework.headers])
        if set(sent) != expected:
            raise RuntimeError(f"{app.label}: rate-limit headers {sent}, expected {sorted(expected)}")
    if app.variant in ("none", "floor") and sent:
        raise RuntimeError(f"{app.label}: sends rate-limit headers {sent} with no middleware")
    statuses = []
    for i in range(10):
        statuses.append(get(app.port, "/half", {"X-Client": f"c-{nonce}-{i}"})[0])
        statuses.append(get(app.port, "/half", {"X-Client": f"spent-{nonce}"})[0])
    want = [200] * 20 if app.variant == "none" else [200, 200] + [200, 429] * 9
    if statuses != want:
        raise RuntimeError(f"{app.label}: /half answered {statuses}, expected {want}")
    return sent


def wrk_run(app, redis, load, seconds, connections, cpu):
    """One wrk run; its figures, with the app's CPU and Redis's commands."""
    env = dict(os.environ, BENCH_PATH=f"/{load}", BENCH_NONCE=f"{os.getpid()}-{time.monotonic_ns()}")
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    cmd = pin + ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s",
                 "-s", os.path.join(HERE, "load.lua"), f"http://127.0.0.1:{app.port}"]
    before_stats = commandstats(redis)
    load_before = loadavg()
    cpu_before = cpu_seconds(app.proc.pid)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    # The requests in flight when wrk stopped (at most one per connection)
    # finish before the figures are read, so they count against this run
    # and not the next one's.
    time.sleep(SETTLE_S)
    cpu_after = cpu_seconds(app.proc.pid)
    after_stats = commandstats(redis)
    line = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not line:
        raise RuntimeError(f"wrk printed no figures for {app.label} {load}:\n{out}")
    r = json.loads(line[-1])
    n = max(r["requests"], 1)
    # A run that completed no request (an app stalled on a loaded machine)
    # has no latency or CPU per request: None, left out of the medians.
    served = r["requests"] > 0
    commands = {}
    for name, s in after_stats.items():
        d = s["calls"] - before_stats.get(name, {}).get("calls", 0)
        if d and name != "info":
            commands[name] = d / n
    return {
        "rps": r["requests"] / (r["duration_us"] / 1e6),
        "requests": r["requests"],
        "p50_us": r["p50_us"] if served else None, "p99_us": r["p99_us"] if served else None,
        "max_us": r["max_us"] if served else None,
        "cpu_us": (cpu_after - cpu_before) * 1e6 / n if served else None,
        "refused": r["status_errors"] / n,
        "socket_errors": r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"],
        "redis_per_request": sum(commands.values()),
        "commands": commands,
        "load": (load_before + loadavg()) / 2,
    }


def run_warning(app, load, fig):
    """What a timed run did that it should not have: socket errors, or a
    share of refusals away from the load's (none on /open, every other
    request on /half, give or take the spent subject's one admission per
    window and two requests' rounding). Reported, not fatal: a peer that
    admits more than its limit under concurrency is a finding."""
    problems = []
    if not fig["requests"]:
        return f"{app.label} /{load} round {fig['round'] + 1}: no request completed in the run"
    if fig["socket_errors"]:
        problems.append(f"{fig['socket_errors']} socket errors")
    # librl sends one RL.ALL per request: fewer means the breaker opened
    # (a check timed out under load) and requests skipped Redis.
    if app.variant == "librl" and fig["commands"].get("rl.all", 1.0) < 0.98:
        problems.append(f"{fig['commands'].get('rl.all', 0):.2f} RL.ALL per request: checks skipped")
    want = 0.0 if load == "open" or app.variant == "none" else 0.5
    if abs(fig["refused"] - want) > max(0.02, 2 / max(fig["requests"], 1)):
        problems.append(f"refused {fig['refused']:.1%} where {want:.0%} was expected")
    return f"{app.label} /{load} round {fig['round'] + 1}: " + "; ".join(problems) if problems else ""


def write_policies(directory):
    """The policies file once per header set; the limits never change."""
    with open(os.path.join(HERE, "policies.json")) as f:
        doc = json.load(f)
    paths = {"dir": directory}
    for headers in HEADER_SETS:
        path = os.path.join(directory, f"policies-{headers}.json")
        with open(path, "w") as f:
            json.dump(dict(doc, headers=headers), f, indent=2)
        paths[headers] = path
    return paths


def med(values):
    """The median of the values that were measured (None: not measured)."""
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def per_round(a, b, key, op):
    """op(a's figure, b's figure) for each round where both were measured
    (and b's is not zero, for a ratio)."""
    out = []
    for x, y in zip(a, b):
        if x[key] is None or y[key] is None or (op is truediv and not y[key]):
            continue
        out.append(op(x[key], y[key]))
    return out


def summarize(frameworks, runs):
    """Per framework and load: each variant's medians, and the ratios taken
    round by round (then the median), so a slow round moves both sides."""
    out = {}
    for fw in frameworks:
        for load in LOADS:
            rows = {v: runs[(fw.name, v, load)] for v in VARIANTS}
            s = {v: {k: med([r[k] for r in rows[v]]) for k in
                     ("rps", "p50_us", "p99_us", "cpu_us", "refused", "redis_per_request", "load")}
                 for v in VARIANTS}
            s["ratio_rps"] = med(per_round(rows["librl"], rows["peer"], "rps", truediv))
            s["ratio_p99"] = med(per_round(rows["librl"], rows["peer"], "p99_us", truediv))
            s["middleware_us"] = med(per_round(rows["librl"], rows["floor"], "cpu_us", sub))
            s["peer_middleware_us"] = med(per_round(rows["peer"], rows["none"], "cpu_us", sub))
            s["librl_vs_none_us"] = med(per_round(rows["librl"], rows["none"], "cpu_us", sub))
            s["commands"] = {v: rows[v][-1]["commands"] for v in VARIANTS}
            out[(fw.name, load)] = s
    return out


def verdict(value, ok):
    if math.isnan(value):  # no round measured both sides
        return "not measured"
    return "met" if ok else "**missed**"


def report(meta, frameworks, summary, headers_sent, runs, warnings):
    out = []
    w = out.append
    w("# make bench-http: the HTTP integrations against the peers")
    w("")
    w(f"Reproduce with `make bench-http`. This run: {meta['date']}, commit {meta['commit']}, module "
      f"`{meta['module']}`, Redis {meta['redis']}, {meta['cpu']} ({meta['cores']} cores), wrk "
      f"{meta['connections']} connections from one thread, {meta['seconds']} s per run, {meta['rounds']} "
      f"interleaved rounds; {meta['pinning']}. The whole run took {meta['elapsed_s']:.0f} s. The machine's "
      f"load average (1 min) was {meta['load_start']:.1f} at the start and {meta['load_end']:.1f} at the end, "
      f"{meta['load_min']:.1f}–{meta['load_max']:.1f} during the runs, on {meta['cores']} cores: other work "
      "shared them, which moves the absolute figures; the ratios, taken within each round, move less.")
    w("")
    w("Each app serves `/open` (fixed window, 1,000,000,000 a minute per client address: never refuses) "
      "and `/half` (fixed window, 1 per 10 s per `X-Client` header, the load sending a fresh subject and a "
      "spent one in turn: half refused). **none**: no limiter; **floor**: the same `RL.ALL` librl sends, "
      "from a bare handler through the same Redis client path librl uses (the least a Redis-backed check can "
      "cost through it in that framework); **librl**: the integration on bench/http/policies.json; **peer**: what the framework's "
      "users would otherwise pick. req/s, p50 and p99 are wrk's; CPU is the app process's (user + system, "
      "all threads) per request; Redis commands per request from INFO commandstats. Medians over the "
      "rounds; ratios are each round's ratio, then the median.")
    w("")
    for load in LOADS:
        title = "never refuses (`/open`)" if load == "open" else "refuses half (`/half`)"
        w(f"## A policy that {title}")
        w("")
        w("| framework | none req/s | floor | librl | peer | librl ÷ peer | p50 librl / peer (ms) | "
          "p99 librl / peer (ms) | p99 librl ÷ peer |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for fw in frameworks:
            s = summary[(fw.name, load)]
            w(f"| {fw.name} | {s['none']['rps']:,.0f} | {s['floor']['rps']:,.0f} | {s['librl']['rps']:,.0f} | "
              f"{s['peer']['rps']:,.0f} | **{s['ratio_rps']:.2f}×** | {s['librl']['p50_us'] / 1000:.2f} / "
              f"{s['peer']['p50_us'] / 1000:.2f} | {s['librl']['p99_us'] / 1000:.2f} / "
              f"{s['peer']['p99_us'] / 1000:.2f} | {s['ratio_p99']:.2f}× |")
        for name, language, why in LATER:
            w(f"| {name} ({language}) | – | – | – | – | – | – | – | {why} |")
        w("")
        w("| framework | app CPU µs/request: none | floor | librl | peer | **middleware (librl − floor)** | "
          "peer − none | Redis commands/request: floor | librl | peer | refused: librl / peer |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for fw in frameworks:
            s = summary[(fw.name, load)]
            w(f"| {fw.name} | {s['none']['cpu_us']:.0f} | {s['floor']['cpu_us']:.0f} | {s['librl']['cpu_us']:.0f} | "
              f"{s['peer']['cpu_us']:.0f} | **{s['middleware_us']:.0f}** | {s['peer_middleware_us']:.0f} | "
              f"{s['floor']['redis_per_request']:.2f} | {s['librl']['redis_per_request']:.2f} | "
              f"{s['peer']['redis_per_request']:.2f} | {s['librl']['refused']:.0%} / {s['peer']['refused']:.0%} |")
        w("")
    w("## Targets")
    w("")
    w(f"Throughput librl ÷ peer ≥ {TARGET_RPS_VS_PEER}× (same headers sent); the middleware's own CPU "
      "(librl − floor) ≤ 15 µs per request in Rust, Node.js, Go and Java, ≤ 60 µs in Python; p99 no worse than the "
      "peer's (≤ 1.00×). Judged on each load.")
    w("")
    w("| framework | load | librl ÷ peer req/s | middleware µs | p99 ÷ peer |")
    w("|---|---|---|---|---|")
    for fw in frameworks:
        for load in LOADS:
            s = summary[(fw.name, load)]
            limit = TARGET_MIDDLEWARE_US[fw.language]
            w(f"| {fw.name} | {load} | {s['ratio_rps']:.2f}× ({verdict(s['ratio_rps'], s['ratio_rps'] >= TARGET_RPS_VS_PEER)}) | "
              f"{s['middleware_us']:.0f} ≤ {limit} ({verdict(s['middleware_us'], s['middleware_us'] <= limit)}) | "
              f"{s['ratio_p99']:.2f}× ({verdict(s['ratio_p99'], s['ratio_p99'] <= 1.0)}) |")
    w("")
    w("## The apps and what they send")
    w("")
    w("| framework | language | peer | headers librl sends here | rate-limit headers the peer sent | note |")
    w("|---|---|---|---|---|---|")
    for fw in frameworks:
        peer_sent = ", ".join(headers_sent.get((fw.name, "peer"), [])) or "none"
        w(f"| {fw.name} | {fw.language} | {fw.peer} | `{fw.headers}` | {peer_sent} | {fw.note} |")
    w("")
    w("Redis commands per request, by command (the last round, `/open`):")
    w("")
    for fw in frameworks:
        cmds = summary[(fw.name, "open")]["commands"]
        parts = []
        for v in ("floor", "librl", "peer"):
            c = ", ".join(f"{k} {n:.2f}" for k, n in sorted(cmds[v].items())) or "none"
            parts.append(f"{v}: {c}")
        w(f"- {fw.name}: " + "; ".join(parts))
    w("")
    w("Each round's req/s (`/open`, none / floor / librl / peer):")
    w("")
    for fw in frameworks:
        rounds = [" / ".join(f"{runs[(fw.name, v, 'open')][i]['rps']:,.0f}" for v in VARIANTS)
                  for i in range(len(runs[(fw.name, 'none', 'open')]))]
        w(f"- {fw.name}: " + " · ".join(rounds))
    w("")
    if warnings:
        w("Runs that did not go as the load says (socket errors, or refusals away from the expected share):")
        w("")
        for warning in warnings:
            w(f"- {warning}")
        w("")
    w("![req/s per framework: none, floor, librl, peer](http.png)")
    return "\n".join(out) + "\n"


def chart(frameworks, summary, path):
    sys.path.insert(0, PYDEPS)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is missing (scripts/install-bench-deps.sh installs it): no chart")
        return False
    colors = {"none": "#bbbbbb", "floor": "#7f7f7f", "librl": "#1f77b4", "peer": "#ff7f0e"}
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    width = 0.2
    for ax, load in zip(axes, LOADS):
        xs = range(len(frameworks))
        for i, v in enumerate(VARIANTS):
            vals = [summary[(fw.name, load)][v]["rps"] for fw in frameworks]
            ax.bar([x + (i - 1.5) * width for x in xs], vals, width, label=v, color=colors[v])
        for x, fw in zip(xs, frameworks):
            s = summary[(fw.name, load)]
            top = max(s[v]["rps"] for v in VARIANTS)
            ax.annotate(f"{s['ratio_rps']:.2f}×", (x, top), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([fw.name for fw in frameworks])
        ax.set_yscale("log")
        ax.set_ylabel("requests/s (log)")
        ax.set_title("never refuses (/open)" if load == "open" else "refuses half (/half)")
    axes[0].legend(fontsize=8)
    fig.suptitle("make bench-http: req/s per framework (label: librl ÷ peer)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def git(*args):
    try:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke mode: every row for 1 s, one round, into target/")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--seconds", type=int)
    ap.add_argument("--connections", type=int, default=20)
    ap.add_argument("--frameworks", help="comma-separated subset, e.g. express,go")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the apps and the load to cores")
    ap.add_argument("--out", help="where the report goes (default: bench/results for a full run; "
                                  "target/bench-http for --frameworks or --quick)")
    ap.add_argument("--keep-running", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    # Five short rounds rather than three long ones: on a shared VM a whole
    # round can run at half speed (every app alike), and the median of five
    # per-round ratios stands two such rounds where three stood one.
    rounds = args.rounds or (1 if args.quick else 5)
    seconds = args.seconds or (1 if args.quick else 3)
    frameworks = FRAMEWORKS
    if args.frameworks:
        wanted = args.frameworks.split(",")
        unknown = set(wanted) - {fw.name for fw in FRAMEWORKS}
        if unknown:
            sys.exit(f"unknown framework(s): {', '.join(sorted(unknown))}")
        frameworks = [fw for fw in FRAMEWORKS if fw.name in wanted]
    if args.out:
        results = os.path.abspath(args.out)
    elif args.quick:
        results = os.path.join(ROOT, "target", "bench-http-quick")
    elif args.frameworks:
        # A subset must never overwrite the committed full report.
        results = os.path.join(ROOT, "target", "bench-http")
    else:
        results = os.path.join(BENCH, "results")
    os.makedirs(results, exist_ok=True)
    pin = not args.no_pin and (os.cpu_count() or 1) >= 2
    app_cpu, load_cpu = (1, 0) if pin else (None, None)

    started = time.monotonic()
    load_start = loadavg()
    server = Server(MODULE, "http")
    apps = []
    try:
        if pin:
            subprocess.run(["taskset", "-pc", str(load_cpu), str(server.proc.pid)], check=True,
                           capture_output=True)
        redis = server.conn()
        policies = write_policies(server.dir)
        log(f"starting {len(frameworks) * len(VARIANTS)} apps")
        ports = free_ports(len(frameworks) * len(VARIANTS))
        for fw in frameworks:
            for v in VARIANTS:
                apps.append(App(fw, v, ports.pop(), policies, server.port, app_cpu))
        for app in apps:
            app.wait_ready(180)
        headers_sent = {}
        for app in apps:
            headers_sent[(app.framework.name, app.variant)] = check_app(app)
        log(f"every app answers and refuses as it should ({len(apps)} apps)")
        # One warm-up run each (JIT, connection pools), not recorded.
        for app in apps:
            for load in LOADS:
                wrk_run(app, redis, load, 1 if args.quick else app.framework.warmup_s, args.connections, load_cpu)
        plan = [(app, load) for app in apps for load in LOADS]
        runs = {(a.framework.name, a.variant, load): [] for a, load in plan}
        warnings = []
        for r in range(rounds):
            shift = (r * 7) % len(plan)
            order = plan[shift:] + plan[:shift]
            for app, load in (order if r % 2 == 0 else order[::-1]):
                fig = wrk_run(app, redis, load, seconds, args.connections, load_cpu)
                fig["round"] = r
                runs[(app.framework.name, app.variant, load)].append(fig)
                p99, cpu = fig["p99_us"], fig["cpu_us"]
                log(f"round {r + 1}/{rounds} {app.label:<16} {load:<4} {fig['rps']:>9,.0f} req/s "
                    f"p99 {'-' if p99 is None else f'{p99 / 1000:6.2f}'} ms "
                    f"{'-' if cpu is None else f'{cpu:6.0f}'} µs CPU/req "
                    f"{fig['redis_per_request']:.2f} cmd/req refused {fig['refused']:.0%} load {fig['load']:.1f}")
                warning = run_warning(app, load, fig)
                if warning:
                    warnings.append(warning)
                    log(f"warning: {warning}")
            # Every round's raw figures so far, kept should anything after fail.
            with open(os.path.join(ROOT, "target", "bench-http-runs.json"), "w") as f:
                json.dump({"/".join(k): v for k, v in runs.items()}, f, indent=1, sort_keys=True)
        redis_version = redis.call("INFO", "server").decode()
        redis.close()
    finally:
        if not args.keep_running:
            for app in apps:
                app.stop()
            server.stop()
    summary = summarize(frameworks, runs)
    loads = [f["load"] for rs in runs.values() for f in rs]
    meta = {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "commit": git("rev-parse", "--short", "HEAD"),
        "module": os.path.relpath(MODULE, ROOT) if MODULE.startswith(ROOT) else MODULE,
        "redis": next((ln.split(":", 1)[1] for ln in redis_version.splitlines() if ln.startswith("redis_version")),
                      "?"),
        "cpu": cpu_model(), "cores": os.cpu_count(), "frameworks": [fw.name for fw in frameworks],
        "connections": args.connections, "seconds": seconds, "rounds": rounds,
        "pinning": (f"each app pinned to core {app_cpu}, wrk and redis-server to core {load_cpu} (taskset)"
                    if pin else "nothing pinned"),
        "elapsed_s": time.monotonic() - started,
        "load_start": load_start, "load_end": loadavg(),
        "load_min": min(loads), "load_max": max(loads),
    }
    md = report(meta, frameworks, summary, headers_sent, runs, warnings)
    with open(os.path.join(results, "http.md"), "w") as f:
        f.write(md)
    with open(os.path.join(results, "http.json"), "w") as f:
        json.dump({"meta": meta,
                   "runs": {"/".join(k): v for k, v in runs.items()}, "warnings": warnings,
                   "summary": {"/".join(k): v for k, v in summary.items()}}, f, indent=1, sort_keys=True)
    chart(frameworks, summary, os.path.join(results, "http.png"))
    print(md)
    log(f"wrote {os.path.relpath(results, ROOT)}/http.md, http.json, http.png")


if __name__ == "__main__":
    main()
