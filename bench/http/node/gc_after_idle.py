#!/usr/bin/env python3
"""What V8's collector does in a Node app when load comes back after an idle spell
(docs/http/node.md, Caches and the garbage collector): each app of app.mjs runs
with --trace-gc-nvp; the apps take wrk's load in turn, each after IDLE seconds of
rest (as in a full make bench-http, where an app sits idle while the others run),
and each run prints, beside wrk's p50/p99 and the app's CPU per request, its
young-generation collections, the KB they promoted per 1,000 requests and its
mark-compacts. Promotion and collections do not move with the machine's load;
the latency does.

  python3 bench/http/node/gc_after_idle.py [--idle 30] [--seconds 5] [--rounds 3]
      [--load half|open] [--node-flags=--max-semi-space-size=1] LABEL=FRAMEWORK:VARIANT[:DIST] ...

e.g. main=fastify:librl:/tmp/main/clients/node/dist new=fastify:librl peer=fastify:peer
(DIST: another build of clients/node's dist/, LIBRL_DIST). --node-flags applies to
every app: --max-semi-space-size=1 holds the new space at the size V8's memory
reducer leaves after an idle spell, to reproduce that state without waiting.
Needs redis-server on PATH, wrk, the release module (target/release/librl.so),
clients/node built and bench/http/node's packages installed. Apps run on CPU 1,
wrk and Redis on CPU 0.
"""

import argparse
import atexit
import json
import os
import re
import socket
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        f = stat.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / CLK


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def gc_stats(text):
    """Scavenges, bytes they promoted, mark-compacts and their pauses (ms, with incremental steps)."""
    s = {"scavenges": 0, "promoted": 0, "scavenge_ms": 0.0, "mark_compacts": 0, "mark_compact_ms": 0.0}
    for line in text.splitlines():
        m = re.search(r"pause=([\d.]+) .*?gc=(\w+)", line)
        if not m:
            continue
        pause = float(m.group(1))
        if m.group(2) == "s":
            s["scavenges"] += 1
            s["scavenge_ms"] += pause
            s["promoted"] += int(re.search(r" promoted=(\d+)", line).group(1))
        else:
            steps = re.search(r"incremental.steps_took=([\d.]+)", line)
            s["mark_compacts"] += 1
            s["mark_compact_ms"] += pause + (float(steps.group(1)) if steps else 0.0)
    return s


def wait_listening(port, label, limit_s=60):
    """Until the app accepts connections (a loaded machine starts Node slowly)."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{label} is not listening on {port} after {limit_s} s") from None
            time.sleep(0.2)


def wrk(port, load, seconds, nonce, latency):
    env = dict(os.environ, BENCH_PATH="/" + load, BENCH_NONCE=nonce)
    cmd = ["taskset", "-c", "0", "wrk", "-t1", "-c20", f"-d{seconds}s", "-s", os.path.join(HERE, "..", "load.lua")]
    cmd += (["--latency"] if latency else []) + [f"http://127.0.0.1:{port}"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=False).stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--idle", type=float, default=30)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=6)
    ap.add_argument("--load", choices=["half", "open"], default="half")
    ap.add_argument("--headers", default="legacy", help="the policies' header set (bench_http.py gives Fastify legacy)")
    ap.add_argument("--node-flags", default="")
    ap.add_argument("apps", nargs="+", metavar="LABEL=FRAMEWORK:VARIANT[:DIST]")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="librl-gc-idle.")
    with open(os.path.join(HERE, "..", "policies.json")) as f:
        policies = dict(json.load(f), headers=args.headers)
    policies_path = os.path.join(work, "policies.json")
    with open(policies_path, "w") as f:
        json.dump(policies, f)
    redis_port = free_port()
    redis = subprocess.Popen(
        [
            "taskset",
            "-c",
            "0",
            "redis-server",
            "--port",
            str(redis_port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--loadmodule",
            os.path.join(ROOT, "target/release/librl.so"),
        ],
        stdout=subprocess.DEVNULL,
    )
    apps = {}
    atexit.register(lambda: [p.terminate() for p in [redis] + [a[0] for a in apps.values()]])
    time.sleep(0.5)
    for spec in args.apps:
        label, rest = spec.split("=", 1)
        framework, variant, *dist = rest.split(":", 2)
        port = free_port()
        env = dict(
            os.environ, PORT=str(port), REDIS_URL=f"redis://127.0.0.1:{redis_port}", LIBRL_POLICIES=policies_path
        )
        if dist:
            env["LIBRL_DIST"] = dist[0]
        log = os.path.join(work, f"{label}.gc")
        cmd = ["taskset", "-c", "1", "node", "--trace-gc-nvp"] + args.node_flags.split()
        cmd += [os.path.join(HERE, "app.mjs"), framework, variant]
        with open(log, "w") as out:
            apps[label] = (subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT), port, log)
    for label, (_, port, _) in apps.items():
        wait_listening(port, label)
    for label, (_, port, _) in apps.items():
        wrk(port, args.load, args.warmup, f"warm-{label}-{time.time_ns()}", False)
    runs = {label: [] for label in apps}
    for r in range(args.rounds):
        for label, (proc, port, log) in apps.items():
            time.sleep(args.idle)
            at = os.path.getsize(log)
            cpu0 = cpu_seconds(proc.pid)
            out = wrk(port, args.load, args.seconds, f"{label}-{r}-{time.time_ns()}", True)
            time.sleep(0.3)
            cpu1 = cpu_seconds(proc.pid)
            with open(log) as f:
                f.seek(at)
                g = gc_stats(f.read())
            served = re.search(r"(\d+) requests in", out)
            total = int(served.group(1)) if served else 0
            if total == 0:
                print(f"round {r} {label}: no request served (a stall)", flush=True)
                continue
            lat = {}
            for q in ("50", "99"):
                v, unit = re.search(rf"\s{q}%\s+([\d.]+)(us|ms|s)", out).groups()
                lat[q] = float(v) * {"us": 0.001, "ms": 1, "s": 1000}[unit]
            fig = {
                **g,
                "rps": total / args.seconds,
                "p50": lat["50"],
                "p99": lat["99"],
                "cpu": (cpu1 - cpu0) * 1e6 / total,
                "promoted": g["promoted"] / 1024 / (total / 1000),
            }
            runs[label].append(fig)
            print(
                f"round {r} {label:10s} {fig['rps']:7.0f}/s p50 {fig['p50']:.2f} p99 {fig['p99']:6.2f} ms "
                f"CPU {fig['cpu']:5.1f} us/req | {g['scavenges']} scavenges ({g['scavenge_ms']:.0f} ms), "
                f"promoted {fig['promoted']:6.1f} KB/1k req, {g['mark_compacts']} mark-compacts "
                f"({g['mark_compact_ms']:.1f} ms) | load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    for label, figs in runs.items():
        if not figs:
            continue
        p99 = statistics.median(f["p99"] for f in figs)
        promoted = statistics.median(f["promoted"] for f in figs)
        print(
            f"median {label:10s} p99 {p99:.2f} ms, promoted {promoted:.1f} KB/1k req, "
            f"mark-compacts {sum(f['mark_compacts'] for f in figs)} in {len(figs)} runs"
        )


if __name__ == "__main__":
    main()
