#!/usr/bin/env python3
"""make bench: librl against the floor of the module API (bench/floor), the
peer (redis-cell's CL.THROTTLE), INCR and the Lua scripts it replaces, side
by side in one server. See bench/README.md for what it measures and how to
read the table.

Phases:
  1. the pure algorithms, outside Redis (bench/core): ns per decision;
  2. server time per call (INFO commandstats) and throughput
     (redis-benchmark, pipelined, 50 clients, random keys over a large
     keyspace), every command in the same interleaved rounds;
  3. instructions per call of the same command lines under callgrind;
  4. RL.ALL against three calls; a request's whole life (RESERVE, REFUND,
     WAIT) when the module has it; the client packages' rows;
  5. memory per key, and hot keys (long sliding logs).
Writes bench/results/latest.{md,json,png} and refreshes the results quoted
in bench/README.md.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the work tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instructions  # noqa: E402
import peers  # noqa: E402
import phases  # noqa: E402
import subjects  # noqa: E402
from phases import SCRIPTS, load_scripts, log, script_text, timed_run  # noqa: E402
from resp import REDIS_SERVER, Server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
RESULTS = os.path.join(BENCH, "results")
MODULE = os.environ.get("LIBRL_MODULE", os.path.join(ROOT, "target", "release", "librl.so"))
PYDEPS = os.path.join(ROOT, ".deps", "bench-py")

CLIENTS = phases.CLIENTS
PIPELINE = phases.PIPELINE
KEYSPACE = 1_000_000

# Targets, judged from the table, never as timed tests:
# instructions per call against the floor and against CL.THROTTLE.
TARGET_VS_FLOOR = {"fixed": 1.10, "token": 1.10, "sliding": 1.15, "approx": 1.15}
TARGET_TOKEN_VS_CELL = 0.75
# RL.CONCURRENT's acquire and RELEASE against RL.FIXED in the same conditions.
TARGET_CONCURRENT_VS_FIXED = 1.20
# redis-cell's latest release, 0.5.0, is faster than the crates.io release
# this benchmark builds (0.2.2): 14,653 instructions per call for the same
# command line, measured outside this benchmark (0.5.0 is published as
# GitHub release binaries only). RL.TOKEN is also shown against it.
CELL_LATEST = ("0.5.0", 14_653)
# Kept from the first benchmark: librl's time per call against its Lua baseline, and
# the hot-key sliding run against the small-log run.
TARGET_VS_LUA = 0.4
TARGET_HOT = 1.3


class Case:
    """One command line of the main table. `keys` is how many keys a call
    writes (its floor is that many floor calls)."""

    def __init__(self, cid, label, kind, stat, command, keys=1, what=""):
        self.id, self.label, self.kind, self.stat = cid, label, kind, stat
        self.command, self.keys, self.what = command, keys, what


def sha1(text):
    return hashlib.sha1(text.encode()).hexdigest()


def main_cases(have_cell):
    """Every command of the main table, with the limits of a real API limit
    (100 per minute). With random keys over a keyspace of a million, every
    call is admitted, so each run measures the admitted path: read, decide,
    write, expire, replicate, reply. Every key written lives 60 s, as the
    floor's: a shorter life would let keys expire during a run (under
    callgrind especially), leaving smaller tables and cheaper key work than
    the floor's. So the token buckets are 1 per minute (one call leaves the
    bucket a minute from full; `RL.TOKEN key 100 60` would leave it 0.6 s
    from full, its key gone before the run ends), and RL.ALL's clauses are
    one of each algorithm."""
    sha = {name: sha1(script_text(name)) for name in SCRIPTS}
    uuid_like = "0190b6f0-7c1a-7abc-8def-__rand_int__"  # 36 characters
    cases = [
        Case("incr", "INCR", "redis", "incr", ["INCR", "b:incr:__rand_int__"],
             what="Redis's cheapest write: no expiry, no module, one-integer reply"),
        Case("floor_verbatim", "FLOOR.VERBATIM", "floor", "floor.verbatim",
             ["FLOOR.VERBATIM", "b:floorv:__rand_int__", "100", "60"],
             what="the floor with ReplicateVerbatim (not deterministic)"),
        Case("floor", "FLOOR.WRITE (the floor)", "floor", "floor.write",
             ["FLOOR.WRITE", "b:floor:__rand_int__", "100", "60"],
             what="open key, write 29 bytes, absolute expiry, Replicate with NOW, six-integer reply"),
        Case("fixed", "RL.FIXED", "librl", "rl.fixed", ["RL.FIXED", "b:fixed:__rand_int__", "100", "60"]),
        Case("sliding", "RL.SLIDING", "librl", "rl.sliding",
             ["RL.SLIDING", "b:sliding:__rand_int__", "100", "60"]),
        Case("approx", "RL.SLIDING APPROX", "librl", "rl.sliding",
             ["RL.SLIDING", "b:approx:__rand_int__", "100", "60", "APPROX"]),
        Case("token", "RL.TOKEN", "librl", "rl.token",
             ["RL.TOKEN", "b:token:__rand_int__", "1", "60"]),
        Case("concurrent", "RL.CONCURRENT (acquire)", "librl", "rl.concurrent",
             ["RL.CONCURRENT", "b:conc:__rand_int__", "100", "60"],
             what="a lease of 60 s on a key of a limit of 100 in flight"),
        Case("all", "RL.ALL (3 clauses)", "librl", "rl.all",
             ["RL.ALL", "FIXED", "b:all:f:__rand_int__", "100", "60",
              "SLIDING", "b:all:s:__rand_int__", "100", "60",
              "TOKEN", "b:all:t:__rand_int__", "1", "60"], keys=3,
             what="one clause of each algorithm, three keys: its floor is three floor calls"),
    ]
    if have_cell:
        cases.append(Case("cell", "CL.THROTTLE (redis-cell 0.2.2)", "peer", "cl.throttle",
                          ["CL.THROTTLE", "b:cell:__rand_int__", "0", "1", "60"],
                          what="the same bucket as RL.TOKEN: max_burst 0 (capacity 1), 1 per 60 s"))
    cases += [
        Case("lua_fixed", "Lua fixed window", "lua", "evalsha",
             ["EVALSHA", sha["fixed_window"], "1", "b:lfixed:__rand_int__", "100", "60", "1"]),
        Case("lua_sliding", "Lua sorted-set log", "lua", "evalsha",
             ["EVALSHA", sha["sliding_log"], "1", "b:lsliding:__rand_int__", "60000", "100", uuid_like]),
        Case("lua_approx", "Lua two-window counter", "lua", "evalsha",
             ["EVALSHA", sha["sliding_counter"], "1", "b:lapprox:__rand_int__", "60000", "100", "1"]),
        Case("lua_token", "Lua hash token bucket", "lua", "evalsha",
             ["EVALSHA", sha["token_bucket"], "1", "b:ltoken:__rand_int__", "1", "60000", "1", "1"]),
    ]
    return cases


def phase_throughput(modules, cases, rounds, calls):
    """Every case once per round, all in one server; the order rotates each
    round and reverses every other round, so no case always runs next to
    the same neighbours or at the same point of a round."""
    server = Server(modules, "throughput")
    try:
        conn = server.conn()
        load_scripts(conn)
        runs = {c.id: [] for c in cases}
        for r in range(rounds):
            order = cases[r % len(cases):] + cases[: r % len(cases)]
            for c in order if r % 2 == 0 else order[::-1]:
                usec, rps = timed_run(conn, server.port, c.stat, c.command, calls, KEYSPACE)
                runs[c.id].append({"usec_per_call": usec, "rps": rps, "round": r})
                log(f"round {r + 1}/{rounds} {c.label:<32} {usec:6.2f} µs/call {rps:>10,.0f} calls/s")
        conn.close()
        return runs
    finally:
        server.stop()


def lua_ins_calls(calls):
    """Calls per Lua script under callgrind: a script is 5-7 times a librl
    call and judged by no target, so a tenth of the calls does."""
    return max(200, calls // 10)


GAP_CASES = ("floor", "fixed", "sliding", "approx", "token")


def phase_instructions_with_gap(modules, cases, calls):
    """Instructions per call, and for the floor and the single limiters the
    split of a call (instructions.breakdown), per call."""
    keep = tempfile.mkdtemp(prefix="librl-bench-dumps-")
    try:
        per_call = phase_instructions(modules, cases, calls, keep=keep)
        gap = {}
        for cid in GAP_CASES:
            path = os.path.join(keep, f"{cid}.callgrind")
            if os.path.exists(path):
                lines = instructions.breakdown(instructions.Profile(path))
                if lines:
                    gap[cid] = {k: v / calls for k, v in lines.items()}
        return per_call, gap
    finally:
        shutil.rmtree(keep, ignore_errors=True)


def phase_instructions(modules, cases, calls, keep=None):
    return instructions.run(
        modules, [(c.id, c.command, lua_ins_calls(calls) if c.kind == "lua" else calls) for c in cases],
        calls, KEYSPACE, CLIENTS, PIPELINE,
        setup=load_scripts, keep=keep, log=log,
    )


def phase_cores(quick):
    cmd = [
        "cargo", "run", "--release", "--locked", "--quiet",
        "--manifest-path", os.path.join(BENCH, "Cargo.toml"), "-p", "librl-core-bench",
        "--target-dir", os.path.join(ROOT, "target"),
        "--",
    ] + (["--quick"] if quick else [])
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


# ---------------------------------------------------------------- report

def med(runs, field="usec_per_call"):
    return statistics.median(r[field] for r in runs)


def fmt_rounds(runs):
    return " / ".join(f"{r['usec_per_call']:.2f}" for r in runs)


def kb(n):
    return f"{n / 1024:,.1f} KiB" if n >= 10 * 1024 else f"{n:,} B"


def verdict(ok):
    return "met" if ok else "**missed**"


def ratio(a_runs, b_runs, scale=1.0):
    """The median over rounds of a round's a ÷ (scale × b): the runs of one
    round are closer in time than the rounds are, so on a busy machine each
    round's ratio is steadier than the ratio of the medians."""
    return statistics.median(a["usec_per_call"] / (scale * b["usec_per_call"]) for a, b in zip(a_runs, b_runs))


def summarize(data):
    """Per case: µs (median), instructions, and each as a ratio to the floor
    (per key written) and to CL.THROTTLE."""
    cases = data["cases"]
    tp = data["throughput"]
    ins = data["instructions"]
    have_cell = "cell" in tp
    rows = {}
    for c in cases:
        cid, keys = c["id"], c["keys"]
        row = {
            "usec": med(tp[cid]),
            "rps": med(tp[cid], "rps"),
            "ins": ins.get(cid),
            "us_vs_floor": ratio(tp[cid], tp["floor"], keys),
            "ins_vs_floor": ins[cid] / (keys * ins["floor"]) if cid in ins else None,
        }
        if have_cell:
            row["us_vs_cell"] = ratio(tp[cid], tp["cell"])
            row["ins_vs_cell"] = ins[cid] / ins["cell"] if cid in ins and "cell" in ins else None
        rows[cid] = row
    return rows


def targets(rows):
    """[(case id, what, value, limit)] for each target."""
    out = []
    for cid, limit in TARGET_VS_FLOOR.items():
        out.append((cid, "instructions ÷ floor", rows[cid]["ins_vs_floor"], limit))
    if rows["token"].get("ins_vs_cell") is not None:
        out.append(("token", "instructions ÷ CL.THROTTLE", rows["token"]["ins_vs_cell"], TARGET_TOKEN_VS_CELL))
    if rows.get("concurrent", {}).get("ins") and rows["fixed"]["ins"]:
        out.append(("concurrent", "instructions ÷ RL.FIXED", rows["concurrent"]["ins"] / rows["fixed"]["ins"],
                    TARGET_CONCURRENT_VS_FIXED))
    return out


def target_cell(rows, cid):
    marks = []
    for tid, what, value, limit in targets(rows):
        if tid == cid:
            short = "floor" if "floor" in what else "RL.FIXED" if "RL.FIXED" in what else "CL.THROTTLE"
            marks.append(f"≤ {limit:.2f}× {short}: {verdict(value <= limit)}")
    return "; ".join(marks)


def x(v, digits=2):
    return "–" if v is None else f"{v:.{digits}f}×"


def report(data):
    rows = summarize(data)
    cases = data["cases"]
    tp = data["throughput"]
    meta = data["meta"]
    have_cell = "cell" in tp
    out = []
    w = out.append
    w("# librl benchmark: results")
    w("")
    w(f"Reproduce with `make bench` (then `bench/results/latest.md`). This run: {meta['date']}, "
      f"commit {meta['commit']}, module `{os.path.relpath(meta['module'], ROOT)}`, {meta['redis']}, "
      f"{meta['cpu']} ({meta['cores']} cores), "
      f"redis-benchmark -c {CLIENTS} -P {PIPELINE} -n {meta['calls']:,} per timed run, "
      f"{meta['rounds']} interleaved rounds, {meta['ins_calls']:,} calls per command under callgrind "
      f"({lua_ins_calls(meta['ins_calls']):,} per Lua script); "
      f"the whole run took {meta['seconds']:.0f} s. The machine's load average (1 min) was "
      f"{meta.get('load_before', 0):.1f} at the start and {meta.get('load_after', 0):.1f} at the end "
      f"(on {meta['cores']} cores: other work shares them, which moves the timings, not the instructions).")
    w("")
    w("## Against the floor and the peer")
    w("")
    w("Every command in one `redis-server` (librl, the floor module `bench/floor`"
      + (", redis-cell 0.2.2" if have_cell else "") + " and the Lua scripts loaded together), "
      f"random keys over a keyspace of {KEYSPACE:,}, so every call is admitted and creates or updates "
      "its key, which lives 60 s like the floor's (FIXED and SLIDING 100 per minute; the token buckets 1 per "
      "minute, as `RL.TOKEN key 100 60` would leave its key only 0.6 s to live). **Instructions** are callgrind's count inside Redis's `call()` per command (the "
      "stable measure). **µs** is `usec_per_call` of INFO commandstats (the server's own time, no "
      "networking), the median over the rounds; its ratios are the median of each round's ratio. "
      "The floor is `FLOOR.WRITE`: the key work a limiter call must do through the module API and "
      "nothing else (bench/README.md, \"The floor\"). RL.ALL writes three keys, so its floor ratio is "
      "to three floor calls.")
    w("")
    head = "| command | instructions/call | ÷ floor |"
    sep = "|---|---:|---:|"
    if have_cell:
        head += f" ÷ CL.THROTTLE {peers.CELL_VERSION} |"
        sep += "---:|"
    head += " µs/call | ÷ floor |"
    sep += "---:|---:|"
    if have_cell:
        head += f" ÷ CL.THROTTLE {peers.CELL_VERSION} |"
        sep += "---:|"
    head += " calls/s | target |"
    sep += "---:|---|"
    w(head)
    w(sep)
    for c in cases:
        r = rows[c["id"]]
        label = f"**{c['label']}**" if c["kind"] in ("floor", "peer") and c["id"] != "floor_verbatim" else c["label"]
        line = f"| {label} | {r['ins']:,.0f} | {x(r['ins_vs_floor'])} |" if r["ins"] else f"| {label} | – | – |"
        if have_cell:
            line += f" {x(r.get('ins_vs_cell'))} |"
        line += f" {r['usec']:.2f} | {x(r['us_vs_floor'])} |"
        if have_cell:
            line += f" {x(r.get('us_vs_cell'))} |"
        line += f" {r['rps']:,.0f} | {target_cell(rows, c['id'])} |"
        w(line)
    w("")
    if not have_cell:
        w(f"redis-cell could not be built in this run, so there is no CL.THROTTLE column "
          f"({data.get('cell_note', 'see the log')}).")
        w("")
    w("### Targets")
    w("")
    for cid, what, value, limit in targets(rows):
        label = next(c["label"] for c in cases if c["id"] == cid)
        gap = "" if value <= limit else f", by {100 * (value / limit - 1):.0f}%"
        if "CL.THROTTLE" in what:
            what = what.replace("CL.THROTTLE", "CL.THROTTLE (redis-cell 0.2.2)")
        w(f"- {label}: {what} {value:.2f} (≤ {limit:.2f}) {verdict(value <= limit)}{gap}")
    token_ins = rows["token"]["ins"]
    if token_ins:
        version, latest = CELL_LATEST
        value = token_ins / latest
        w(f"- RL.TOKEN against redis-cell {version}, its latest release, faster than 0.2.2 "
          f"({latest:,} instructions per call for the same command line, measured outside this "
          f"benchmark, which builds the crates.io release): {value:.2f} (≤ {TARGET_TOKEN_VS_CELL:.2f}) "
          f"{verdict(value <= TARGET_TOKEN_VS_CELL)}")
    w("")
    report_gap(w, data, rows)
    w("Each round's µs/call, in the order of the table:")
    w("")
    for c in cases:
        w(f"- {c['label']}: {fmt_rounds(tp[c['id']])}")
    w("")
    w("## Against the Lua scripts it replaces")
    w("")
    w("Each librl command against the Lua baseline written in the style of the system it replaces "
      "(bench/README.md, \"The Lua baselines\"); a script's figure is EVALSHA's own line, which includes "
      "every `redis.call` inside it.")
    w("")
    w(f"| algorithm | librl µs | Lua µs | librl ÷ Lua, time (target ≤ {TARGET_VS_LUA}) | librl ÷ Lua, instructions |")
    w("|---|---:|---:|---:|---:|")
    for script, (alg, lua_label) in SCRIPTS.items():
        lua = "lua_" + alg
        label = next(c["label"] for c in cases if c["id"] == alg)
        t = ratio(tp[alg], tp[lua])
        ins = data["instructions"]
        w(f"| {label} vs {lua_label} | {rows[alg]['usec']:.2f} | {rows[lua]['usec']:.2f} | {t:.2f}× "
          f"({verdict(t <= TARGET_VS_LUA)}) | {ins[alg] / ins[lua]:.2f}× |")
    w("")
    if data.get("all"):
        runs = data["all"]
        w("## RL.ALL: three limits in one call")
        w("")
        w(f"Forja's check ({phases.ALL_REQUESTS:,} requests per run, each on its own IP, so all admitted): "
          "`RL.ALL FIXED ip:s 50 1s ALIGNED FIXED ip:m 500 1m ALIGNED TOKEN ip:key 10000 1d` against "
          "the same three limits as three calls (`RL.FIXED`, `RL.FIXED`, `RL.TOKEN`) in one pipeline "
          "from one client. Server time is commandstats' total over the requests; wall time is the "
          "client's, sending and reading everything.")
        w("")
        w("| form | server µs per request | client wall µs per request | rounds (server) |")
        w("|---|---:|---:|---|")
        for case, label in (("all", "RL.ALL, 3 clauses"), ("three", "3 calls, pipelined")):
            w(f"| {label} | {med(runs[case]):.2f} | {med(runs[case], 'wall_us'):.2f} | "
              f"{fmt_rounds(runs[case])} |")
        w("")
        w(f"RL.ALL ÷ three calls: **{ratio(runs['all'], runs['three']):.2f}×** server time, "
          f"**{med(runs['all'], 'wall_us') / med(runs['three'], 'wall_us'):.2f}×** wall time "
          "(and all-or-nothing, which three calls are not).")
        w("")
    report_life(w, data.get("life"))
    report_concurrency(w, data.get("concurrency"))
    report_clients(w, data.get("clients"))
    report_http(w)
    report_memory_hot(w, data["memory_hot"])
    report_long_logs(w, data.get("long_logs"))
    w("## The pure algorithms (ns per decision)")
    w("")
    w("`bench/core`: each algorithm's `decide` from the `librl-core` crate outside Redis, median of 7 runs "
      "of 500,000 calls, `now` advancing 1 ms per call, every admitted call's new state kept (in memory, "
      "not the module's byte layout). What a call costs in the server, layout included, is the table above.")
    w("")
    w(data["cores"])
    w("")
    w("![librl against the floor and the peer](latest.png)")
    return "\n".join(out) + "\n"


def report_gap(w, data, rows):
    """Where each limiter's instructions above the floor go: the lines of
    instructions.breakdown that differ from the floor's by 40 or more."""
    gap = data.get("gap") or {}
    if "floor" not in gap:
        return
    cols = [cid for cid in GAP_CASES[1:] if cid in gap]
    labels = {c["id"]: c["label"] for c in data["cases"]}
    floor = gap["floor"]
    names = [n for n in set().union(*(gap[c] for c in cols + ["floor"]))
             if any(abs(gap[c].get(n, 0) - floor.get(n, 0)) >= 40 for c in cols)]
    names.sort(key=lambda n: -max(gap[c].get(n, 0) - floor.get(n, 0) for c in cols))
    w("### Where the instructions above the floor go")
    w("")
    w("Each limiter's call split as `make bench-profile` splits it (bench/results/profile.md has every line "
      "and the call trees): per call, the difference to the floor's line, for the lines that differ by 40 "
      f"or more. {instructions.LINES_EXPLAINED}")
    w("")
    w("| line | floor | " + " | ".join(labels[c] for c in cols) + " |")
    w("|---|---:|" + "---:|" * len(cols))
    for n in names:
        label = f"*{n}*" if n == instructions.OWN else (n if " " in n else f"API: `{n}`")
        w(f"| {label} | {floor.get(n, 0):,.0f} | "
          + " | ".join(f"{gap[c].get(n, 0) - floor.get(n, 0):+,.0f}" for c in cols) + " |")
    rest = {c: (rows[c]["ins"] - rows["floor"]["ins"]) - sum(gap[c].get(n, 0) - floor.get(n, 0) for n in names)
            for c in cols}
    w("| the other lines | | " + " | ".join(f"{rest[c]:+,.0f}" for c in cols) + " |")
    w("| **above the floor** | | " + " | ".join(f"**{rows[c]['ins'] - rows['floor']['ins']:+,.0f}**"
                                               for c in cols) + " |")
    w("")


def report_life(w, life):
    w("## A request's whole life: RESERVE, REFUND, WAIT")
    w("")
    if life is None:
        w("Not measured: this module build has no RESERVE yet (`RL.TOKEN k 10 1 RESERVE 1s` answers an "
          "error). The rows appear by themselves once it does.")
        w("")
        return
    if "error" in life:
        w(f"The module takes RESERVE, but the runs failed: {life['error']}")
        w("")
        return
    runs = life["runs"]
    w(f"The same {phases.LIFE_KEYS:,} existing buckets in each run (same server, interleaved rounds), every "
      "call writing and replicating: plain admitted calls, reservations into the bucket's future, and "
      "refunds.")
    w("")
    ins = life.get("instructions") or {}
    w("| call | instructions/call | ÷ plain | µs/call | ÷ plain (µs) | calls/s | command |")
    w("|---|---:|---:|---:|---:|---:|---|")
    for cid in ("plain", "reserve", "refund"):
        i = f"{ins[cid]:,.0f} | {ins[cid] / ins['plain']:.2f}×" if cid in ins and "plain" in ins else "– | –"
        w(f"| {life['labels'][cid]} | {i} | {med(runs[cid]):.2f} | {ratio(runs[cid], runs['plain']):.2f}× | "
          f"{med(runs[cid], 'rps'):,.0f} | `{life['commands'][cid]}` |")
    w("")
    peeks = {cid: runs[cid][-1].get("peek") for cid in ("reserve", "refund")}
    if all(isinstance(p, list) and len(p) == 6 for p in peeks.values()):
        w(f"Checked after the last round with a PEEK at one bucket of each run: after the reservations its "
          f"count is {peeks['reserve'][1]:,} of a capacity of {peeks['reserve'][3]:,} (in debt) and the "
          f"bucket is full again in {peeks['reserve'][5] / 3_600_000:,.1f} h; after the refunds, "
          f"{peeks['refund'][3] - peeks['refund'][1]:,} tokens are back.")
        w("")
    wait = life["wait"]
    if "error" in wait:
        w(f"WAIT lateness: not measured ({wait['error']}).")
    else:
        w(f"**WAIT lateness** with {phases.WAITERS} clients waiting at once (each on its own bucket, due "
          f"50 to 197 ms after its token was taken; {wait['samples']} replies): the reply arrives "
          f"**p50 {wait['p50_ms']:.2f} ms, p99 {wait['p99_ms']:.2f} ms** after the reserved millisecond "
          f"(max {wait['max_ms']:.2f} ms; earliest {wait['min_ms']:+.2f} ms, {wait['early']} early). "
          "Measured at the client, so it includes the loopback and the client's wake-up.")
    w("")


def report_concurrency(w, conc):
    w("## RL.CONCURRENT: acquire and RELEASE on keys holding leases; WAIT's wake-up")
    w("")
    if conc is None:
        w("Not measured: this module build has no RL.CONCURRENT.")
        w("")
        return
    runs, ins = conc["runs"], conc["instructions"]
    w(f"Each run on {conc['keys']:,} keys that exist (same server, interleaved rounds; under callgrind "
      f"{conc['ins_calls']:,} calls on {conc['ins_keys']:,} keys): RL.FIXED on keys holding a window, "
      "RL.CONCURRENT taking a third lease on keys holding two, and RELEASE of one of those two (the value "
      "rebuilt with the other), every call writing and replicating. The main table's RL.CONCURRENT row is "
      "the acquire on new keys, against its RL.FIXED row.")
    w("")
    w("| call | instructions/call | ÷ RL.FIXED | µs/call | ÷ RL.FIXED (µs) | calls/s | target | command |")
    w("|---|---:|---:|---:|---:|---:|---|---|")
    base = ins.get("fixed_held")
    for cid in ("fixed_held", "acquire_held", "release"):
        i = ins.get(cid)
        vs = i / base if i and base else None
        target = ("" if cid == "fixed_held" or vs is None
                  else f"≤ {TARGET_CONCURRENT_VS_FIXED:.2f}× RL.FIXED: {verdict(vs <= TARGET_CONCURRENT_VS_FIXED)}")
        w(f"| {conc['labels'][cid]} | {i:,.0f} | {x(vs)} | {med(runs[cid]):.2f} | "
          f"{ratio(runs[cid], runs['fixed_held']):.2f}× | {med(runs[cid], 'rps'):,.0f} | {target} | "
          f"`{conc['commands'][cid]}` |")
    w("")
    refused = [r["refused"] for r in runs["release"]]
    w(f"In the RELEASE runs, {min(refused):,} to {max(refused):,} of each run's {conc['calls']:,} calls met a key "
      "whose lease the run had released already (random keys) and were refused, writing nothing.")
    w("")
    wake = conc["wake"]
    w(f"**WAIT wake-up after a RELEASE**: {wake['waiters']} callers queued on one key of one slot, "
      f"released {wake['waiters']} times per round ({wake['samples']} releases): from sending the RELEASE to "
      f"the next waiter's reply, **p50 {wake['p50_ms']:.2f} ms, p99 {wake['p99_ms']:.2f} ms** "
      f"(max {wake['max_ms']:.2f} ms; the RELEASE's own round trip, p50 {wake['release_p50_ms']:.2f} ms, "
      "included). Measured at the client, over loopback.")
    w("")


def report_long_logs(w, long_logs):
    w("## The exact log: REFUND and denials on long logs")
    w("")
    if not long_logs:
        return
    runs, ins = long_logs["runs"], long_logs["instructions"]
    w(f"`RL.SLIDING` on {phases.LONG_KEYS} keys whose logs hold N calls at distinct milliseconds "
      f"({phases.LONG_COST} units each, window 1 day), put back by RESTORE before each run (same server, "
      "interleaved rounds; the worst-case denials run a tenth of the calls). A REFUND walks back from the "
      "newest entry over the entries it takes units from and changes them in place; a denial reads the "
      "entries from the end nearer to the one that decides its wait: at the limit the oldest, after a "
      "limit lowered to 100 units the newest, after a limit lowered to half the log's units the middle "
      "(the worst case: half the log is read). docs/performance.md, The exact log's costs.")
    w("")
    w("| log | call | instructions/call | ÷ admitted | µs/call | ÷ admitted (µs) | command |")
    w("|---|---|---:|---:|---:|---:|---|")
    for n in phases.LONG_LOGS:
        base = f"{n}-admit"
        for cid in (f"{n}-admit", f"{n}-refund", f"{n}-deny", f"{n}-low", f"{n}-half"):
            i = (f"{ins[cid]:,.0f} | {ins[cid] / ins[base]:.2f}×"
                 if cid in ins and base in ins else "– | –")
            w(f"| {n:,} entries | {long_logs['labels'][cid]} | {i} | {med(runs[cid]):.2f} | "
              f"{ratio(runs[cid], runs[base]):.2f}× | `{long_logs['commands'][cid]}` |")
    w("")


def report_clients(w, clients):
    w("## From the client packages")
    w("")
    w("Each package's own benchmark (`bench/clients/`), client-side µs per call of a librl call against "
      "the same client's INCR, on a standalone server and on a cluster.")
    w("")
    if not clients:
        w("No client benchmark ran.")
        w("")
        return
    w("| client | standalone RL µs | INCR µs | RL ÷ INCR | cluster RL µs | INCR µs | RL ÷ INCR |")
    w("|---|---:|---:|---:|---:|---:|---:|")
    notes = []
    for row in clients:
        if row.get("status") != "ok":
            notes.append(f"- {row['package']}: {row.get('script', '')} {row['status']}")
            continue
        cells = []
        for mode in ("standalone", "cluster"):
            m = row.get(mode) or {}
            rl, incr = m.get("rl_us"), m.get("incr_us")
            if isinstance(rl, (int, float)) and isinstance(incr, (int, float)) and incr:
                cells += [f"{rl:.1f}", f"{incr:.1f}", f"{rl / incr:.2f}×"]
            else:
                cells += ["–", "–", "–"]
        w(f"| {row['client']} ({row['package']}) | " + " | ".join(cells) + " |")
    w("")
    for n in notes:
        w(n)
    if notes:
        w("")


def report_http(w):
    """A pointer to `make bench-http`'s own report (it runs apart: it needs
    every framework's apps and takes longer), with its last summary."""
    w("## The HTTP integrations")
    w("")
    w("`make bench-http` measures each framework's integration over HTTP against no limiter, the floor "
      "(the same `RL.ALL` from a bare handler) and the peer its users would pick: "
      "[http.md](http.md) (bench/README.md, \"make bench-http\").")
    w("")
    try:
        with open(os.path.join(RESULTS, "http.json")) as f:
            http = json.load(f)
    except (OSError, ValueError):
        w("No `make bench-http` results yet.")
        w("")
        return
    meta = http["meta"]
    w(f"Its last run ({meta['date']}, commit {meta['commit']}, load average {meta['load_min']:.0f}–"
      f"{meta['load_max']:.0f} on {meta['cores']} cores):")
    w("")
    w("| framework | librl ÷ peer req/s, never refuses / refuses half | middleware CPU µs/request (librl − floor) "
      "| p99 librl ÷ peer |")
    w("|---|---:|---:|---:|")
    for name in meta["frameworks"]:
        o, h = http["summary"][f"{name}/open"], http["summary"][f"{name}/half"]
        w(f"| {name} | {o['ratio_rps']:.2f}× / {h['ratio_rps']:.2f}× | {o['middleware_us']:.0f} / "
          f"{h['middleware_us']:.0f} | {o['ratio_p99']:.2f}× / {h['ratio_p99']:.2f}× |")
    w("")


def report_memory_hot(w, mh):
    w("## Memory per key")
    w("")
    w("`MEMORY USAGE key SAMPLES 0` after N admitted calls, one per millisecond (window 1 day, limit never "
      "reached). librl's keys are built by replaying an AOF of the calls with the primary's `NOW`; the Lua "
      "layouts by running the scripts with the same times, except the million-entry sorted set, built by "
      "ZADD in batches of what a million script calls leave (a million time-scored UUIDs). The Lua "
      "two-window counter is the sum over its window keys.")
    w("")
    sizes = sorted({int(n) for alg in mh["librl"].values() for n in alg})
    head = " | ".join(f"after {n:,}" for n in sizes)
    w(f"| algorithm | layout | {head} |")
    w("|---|---|" + "---:|" * len(sizes))
    layouts = {
        "fixed": ("RL.FIXED", "string, a few bytes of varints", "integer string (GET/INCRBY)"),
        "sliding": ("RL.SLIDING", "string, compact byte log", "sorted set, UUID members"),
        "approx": ("RL.SLIDING APPROX", "string, a few bytes of varints", "a counter string per window"),
        "token": ("RL.TOKEN", "string, a few bytes of varints", "hash {tokens, ts}"),
    }
    for alg, (label, ours, lua) in layouts.items():
        for who, name, layout in (("librl", label, ours), ("lua", "Lua", lua)):
            vals = {int(k): v for k, v in mh[who].get(alg, {}).items()}
            cells = " | ".join(kb(vals[n]) if n in vals else "–" for n in sizes)
            w(f"| {name} | {layout} | {cells} |")
    sliding = {int(k): v for k, v in mh["librl"]["sliding"].items()}
    s10k = sliding[10_000]
    w("")
    w(f"Memory check: RL.SLIDING after 10,000 calls at distinct ms is {s10k:,} bytes (at most 81,000: "
      f"{verdict(s10k <= 81_000)}), {s10k / 10_000:.1f} bytes per logged call"
      + (f"; after 1,000,000: {sliding[1_000_000] / 1_000_000:.2f} bytes per call"
         if 1_000_000 in sliding else "") + ".")
    w("")
    w("## Hot keys: long sliding logs")
    w("")
    hot = mh["hot"]
    w(f"`RL.SLIDING key {phases.BIG_LIMIT} 1d` (every call admitted and logged) on {phases.HOT_KEYS} keys "
      f"whose logs hold {phases.HOT_ENTRIES:,} entries, against {phases.SMALL_KEYS:,} keys whose logs hold "
      f"{phases.SMALL_ENTRIES}; same server, interleaved rounds. The hot logs held "
      f"{mh['hot_entries_after']:,} entries at the end.")
    w("")
    w("| run | keys | entries per key at start | µs/call (median) | rounds | calls/s |")
    w("|---|---:|---:|---:|---|---:|")
    w(f"| hot | {phases.HOT_KEYS} | {phases.HOT_ENTRIES:,} | {med(hot['hot']):.2f} | {fmt_rounds(hot['hot'])} "
      f"| {med(hot['hot'], 'rps'):,.0f} |")
    w(f"| small | {phases.SMALL_KEYS:,} | {phases.SMALL_ENTRIES} | {med(hot['small']):.2f} | "
      f"{fmt_rounds(hot['small'])} | {med(hot['small'], 'rps'):,.0f} |")
    w("")
    hot_ratio = ratio(hot["hot"], hot["small"])
    w(f"Hot ÷ small: **{hot_ratio:.2f}×** (target ≤ {TARGET_HOT}×: {verdict(hot_ratio <= TARGET_HOT)}).")
    w("")


# ---------------------------------------------------------------- chart

def chart(data, path):
    sys.path.insert(0, PYDEPS)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is missing (scripts/install-bench-deps.sh installs it): no chart")
        return False
    rows = summarize(data)
    cases = [c for c in data["cases"] if c["kind"] != "redis"]
    have_cell = "cell" in data["throughput"]
    limits = {cid: limit for cid, what, _, limit in targets(rows) if "floor" in what}
    colors = {"floor": "#4a5a6a", "peer": "#b07aa1", "lua": "#c4c9cf"}

    def color(c, value, judged):
        if c["kind"] != "librl":
            return colors[c["kind"]]
        limit = limits.get(c["id"])
        if limit is None or not judged:
            return "#6a9fd4"
        return "#3a923a" if value <= limit else "#c8463d"

    labels = [c["label"].replace(" (redis-cell 0.2.2)", "\n(redis-cell)") for c in cases]
    fig, axes = plt.subplots(1, 2, figsize=(15, 0.5 * len(cases) + 2.2), sharey=True)
    ys = list(range(len(cases)))[::-1]
    for ax, field, title in (
        (axes[0], "ins_vs_floor", "instructions per call ÷ floor (callgrind)"),
        (axes[1], "us_vs_floor", "server µs per call ÷ floor (commandstats, median)"),
    ):
        judged = field == "ins_vs_floor"
        vals = [rows[c["id"]][field] or 0 for c in cases]
        # The Lua scripts are far off to the right: their bars are cut at
        # the axis (value written inside), so the region near 1x stays legible.
        top = max(v for c, v in zip(cases, vals) if c["kind"] != "lua") * 2.0
        shown = [min(v, top) for v in vals]
        ax.barh(ys, shown, 0.65, color=[color(c, v, judged) for c, v in zip(cases, vals)])
        for y, c, v in zip(ys, cases, vals):
            extra = ""
            cell_field = field.replace("floor", "cell")
            if have_cell and c["id"] != "cell" and rows[c["id"]].get(cell_field):
                extra = f"  ({rows[c['id']][cell_field]:.2f}× CL.THROTTLE {peers.CELL_VERSION}"
                if judged and c["id"] == "token":
                    ok = rows[c["id"]][cell_field] <= TARGET_TOKEN_VS_CELL
                    extra += f"; target ≤ {TARGET_TOKEN_VS_CELL:.2f}×: {'met' if ok else 'missed'}"
                extra += ")"
            if v > top:
                ax.text(top * 0.99, y, f"{v:.2f}×{extra} →", va="center", ha="right", fontsize=9)
            else:
                ax.text(v + top * 0.01, y, f"{v:.2f}×{extra}", va="center", fontsize=9)
            if field == "ins_vs_floor" and c["id"] in limits:
                ax.plot([limits[c["id"]]] * 2, [y - 0.42, y + 0.42], color="black", linewidth=2)
        ax.axvline(1, color="#4a5a6a", linewidth=0.8, linestyle="dotted")
        ax.set_xlim(0, top)
        ax.set_title(title)
        ax.set_yticks(ys, labels)
    axes[0].set_xlabel("black tick: the target (bar green: met, red: missed); RL.ALL: ÷ three floor calls",
                       fontsize=9)
    axes[1].set_xlabel("timed on a shared 2-core machine: noisier than instructions, not judged", fontsize=9)
    fig.suptitle(f"librl make bench, {data['meta']['date']} ({data['meta']['commit']}): "
                 f"1.00× = FLOOR.WRITE, the module API's floor for this key work")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ---------------------------------------------------------------- driver

README_START = "<!-- bench:latest:start -->"
README_END = "<!-- bench:latest:end -->"


def refresh_readme(md):
    """Quotes the latest results in bench/README.md between its markers."""
    path = os.path.join(BENCH, "README.md")
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return
    if README_START not in text or README_END not in text:
        return
    body = md.split("\n", 2)[2]  # without the title
    body = body.replace("](latest.png)", "](results/latest.png)").replace("](http.md)", "](results/http.md)")
    body = "\n".join("#" + line if line.startswith("#") else line for line in body.split("\n"))
    before = text.split(README_START)[0]
    after = text.split(README_END)[1]
    with open(path, "w") as f:
        f.write(f"{before}{README_START}\n{body}{README_END}{after}")


def git(*args):
    try:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def build_modules():
    """librl (built by `make bench`), the floor and redis-cell: the paths to
    load, and whether CL.THROTTLE is in."""
    if not os.path.exists(MODULE):
        sys.exit(f"{MODULE} is missing: `make bench` builds it first")
    modules = [MODULE, peers.build_floor()]
    cell = peers.build_cell(log)
    if cell:
        modules.append(cell)
    return modules, cell is not None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=30_000, help="calls per timed redis-benchmark run")
    ap.add_argument("--ins-calls", type=int, default=5_000, help="calls per case under callgrind")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: few calls, no 1,000,000-entry logs; results not written to bench/results")
    ap.add_argument("--skip-clients", action="store_true", help="leave out the client packages' rows")
    ap.add_argument("--out", default=RESULTS, help="directory for latest.{md,json,png}")
    args = ap.parse_args()
    if args.quick:
        args.calls = min(args.calls, 10_000)
        args.ins_calls = min(args.ins_calls, 1_000)
        args.rounds = min(args.rounds, 3)
    started = time.monotonic()
    modules, have_cell = build_modules()
    cases = main_cases(have_cell)
    # "+changes" when what is measured differs from the commit: the module's
    # sources or the floor's (not, say, the previous run's results).
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "src", "core", "Cargo.toml", "Cargo.lock",
                "bench/floor")
    data = {
        "meta": {
            "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "commit": git("rev-parse", "--short", "HEAD") + ("+changes" if dirty and dirty != "?" else ""),
            "redis": subprocess.run([REDIS_SERVER, "--version"], capture_output=True, text=True).stdout.split(" sha=")[0],
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "calls": args.calls,
            "ins_calls": args.ins_calls,
            "rounds": args.rounds,
            "module": MODULE,
            "load_before": os.getloadavg()[0],
        },
        "cases": [{"id": c.id, "label": c.label, "kind": c.kind, "keys": c.keys, "what": c.what,
                   "command": " ".join(c.command)} for c in cases],
    }
    log("phase 1/5: the pure algorithms (bench/core)")
    data["cores"] = phase_cores(args.quick)
    print(data["cores"], flush=True)
    log(f"phase 2/5: server time per call, {args.rounds} interleaved rounds of {args.calls:,} calls, "
        f"{len(cases)} commands")
    data["throughput"] = phase_throughput(modules, cases, args.rounds, args.calls)
    log(f"phase 3/5: instructions per call under callgrind, {args.ins_calls:,} calls per command")
    data["instructions"], data["gap"] = phase_instructions_with_gap(modules, cases, args.ins_calls)
    log("phase 4/5: RL.ALL against three calls; RESERVE, REFUND, WAIT; RL.CONCURRENT; client packages")
    data["all"] = phases.phase_all(MODULE, args.rounds, phases.ALL_REQUESTS if not args.quick else 2_000)
    data["life"] = phases.phase_life(MODULE, args.rounds, args.calls)
    if data["life"] is None:
        log("RESERVE: not in this module build (RL.TOKEN ... RESERVE answers an error): rows skipped")
    data["concurrency"] = phases.phase_concurrency(MODULE, args.rounds, args.calls, args.quick)
    data["clients"] = [] if args.skip_clients else phases.phase_clients(MODULE, REDIS_SERVER)
    log("phase 5/5: memory per key and hot keys; REFUND and denials on long exact logs")
    data["memory_hot"] = phases.phase_memory_and_hot(MODULE, args.rounds, args.calls, full=not args.quick)
    data["long_logs"] = phases.phase_long_logs(MODULE, args.rounds, args.calls, args.ins_calls)
    log("bytes per subject on the four servers (bench/subjects.py)")
    data["subjects"] = subjects.phase(20_000 if args.quick else subjects.SUBJECTS)
    data["meta"]["seconds"] = time.monotonic() - started
    data["meta"]["load_after"] = os.getloadavg()[0]
    md = report(data) + subjects.report(data["subjects"])
    print()
    print(md)
    out = args.out if not args.quick or args.out != RESULTS else os.path.join(ROOT, "target", "bench-quick")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "latest.md"), "w") as f:
        f.write(md)
    with open(os.path.join(out, "latest.json"), "w") as f:
        json.dump(data, f, indent=1, default=str)
    chart(data, os.path.join(out, "latest.png"))
    if out == RESULTS:
        refresh_readme(md)
    log(f"wrote {out}/latest.md, latest.json, latest.png in {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
