#!/usr/bin/env python3
"""make bench-profile: where each command's instructions go, so the gap
between librl and the floor module is explained line by line.

The same server, modules and command lines as `make bench` (INCR, the
floor, every librl command, CL.THROTTLE), under callgrind (bench/
instructions.py: only what runs inside Redis's `call()` is counted). Each
module call's instructions are split into: Redis's call() around the
command; the module context Redis builds for it; each module-API function
the module calls (inclusive: what runs inside Redis for it); and the
module's own code (parsing, decisions, statistics, allocations' Rust side,
conversions). Then, per command, the call tree under its handler.
Writes bench/results/profile.md (and profile.json).
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the work tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import instructions  # noqa: E402

DISPATCHER = instructions.DISPATCHER
PROFILED = ["incr", "floor_empty", "floor_verbatim", "floor", "fixed", "sliding", "approx", "token", "concurrent",
            "all", "cell"]
LIBRL = ["fixed", "sliding", "approx", "token", "concurrent", "all"]


def tree(p, root, total, calls, min_share, depth=0, seen=None, expanded=None, max_depth=6):
    """Markdown rows of the call tree under `root`: module functions are
    expanded; a server function (the API) shows its own top callees the
    first time it appears (their figures are over all its calls)."""
    seen = seen or set()
    expanded = set() if expanded is None else expanded
    rows = []
    callees = sorted(p.callees(root).items(), key=lambda kv: -kv[1][0])
    for name, (ir, n) in callees:
        if ir < total * min_share:
            continue
        indent = "· " * depth
        module = p.is_module(name)
        shown = f"`{name}`" if module else f"**`{name}`**"
        rows.append(f"| {indent}{shown} | {ir / calls:,.0f} | {100 * ir / total:.1f}% | {n / calls:g} |")
        if module and name not in seen and depth < max_depth:
            rows += tree(p, name, total, calls, min_share, depth + 1, seen | {name}, expanded, max_depth)
        elif not module and name not in expanded and name != "call":
            expanded.add(name)
            for sub, (sir, sn) in sorted(p.callees(name).items(), key=lambda kv: -kv[1][0])[:4]:
                if sir >= total * 0.01:
                    rows.append(f"| {'· ' * (depth + 1)}`{sub}` | {sir / calls:,.0f} | {100 * sir / total:.1f}% "
                                f"| {sn / calls:g} |")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=5_000)
    ap.add_argument("--out", default=os.path.join(bench.RESULTS, "profile.md"))
    args = ap.parse_args()
    started = time.monotonic()
    modules, have_cell = bench.build_modules()
    empty = bench.Case("floor_empty", "FLOOR.EMPTY", "floor", "floor.empty", ["FLOOR.EMPTY", "b:__rand_int__"],
                       what="a module command that only replies 1")
    cases = [empty] + [c for c in bench.main_cases(have_cell) if c.id in PROFILED]
    labels = {c.id: c.label for c in cases}
    commands = {c.id: " ".join(c.command) for c in cases}
    keep = tempfile.mkdtemp(prefix="librl-profile-")
    try:
        per_call = bench.phase_instructions(modules, cases, args.calls, keep=keep)
        profiles = {c.id: instructions.Profile(os.path.join(keep, f"{c.id}.callgrind")) for c in cases}
    finally:
        shutil.rmtree(keep, ignore_errors=True)
    floor = per_call["floor"]
    cell = per_call.get("cell")
    commit = bench.git("rev-parse", "--short", "HEAD")
    dirty = bench.git("status", "--porcelain", "--untracked-files=no", "--", "src", "core")
    commit += "+changes" if dirty and dirty != "?" else ""
    out = []
    w = out.append
    w("# librl profile: where the instructions go (callgrind)")
    w("")
    w("`make bench-profile`: redis-server 7.0.15 with librl, the floor module"
      + (" and redis-cell 0.2.2" if have_cell else "") + " loaded, under `valgrind --tool=callgrind "
      f"--toggle-collect=call` (only what runs inside Redis's `call()`, as commandstats times it), "
      f"{args.calls:,} calls per command from redis-benchmark (-c {bench.CLIENTS} -P {bench.PIPELINE}, random "
      f"keys over {bench.KEYSPACE:,}, every call admitted), the command lines of `make bench`. "
      f"Module: `{os.path.relpath(bench.MODULE, bench.ROOT)}`, commit {commit}; generated "
      f"{time.strftime('%Y-%m-%d %H:%M')} in {time.monotonic() - started:.0f} s.")
    w("")
    w("| command | instructions per call | ÷ floor | " + ("÷ CL.THROTTLE |" if cell else ""))
    w("|---|---:|---:|" + ("---:|" if cell else ""))
    keys = {c.id: c.keys for c in cases}
    for cid in PROFILED:
        if cid not in per_call:
            continue
        line = f"| {labels[cid]} | {per_call[cid]:,.0f} | {per_call[cid] / (keys[cid] * floor):.2f}× |"
        if cell:
            line += f" {per_call[cid] / cell:.2f}× |"
        w(line)
    w("")
    w("RL.ALL writes three keys: its floor ratio is to three floor calls.")
    w("")

    # The gap, line by line.
    split = {cid: instructions.breakdown(p) for cid, p in profiles.items()}
    cols = [cid for cid in ["floor", "fixed", "sliding", "approx", "token", "concurrent", "cell"]
            if split.get(cid)]
    lines = {}
    for cid in cols:
        for name, ir in split[cid].items():
            lines.setdefault(name, {})[cid] = ir / args.calls
    fixed_lines = [instructions.AROUND, instructions.CONTEXT]
    own = instructions.OWN
    api_lines = sorted((n for n in lines if n not in fixed_lines and n != own),
                       key=lambda n: -max(lines[n].values()))
    small = [n for n in api_lines if max(lines[n].values()) < 60]
    big = [n for n in api_lines if n not in small]
    w("## The gap to the floor, line by line")
    w("")
    w(f"Instructions per call, split by who runs them. {instructions.LINES_EXPLAINED} "
      "For librl, each cell shows the difference to the floor in brackets.")
    w("")
    w("| where | " + " | ".join(labels[c] for c in cols) + " |")
    w("|---|" + "---:|" * len(cols))

    def cell_text(name_values, cid):
        v = name_values.get(cid, 0)
        if cid in LIBRL:
            d = v - name_values.get("floor", 0)
            return f"{v:,.0f} ({d:+,.0f})" if abs(d) >= 0.5 else f"{v:,.0f}"
        return f"{v:,.0f}"

    for name in fixed_lines + big:
        w(f"| {'API: `' + name + '`' if name in big else name} | "
          + " | ".join(cell_text(lines.get(name, {}), c) for c in cols) + " |")
    if small:
        merged = {c: sum(lines[n].get(c, 0) for n in small) for c in cols}
        w(f"| API: {len(small)} others (under 60 each: {', '.join('`' + n + '`' for n in small[:8])}"
          f"{'…' if len(small) > 8 else ''}) | " + " | ".join(cell_text(merged, c) for c in cols) + " |")
    w(f"| *{own}* | " + " | ".join(cell_text(lines.get(own, {}), c) for c in cols) + " |")
    totals = {c: per_call[c] for c in cols}
    w("| **total** | " + " | ".join(f"**{cell_text(totals, c)}**" for c in cols) + " |")
    w("")

    # Per command: the tree under the handler.
    for cid in PROFILED:
        if cid not in profiles:
            continue
        p = profiles[cid]
        w(f"## {labels[cid]}")
        w("")
        w(f"`{commands[cid]}`: {per_call[cid]:,.0f} instructions per call. The call tree under "
          + ("the command handler" if split.get(cid) else "Redis's `call()`")
          + ": each callee's inclusive instructions per command, its share, and calls per command; "
          "a dot per level; module functions in plain code, server functions (the module API) in bold, "
          "with their own top callees the first time they appear (over all their calls); callees under "
          "0.5% left out. A function called from several places shows all its callees.")
        w("")
        w("| function | per call | share | calls |")
        w("|---|---:|---:|---:|")
        root = DISPATCHER if split.get(cid) else "call"
        w(f"| `{root}` | {p.ir(root) / args.calls:,.0f} | {100 * p.ir(root) / p.total:.1f}% | 1 |")
        out.extend(tree(p, root, p.total, args.calls, 0.005, depth=1,
                        max_depth=7 if split.get(cid) else 2))
        if split.get(cid):
            mods = sorted(((p.self_ir(n), n) for n in p.module_functions()), reverse=True)
            top = [(ir, n) for ir, n in mods if ir >= p.total * 0.01][:12]
            if top:
                w("")
                w("Where the module's own instructions are spent (each function's self cost, inlined code "
                  "included, 1% of the command or more): "
                  + "; ".join(f"`{n}` {ir / args.calls:,.0f}" for ir, n in top) + ".")
        w("")
    md = "\n".join(out) + "\n"
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(md)
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump({"commit": commit, "calls": args.calls, "per_call": per_call,
                   "lines": {c: {k: v / args.calls for k, v in split[c].items()} for c in cols}}, f, indent=1)
    print(md)


if __name__ == "__main__":
    main()
