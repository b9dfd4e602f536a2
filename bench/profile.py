#!/usr/bin/env python3
"""make bench-profile: instructions per call under callgrind, for INCR, each
librl limiter and its Lua baseline, and where a librl call's instructions go.

redis-server (with the release module) runs under
`valgrind --tool=callgrind --toggle-collect=call`, so only what runs inside
Redis's `call()` (the command itself, as INFO commandstats times it) is
counted. For each case the counters are zeroed, redis-benchmark sends the
calls (same command lines as `make bench`), and the profile is dumped
(callgrind_control). Instruction counts do not depend on what else the
machine is doing, so these ratios are steadier than the timed ones.
Writes bench/results/profile.md.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the work tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from resp import Server, redis_benchmark  # noqa: E402

# The handler and the functions under it whose callees the report lists.
EXPAND = [
    "rl::RedisModule_OnLoad::__do_command",
    "rl::commands::limiter::run",
    "rl::store::replicate",
    "rl::store::Key::write",
    "rl::store::Key::modify",
    "redis_module::context::Context::reply",
    "RM_Replicate",
]
LINE = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+([*>]?)\s*(.*)$")
NAME = re.compile(r"^[^:]*:(.+?)(?: \(([\d,]+)x\))? \[(.*)\]$")


def annotate(path):
    """The total and, per function, (inclusive Ir, [(Ir, callee, calls)]),
    from a dump."""
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--tree=calling", "--threshold=100", path],
        capture_output=True, text=True, check=True,
    ).stdout
    total = 0
    functions = {}
    current = None
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            current = None
            continue
        ir = int(m.group(1).replace(",", ""))
        if m.group(3).startswith("PROGRAM TOTALS"):
            total = ir
            continue
        n = NAME.match(m.group(3))
        if not n:
            continue
        name = n.group(1)
        if m.group(2) == "*":
            current = functions.setdefault(name, (ir, []))
        elif m.group(2) == ">" and current is not None:
            calls = int((n.group(2) or "0").replace(",", ""))
            current[1].append((ir, name, calls))
    return total, functions


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--out", default=os.path.join(bench.RESULTS, "profile.md"))
    args = ap.parse_args()
    if not os.path.exists(bench.MODULE):
        sys.exit(f"{bench.MODULE} is missing: `make bench-profile` builds it first")
    started = time.monotonic()
    wrapper = ["valgrind", "--tool=callgrind", "--toggle-collect=call", "--dump-instr=no"]
    # The profile's dumps go to a directory of their own.
    cg_dir = tempfile.mkdtemp(prefix="librl-callgrind-")
    out_file = os.path.join(cg_dir, "callgrind.out")
    server = None
    try:
        server = Server(bench.MODULE, "profile", wrapper=wrapper + [f"--callgrind-out-file={out_file}"])
        conn = server.conn()
        cases = bench.throughput_cases(bench.load_scripts(conn))
        results = {}
        for cid, label, _, command in cases:
            conn.call("FLUSHALL", "SYNC")
            subprocess.run(["callgrind_control", "--zero", str(server.proc.pid)], check=True,
                           capture_output=True)
            redis_benchmark(server.port, command, args.calls, bench.KEYSPACE, bench.CLIENTS, bench.PIPELINE)
            before = set(glob.glob(out_file + ".*"))
            subprocess.run(["callgrind_control", f"--dump={cid}", str(server.proc.pid)], check=True,
                           capture_output=True)
            deadline = time.monotonic() + 60
            new = set()
            while not new and time.monotonic() < deadline:
                time.sleep(0.2)
                new = set(glob.glob(out_file + ".*")) - before
            total, functions = annotate(sorted(new)[-1])
            results[cid] = (label, command, total, functions)
            print(f"{label:<18} {total / args.calls:>9,.0f} instructions per call", flush=True)
        conn.close()
    finally:
        if server:
            server.stop()
        shutil.rmtree(cg_dir, ignore_errors=True)

    incr = results["incr"][2]
    lines = [
        "# librl profile: instructions per call (callgrind)",
        "",
        f"`make bench-profile`: redis-server 7.0.15 with the release module under `valgrind --tool=callgrind "
        f"--toggle-collect=call` (only what runs inside Redis's `call()`, as commandstats times it), "
        f"{args.calls:,} calls per case from redis-benchmark (-c {bench.CLIENTS} -P {bench.PIPELINE}, random "
        f"keys over {bench.KEYSPACE:,}, every call admitted), the same command lines as `make bench`. "
        f"Generated {time.strftime('%Y-%m-%d %H:%M')}, commit {bench.git('rev-parse', '--short', 'HEAD')}; "
        f"took {time.monotonic() - started:.0f} s.",
        "",
        "| command | instructions per call | ÷ INCR |",
        "|---|---:|---:|",
    ]
    for cid, (label, _, total, _) in results.items():
        lines.append(f"| {label} | {total / args.calls:,.0f} | {total / incr:.2f}x |")
    for cid in ("fixed", "sliding", "approx", "token"):
        label, command, total, functions = results[cid]
        lines += [
            "",
            f"## {label}: where a call's instructions go",
            "",
            f"`{' '.join(command)}`: {total / args.calls:,.0f} instructions per call in all. For the handler "
            f"and the functions under it, each direct callee's inclusive instructions per call (its own and "
            f"its callees'), and how often it is called per command; callees under 1% of the command left out.",
            "",
            "| function | callee | per call | share | calls per command |",
            "|---|---|---:|---:|---:|",
        ]
        for fn in EXPAND:
            if fn not in functions:
                continue
            inclusive, callees = functions[fn]
            lines.append(f"| **`{fn}`** | (all) | **{inclusive / args.calls:,.0f}** "
                         f"| **{100 * inclusive / total:.1f}%** | |")
            for ir, callee, calls in sorted(callees, reverse=True):
                if ir < total / 100:
                    continue
                lines.append(f"| | `{callee}` | {ir / args.calls:,.0f} | {100 * ir / total:.1f}% "
                             f"| {calls / args.calls:g} |")
    md = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(md)
    # For make bench's table: instructions per call beside the timed ratios.
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump({
            "commit": bench.git("rev-parse", "--short", "HEAD"),
            "src_tree": bench.src_tree(),
            "calls": args.calls,
            "per_call": {cid: r[2] / args.calls for cid, r in results.items()},
        }, f, indent=1)
    print(md)


if __name__ == "__main__":
    main()
