#!/usr/bin/env python3
"""make bench-http-profile: where each integration's per-request CPU goes
(bench/README.md, "make bench-http-profile"). For each framework, its librl
app (bench/http) runs under the language's own sampling profiler while
wrk sends it the never-refusing load; each function's share of the
samples, times the app's measured CPU per request, gives its µs per
request. Writes bench/results/http-profile.md.

- Python: py-spy (attached for the load's seconds; active threads only);
- Node.js: `node --cpu-prof` (V8's sampling profiler);
- Go: runtime/pprof (the app's BENCH_CPUPROFILE), read with `go tool pprof`;
- Rust: `perf record` (cpu-clock), self time per symbol.

Each section lists librl's own functions (the integration's and the client
package's files) by self time, then the rest by where it runs (the
framework, the Redis client, the runtime), so the integration's cost is
named file by file and function by function.
"""

import argparse
import collections
import datetime
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import bench_http as bh  # noqa: E402
from resp import Server  # noqa: E402

ROOT = bh.ROOT
PYSPY = os.path.join(bh.DEPS, "bench-http", "py-spy", "bin", "py-spy")
TOP = 14


def rel(path):
    """A source path as the report shows it: relative to the repository, or
    from the package directory on (site-packages/x/..., node_modules/x/...)."""
    path = path.replace("file://", "")
    if path.startswith(ROOT + "/"):
        path = path[len(ROOT) + 1:]
    for marker in ("site-packages/", "node_modules/", "/pkg/mod/", "/src/"):
        if marker in path and not path.startswith(("clients/", "bench/")):
            return path.split(marker, 1)[1]
    return path


def is_librl(where):
    """Code of the project's own packages (not the bench app, not the peers)."""
    return where.startswith("clients/") or "librl" in where.split("(")[0].split("::")[0]


class Profile:
    """Samples by (function, file): self counts, and how many samples have
    a librl frame anywhere on their stack (librl's inclusive share)."""

    def __init__(self):
        self.self_counts = collections.Counter()
        self.total = 0
        self.in_librl = 0

    def add(self, stack, count):
        """stack: [(function, file)] from the root to the leaf."""
        if not stack:
            return
        self.total += count
        self.self_counts[stack[-1]] += count
        if any(is_librl(f) for _, f in stack):
            self.in_librl += count


def python_profile(pid, seconds, out):
    raw = os.path.join(out, "py-spy.txt")
    proc = subprocess.Popen([PYSPY, "record", "--pid", str(pid), "--duration", str(seconds), "--rate", "250",
                             "--format", "raw", "--nonblocking", "--output", raw],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, lambda: parse_pyspy(raw)


FRAME = re.compile(r"^(.*) \((.*?)(?::\d+)?\)$")


def parse_pyspy(path):
    prof = Profile()
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            frames, count = line.rsplit(" ", 1)
            stack = []
            for frame in frames.split(";")[1:]:  # the first is the process/thread
                m = FRAME.match(frame)
                stack.append((m.group(1), rel(m.group(2))) if m else (frame, "?"))
            prof.add(stack, int(count))
    return prof


def parse_cpuprofile(path):
    with open(path) as f:
        doc = json.load(f)
    nodes = {n["id"]: n for n in doc["nodes"]}
    parent = {c: n["id"] for n in doc["nodes"] for c in n.get("children", [])}
    prof = Profile()
    for node in doc["nodes"]:
        hits = node.get("hitCount", 0)
        name = node["callFrame"]["functionName"] or "(anonymous)"
        if not hits or name == "(idle)":
            continue
        stack = []
        nid = node["id"]
        while nid is not None:
            cf = nodes[nid]["callFrame"]
            stack.append((cf["functionName"] or "(anonymous)", rel(cf["url"]) if cf["url"] else "(native)"))
            nid = parent.get(nid)
        prof.add(stack[::-1][1:], hits)  # without (root)
    return prof


def parse_pprof(binary, path):
    """`go tool pprof -raw`: each sample's stack, leaf first."""
    out = subprocess.run(["go", "tool", "pprof", "-raw", binary, path], capture_output=True, text=True,
                         check=True).stdout
    prof = Profile()
    samples = out.split("Samples:", 1)[1].split("Locations", 1)[0]
    locations = {}
    for line in out.split("Locations", 1)[1].splitlines():
        m = re.match(r"^\s*(\d+): 0x[0-9a-f]+ M=\d+ (\S+) (\S+):\d+", line)
        if m:
            locations[m.group(1)] = (m.group(2), rel(m.group(3)))
    for line in samples.splitlines()[2:]:
        parts = line.split(":")
        if len(parts) < 2 or not parts[0].strip():
            continue
        count = int(parts[0].split()[0])
        ids = parts[1].split()
        stack = [locations.get(i, ("?", "?")) for i in ids][::-1]
        prof.add(stack, count)
    return prof


def parse_perf(path):
    out = subprocess.run(["perf", "script", "-i", path, "-F", "sym"], capture_output=True, text=True).stdout
    prof = Profile()
    stack = []
    for line in out.splitlines() + [""]:
        line = line.strip()
        if not line:
            if stack:
                prof.add(stack[::-1], 1)
            stack = []
            continue
        sym = line.split(" ", 1)[-1] if re.match(r"^[0-9a-f]+ ", line) else line
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        sym = re.sub(r"::h[0-9a-f]{16}$", "", sym)
        crate = sym.lstrip("<").split("::")[0] if "::" in sym else "(native)"
        stack.append((sym, crate))
    return prof


# The languages whose sampler this script runs and reads.
PROFILED = ("Python", "Rust", "Node.js", "Go")


def profile_framework(fw, redis, redis_port, policies, seconds, out):
    """Runs fw's librl app under its profiler with the /open load; returns
    (profile, cpu µs per request, req/s)."""
    env_extra = {}
    command = fw.command("librl")
    if fw.language == "Node.js":
        command = [command[0], "--cpu-prof", "--cpu-prof-dir", out] + command[1:]
    if fw.language == "Go":
        env_extra["BENCH_CPUPROFILE"] = os.path.join(out, "go.pprof")
    fw_run = bh.Framework(fw.name, fw.language, lambda v: command, fw.peer, fw.headers)
    port = bh.free_ports(1)[0]
    os.environ.update(env_extra)
    try:
        app = bh.App(fw_run, "librl", port, policies, redis_port, None)
    finally:
        for k in env_extra:
            os.environ.pop(k, None)
    try:
        app.wait_ready(180)
        bh.check_app(app)
        bh.wrk_run(app, redis, "open", 2, 20, None)  # warm-up
        sampler, parse = None, None
        if fw.language == "Python":
            sampler, parse = python_profile(app.proc.pid, seconds, out)
        elif fw.language == "Rust":
            data = os.path.join(out, "perf.data")
            sampler = subprocess.Popen(["perf", "record", "-F", "999", "-o", data, "-p", str(app.proc.pid),
                                        "--", "sleep", str(seconds)], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
            parse = lambda: parse_perf(data)  # noqa: E731
        fig = bh.wrk_run(app, redis, "open", seconds, 20, None)
        if sampler:
            sampler.wait(timeout=120)
    finally:
        app.stop()
    if fw.language == "Node.js":
        found = sorted(glob.glob(os.path.join(out, "*.cpuprofile")))
        if not found:
            raise RuntimeError(f"{fw.name}: node wrote no .cpuprofile")
        prof = parse_cpuprofile(found[-1])
    elif fw.language == "Go":
        prof = parse_pprof(fw.command("librl")[0], os.path.join(out, "go.pprof"))
    else:
        prof = parse()
    return prof, fig


def report_section(w, fw, prof, fig):
    us = fig["cpu_us"]
    per = us / prof.total if prof.total else 0
    w(f"## {fw.name} ({fw.language})")
    w("")
    w(f"{fig['rps']:,.0f} req/s, {us:.0f} µs of app CPU per request, {prof.total:,} samples. Samples with a "
      f"librl frame on the stack (the integration and what it calls, Redis client included): "
      f"**{prof.in_librl / max(prof.total, 1):.0%}, ≈ {prof.in_librl * per:.0f} µs per request**.")
    w("")
    ours = [(k, c) for k, c in prof.self_counts.most_common() if is_librl(k[1])]
    w(f"librl's own functions by self time (top {TOP}; {sum(c for _, c in ours) * per:.0f} µs per request in all):")
    w("")
    w("| function | file | µs/request | share |")
    w("|---|---|---:|---:|")
    for (fn, where), c in ours[:TOP]:
        w(f"| `{fn}` | `{where}` | {c * per:.1f} | {c / prof.total:.1%} |")
    w("")
    by_place = collections.Counter()
    for (fn, where), c in prof.self_counts.items():
        if not is_librl(where):
            by_place[place(where)] += c
    w("The rest, by where it runs (self time):")
    w("")
    w("| where | µs/request | share |")
    w("|---|---:|---:|")
    for where, c in by_place.most_common(10):
        w(f"| `{where}` | {c * per:.1f} | {c / prof.total:.1%} |")
    w("")


def place(where):
    """A file's package: its first path part (or two, for scoped npm packages)."""
    parts = where.split("/")
    if where.startswith("@") and len(parts) > 1:
        return "/".join(parts[:2])
    if where.startswith(("bench/", "node:")):
        return where
    return parts[0] if len(parts) > 1 else where


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--frameworks", help="comma-separated subset")
    args = ap.parse_args()
    frameworks = [fw for fw in bh.FRAMEWORKS if not args.frameworks or fw.name in args.frameworks.split(",")]
    # A framework whose language has no sampler here (Java) is measured by make bench-http only.
    for fw in [fw for fw in frameworks if fw.language not in PROFILED]:
        bh.log(f"{fw.name} ({fw.language}): no profiler for its language here, left out")
    frameworks = [fw for fw in frameworks if fw.language in PROFILED]
    started = time.monotonic()
    load_start = bh.loadavg()
    server = Server(bh.MODULE, "http-profile")
    work = tempfile.mkdtemp(prefix="librl-bench-http-profile-")
    results = {}
    try:
        policies = bh.write_policies(server.dir)
        redis = server.conn()
        for fw in frameworks:
            out = os.path.join(work, fw.name)
            os.makedirs(out)
            bh.log(f"profiling {fw.name}")
            results[fw.name] = profile_framework(fw, redis, server.port, policies, args.seconds, out)
        redis.close()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    lines = []
    w = lines.append
    w("# make bench-http-profile: where each integration's time goes")
    w("")
    w(f"Reproduce with `make bench-http-profile`. This run: {datetime.datetime.now():%Y-%m-%d %H:%M}, commit "
      f"{bh.git('rev-parse', '--short', 'HEAD')}, {bh.cpu_model()} ({os.cpu_count()} cores), load average "
      f"{load_start:.1f} at the start and {bh.loadavg():.1f} at the end; {time.monotonic() - started:.0f} s. "
      f"Each framework's librl app (bench/http) under its language's sampling profiler while wrk sends the "
      f"never-refusing load (`/open`, 20 connections, {args.seconds} s); µs per request are each function's "
      "share of the samples times the app's CPU per request measured in the same run. Profilers add their "
      "own cost and the machine is shared: read the shares, not the absolute figures.")
    w("")
    for fw in frameworks:
        prof, fig = results[fw.name]
        report_section(w, fw, prof, fig)
    path = os.path.join(bh.BENCH, "results", "http-profile.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    bh.log(f"wrote {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
