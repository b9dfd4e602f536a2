#!/usr/bin/env python3
"""make bench: librl against INCR and against the Lua scripts it replaces,
side by side in one run. See bench/README.md for what it measures and how to
read the table.

Phases:
  1. the pure cores, outside Redis (bench/core): ns per decision;
  2. server time per call (INFO commandstats) and throughput (redis-benchmark,
     pipelined, 50 clients, random keys over a large keyspace): INCR, each
     librl limiter and its Lua baseline, in interleaved rounds;
  3. memory per key after 100 / 10,000 (/ 1,000,000) admitted calls at
     distinct milliseconds, librl (built by AOF replay with the primary's
     NOW) next to the Lua layouts (built by the scripts themselves, but for
     the million-entry sorted set);
  4. hot keys: sliding logs of 100,000 entries against logs of 10.
Writes bench/results/latest.{md,json,png} and refreshes the table quoted in
bench/README.md.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid

sys.dont_write_bytecode = True  # no __pycache__ in the work tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resp import REDIS_SERVER, Server, commandstats, redis_benchmark  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
RESULTS = os.path.join(BENCH, "results")
MODULE = os.environ.get("LIBRL_MODULE", os.path.join(ROOT, "target", "release", "librl.so"))
PYDEPS = os.path.join(ROOT, ".deps", "bench-py")

CLIENTS = 50
PIPELINE = 16
KEYSPACE = 1_000_000
DAY_MS = 86_400_000

# Targets, judged from the table (never as timed tests).
TARGET_VS_INCR = {"fixed": 1.5, "sliding": 2.0, "approx": 2.0, "token": 1.5}
TARGET_VS_LUA = 0.4
TARGET_HOT = 1.3

ALGORITHMS = [
    # key, librl command label, Lua baseline label, script file
    ("fixed", "RL.FIXED", "Lua fixed window (seed 003: GET/SET+EXPIRE/INCRBY, TTL)", "fixed_window"),
    ("sliding", "RL.SLIDING", "Lua sorted-set log (seed 000: UUID members, TIME)", "sliding_log"),
    ("approx", "RL.SLIDING APPROX", "Lua two-window counter (seed 001: MGET, INCRBY+PEXPIRE)", "sliding_counter"),
    ("token", "RL.TOKEN", "Lua hash token bucket (seed 002: HMGET/HSET+PEXPIRE, TIME)", "token_bucket"),
]


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_scripts(conn):
    shas = {}
    for _, _, _, script in ALGORITHMS:
        with open(os.path.join(BENCH, "lua", script + ".lua")) as f:
            shas[script] = conn.call("SCRIPT", "LOAD", f.read()).decode()
    return shas


def throughput_cases(shas):
    """(id, label, commandstats name, redis-benchmark command). Limits are
    those of a real API limit (100 per minute); with random keys over a
    keyspace of a million, every call is admitted, so each run measures
    the admitted path: read, decide, write, expire, reply."""
    uuid_like = "0190b6f0-7c1a-7abc-8def-__rand_int__"  # 36 characters
    return [
        ("incr", "INCR", "incr", ["INCR", "b:incr:__rand_int__"]),
        ("fixed", "RL.FIXED", "rl.fixed", ["RL.FIXED", "b:fixed:__rand_int__", "100", "60"]),
        ("lua_fixed", "Lua fixed", "evalsha",
         ["EVALSHA", shas["fixed_window"], "1", "b:lfixed:__rand_int__", "100", "60", "1"]),
        ("sliding", "RL.SLIDING", "rl.sliding", ["RL.SLIDING", "b:sliding:__rand_int__", "100", "60"]),
        ("lua_sliding", "Lua sliding", "evalsha",
         ["EVALSHA", shas["sliding_log"], "1", "b:lsliding:__rand_int__", "60000", "100", uuid_like]),
        ("approx", "RL.SLIDING APPROX", "rl.sliding",
         ["RL.SLIDING", "b:approx:__rand_int__", "100", "60", "APPROX"]),
        ("lua_approx", "Lua approx", "evalsha",
         ["EVALSHA", shas["sliding_counter"], "1", "b:lapprox:__rand_int__", "60000", "100", "1"]),
        ("token", "RL.TOKEN", "rl.token", ["RL.TOKEN", "b:token:__rand_int__", "100", "60"]),
        ("lua_token", "Lua token", "evalsha",
         ["EVALSHA", shas["token_bucket"], "1", "b:ltoken:__rand_int__", "100", "60000", "100", "1"]),
    ]


def timed_run(server, conn, stat_name, command, calls, keyspace, flush=True):
    """One redis-benchmark run from a reset: (server µs per call, calls/s)."""
    if flush:
        conn.call("FLUSHALL", "SYNC")
    conn.call("CONFIG", "RESETSTAT")
    rps = redis_benchmark(server.port, command, calls, keyspace, CLIENTS, PIPELINE)
    stats = commandstats(conn).get(stat_name)
    if not stats or int(stats["calls"]) != calls:
        raise RuntimeError(f"{command[0]}: expected {calls} calls in commandstats, got {stats}")
    if stats.get("failed_calls", 0) or stats.get("rejected_calls", 0):
        raise RuntimeError(f"{command[0]}: calls failed: {stats}")
    return stats["usec_per_call"], rps


def phase_throughput(rounds, calls):
    """Each round runs, for each algorithm, INCR, librl and the Lua baseline
    back to back (a ratio compares runs seconds apart, not minutes); the
    algorithms' order rotates and the order within a trio reverses every
    other round."""
    server = Server(MODULE, "throughput")
    try:
        conn = server.conn()
        cases = {c[0]: c for c in throughput_cases(load_scripts(conn))}
        runs = {cid: [] for cid in cases}
        algs = [a[0] for a in ALGORITHMS]
        for r in range(rounds):
            for alg in algs[r % len(algs):] + algs[: r % len(algs)]:
                trio = [("incr", "incr@" + alg), (alg, alg), ("lua_" + alg, "lua_" + alg)]
                for cid, key in trio if r % 2 == 0 else trio[::-1]:
                    _, label, stat, command = cases[cid]
                    usec, rps = timed_run(server, conn, stat, command, calls, KEYSPACE)
                    run = {"usec_per_call": usec, "rps": rps}
                    runs[cid].append(run)
                    if key != cid:
                        runs.setdefault(key, []).append(run)
                    log(f"round {r + 1}/{rounds} {label:<18} {usec:6.2f} µs/call {rps:>10,.0f} calls/s")
        conn.close()
        return {"cases": {c[0]: {"label": c[1], "command": " ".join(c[3])} for c in cases.values()}, "runs": runs}
    finally:
        server.stop()


# ---------------------------------------------------------------- RL.ALL

ALL_REQUESTS = 20_000


def all_request(k, together):
    """Seed 004's check for request k: per-second and per-minute IP limits
    and a per-day API-key quota, as one RL.ALL or as three calls."""
    s = (f"b:{{ip:{k}}}:s", "50", "1s", "ALIGNED")
    m = (f"b:{{ip:{k}}}:m", "500", "1m", "ALIGNED")
    d = (f"b:{{ip:{k}}}:key", "10000", "1d")
    if together:
        return [["RL.ALL", "FIXED", *s, "FIXED", *m, "TOKEN", *d]]
    return [["RL.FIXED", *s], ["RL.FIXED", *m], ["RL.TOKEN", *d]]


def phase_all(rounds, requests):
    """RL.ALL with three clauses against the same three limits as three
    separate calls in a pipeline, from one client: server time per request
    (commandstats) and the client's wall time per request, interleaved."""
    server = Server(MODULE, "all")
    try:
        conn = server.conn()
        runs = {"all": [], "three": []}
        for r in range(rounds):
            for case in ("all", "three") if r % 2 == 0 else ("three", "all"):
                together = case == "all"
                commands = [c for k in range(requests) for c in all_request(k, together)]
                conn.call("FLUSHALL", "SYNC")
                conn.call("CONFIG", "RESETSTAT")
                started = time.monotonic()
                conn.pipeline(commands)
                wall = time.monotonic() - started
                stats = commandstats(conn)
                names = ["rl.all"] if together else ["rl.fixed", "rl.token"]
                usec = sum(stats[n]["usec"] for n in names if n in stats) / requests
                runs[case].append({"usec_per_call": usec, "wall_us": wall * 1e6 / requests})
                log(f"round {r + 1}/{rounds} {case:<6} {usec:6.2f} µs server, "
                    f"{wall * 1e6 / requests:6.2f} µs wall per request")
        conn.close()
        return runs
    finally:
        server.stop()


# ---------------------------------------------------------------- phase 3/4

HOT_KEYS = 4
HOT_ENTRIES = 100_000
SMALL_KEYS = 10_000
SMALL_ENTRIES = 10
BIG_LIMIT = "1000000000"


def bench_key(prefix, i):
    """The key redis-benchmark makes of `prefix__rand_int__` for value i."""
    return f"{prefix}{i:012d}"


def mem_key(alg, who, n):
    """Memory figures' keys: librl's (rl) and Lua's (lu) names have the same
    length for every N, so MEMORY USAGE differs only by the values."""
    return f"mem:{alg}:{who}:{n:07d}"


def aof_commands(args_before_now, times):
    """RESP for `args... NOW t` for each t: what a primary's AOF holds."""
    head = b"*%d\r\n" % (len(args_before_now) + 2) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a), a) for a in (x.encode() for x in args_before_now)
    ) + b"$3\r\nNOW\r\n"
    return b"".join(head + b"$%d\r\n%d\r\n" % (len(str(t)), t) for t in times)


def memory_sizes(full):
    return (100, 10_000, 1_000_000) if full else (100, 10_000)


def write_aof(path, base_ms, full):
    """Every librl key of phases 3 and 4, each as the admitted calls that built
    it, at consecutive milliseconds ending just before `base_ms`."""
    with open(path, "wb") as f:
        for n in memory_sizes(full):
            times = range(base_ms - n - 1, base_ms - 1)
            f.write(aof_commands(["RL.SLIDING", mem_key("sliding", "rl", n), "100000000", "1d", "COST", "1"], times))
            if n > 10_000:
                continue  # constant-size layouts: 100 and 10,000 say it all
            f.write(aof_commands(["RL.FIXED", mem_key("fixed", "rl", n), "100000000", "1d", "COST", "1"], times))
            f.write(aof_commands(["RL.SLIDING", mem_key("approx", "rl", n), "100000000", "1d", "APPROX", "COST", "1"], times))
            f.write(aof_commands(["RL.TOKEN", mem_key("token", "rl", n), "100000000", "1d", "COST", "1"], times))
        hot_times = range(base_ms - HOT_ENTRIES - 1, base_ms - 1)
        for i in range(HOT_KEYS):
            f.write(aof_commands(["RL.SLIDING", bench_key("hot:", i), BIG_LIMIT, "1d", "COST", "1"], hot_times))
        small_times = range(base_ms - SMALL_ENTRIES - 1, base_ms - 1)
        for i in range(SMALL_KEYS):
            f.write(aof_commands(["RL.SLIDING", bench_key("small:", i), BIG_LIMIT, "1d", "COST", "1"], small_times))


def peek_count(conn, *args):
    return conn.call(*args, "PEEK")[1]


def usage(conn, key):
    return conn.call("MEMORY", "USAGE", key, "SAMPLES", "0")


def lua_fill(conn, shas, full):
    """Builds the Lua layouts by running the scripts themselves, with calls
    at distinct milliseconds (the scripts' optional time argument)."""
    sizes = {}
    base = int(time.time() * 1000)
    for n in memory_sizes(full):
        times = range(base - n - 1, base - 1)
        key = mem_key("sliding", "lu", n)
        if n <= 10_000:
            conn.pipeline(
                ["EVALSHA", shas["sliding_log"], "1", key, str(DAY_MS), BIG_LIMIT, str(uuid.uuid4()), str(t)]
                for t in times
            )
        else:
            # A million script calls take minutes here; what they leave is a
            # sorted set of a million (time, UUID) pairs, built faster by
            # ZADD in batches (the same encoding: a skiplist with its dict).
            times = list(times)
            conn.pipeline(
                ["ZADD", key] + [x for t in times[i:i + 1000] for x in (str(t), str(uuid.uuid4()))]
                for i in range(0, n, 1000)
            )
            conn.call("PEXPIRE", key, DAY_MS)
        assert conn.call("ZCARD", key) == n
        sizes.setdefault("sliding", {})[n] = usage(conn, key)
        if n > 10_000:
            continue
        key = mem_key("fixed", "lu", n)
        conn.pipeline(["EVALSHA", shas["fixed_window"], "1", key, "100000000", "86400", "1"] for _ in times)
        assert int(conn.call("GET", key)) == n
        sizes.setdefault("fixed", {})[n] = usage(conn, key)
        key = mem_key("approx", "lu", n)
        conn.pipeline(
            ["EVALSHA", shas["sliding_counter"], "1", key, str(DAY_MS), "100000000", "1", str(t)] for t in times
        )
        # The layout is one counter key per live window; count them all.
        window_keys = conn.call("KEYS", key + ":*")
        sizes.setdefault("approx", {})[n] = sum(usage(conn, k) for k in window_keys)
        key = mem_key("token", "lu", n)
        conn.pipeline(
            ["EVALSHA", shas["token_bucket"], "1", key, "100000000", str(DAY_MS), "100000000", "1", str(t)]
            for t in times
        )
        sizes.setdefault("token", {})[n] = usage(conn, key)
    return sizes


def phase_memory_and_hot(rounds, calls, full):
    result = {}
    base_ms = int(time.time() * 1000)

    def prepare(d):
        write_aof(os.path.join(d, "appendonly.aof"), base_ms, full)
        result["aof_bytes"] = os.path.getsize(os.path.join(d, "appendonly.aof"))

    log("writing the AOF that builds the memory and hot-key logs, and replaying it")
    server = Server(MODULE, "memory", ["--appendonly", "yes", "--appendfilename", "appendonly.aof"], prepare)
    try:
        result["aof_load_seconds"] = server.start_seconds
        conn = server.conn()
        conn.call("CONFIG", "SET", "appendonly", "no")
        # The replay built what it should: a PEEK counts the logged calls.
        for n in memory_sizes(full):
            got = peek_count(conn, "RL.SLIDING", mem_key("sliding", "rl", n), "100000000", "1d")
            assert got == n + 1, (n, got)
            if n <= 10_000:
                got = peek_count(conn, "RL.FIXED", mem_key("fixed", "rl", n), "100000000", "1d")
                assert got == n + 1, (n, got)
        assert peek_count(conn, "RL.SLIDING", bench_key("hot:", HOT_KEYS - 1), BIG_LIMIT, "1d") == HOT_ENTRIES + 1
        assert peek_count(conn, "RL.SLIDING", bench_key("small:", SMALL_KEYS - 1), BIG_LIMIT, "1d") == SMALL_ENTRIES + 1
        librl = {}
        for n in memory_sizes(full):
            librl.setdefault("sliding", {})[n] = usage(conn, mem_key("sliding", "rl", n))
            if n <= 10_000:
                for alg in ("fixed", "approx", "token"):
                    librl.setdefault(alg, {})[n] = usage(conn, mem_key(alg, "rl", n))
        result["librl"] = librl
        log(f"AOF of {result['aof_bytes'] / 1e6:.0f} MB replayed in {result['aof_load_seconds']:.1f}s")

        hot = {"hot": [], "small": []}
        cases = [
            ("hot", ["RL.SLIDING", "hot:__rand_int__", BIG_LIMIT, "1d"], HOT_KEYS),
            ("small", ["RL.SLIDING", "small:__rand_int__", BIG_LIMIT, "1d"], SMALL_KEYS),
        ]
        for r in range(rounds):
            for name, command, keyspace in cases if r % 2 == 0 else cases[::-1]:
                usec, rps = timed_run(server, conn, "rl.sliding", command, calls, keyspace, flush=False)
                hot[name].append({"usec_per_call": usec, "rps": rps})
                log(f"round {r + 1}/{rounds} sliding {name:<5} log {usec:6.2f} µs/call {rps:>10,.0f} calls/s")
        result["hot"] = hot
        result["hot_entries_after"] = peek_count(conn, "RL.SLIDING", bench_key("hot:", 0), BIG_LIMIT, "1d") - 1

        log("building the Lua layouts with the scripts")
        started = time.monotonic()
        result["lua"] = lua_fill(conn, load_scripts(conn), full)
        log(f"Lua layouts built in {time.monotonic() - started:.1f}s")
        conn.close()
        return result
    finally:
        server.stop()


# ---------------------------------------------------------------- phase 1

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


def ratio(a_runs, b_runs):
    """The median over rounds of a round's a ÷ b: the runs of one round are
    minutes closer in time than the rounds are, so on a busy machine each
    round's ratio is steadier than the ratio of the medians."""
    return statistics.median(a["usec_per_call"] / b["usec_per_call"] for a, b in zip(a_runs, b_runs))


def summarize(data):
    tp = data["throughput"]["runs"]
    incr = med(tp["incr"])
    rows = {}
    for alg, _, _, _ in ALGORITHMS:
        ours, lua = tp[alg], tp["lua_" + alg]
        rows[alg] = {
            "usec": med(ours),
            "lua_usec": med(lua),
            "vs_incr": ratio(ours, tp["incr@" + alg]),
            "vs_lua": ratio(ours, lua),
            "lua_vs_incr": ratio(lua, tp["incr@" + alg]),
            "rps": med(ours, "rps"),
            "lua_rps": med(lua, "rps"),
        }
    hot = data["memory_hot"]["hot"]
    hot_ratio = ratio(hot["hot"], hot["small"])
    return incr, rows, hot_ratio


def report(data):
    incr, rows, hot_ratio = summarize(data)
    tp = data["throughput"]["runs"]
    mh = data["memory_hot"]
    meta = data["meta"]
    out = []
    w = out.append
    w("# librl benchmark: results")
    w("")
    w(f"Reproduce with `make bench` (then `bench/results/latest.md`). This run: {meta['date']}, "
      f"commit {meta['commit']}, {meta['redis']}, {meta['cpu']} ({meta['cores']} cores), "
      f"redis-benchmark -c {CLIENTS} -P {PIPELINE} -n {meta['calls']:,} per run, "
      f"{meta['rounds']} interleaved rounds; the whole run took {meta['seconds']:.0f} s.")
    w("")
    w("## Server time per call")
    w("")
    w(f"Median over the rounds of `usec_per_call` from INFO commandstats, reset before each run (FLUSHALL, "
      f"CONFIG RESETSTAT), random keys over a keyspace of {KEYSPACE:,}, so every call is admitted "
      f"(limit 100 per 60 s). Each round runs INCR, librl and the Lua baseline back to back for each "
      f"algorithm; each ratio is the median over the rounds of that round's ratio (runs seconds apart "
      f"move together more than the rounds do). For a Lua baseline the figure is EVALSHA's own line, which includes the time "
      f"of every redis.call inside the script (those calls are not added again). INCR: "
      f"**{incr:.2f} µs/call** (its {len(tp['incr'])} runs: {fmt_rounds(tp['incr'])}), "
      f"{med(tp['incr'], 'rps'):,.0f} calls/s.")
    w("")
    prof = data.get("profile")
    w("| algorithm | librl µs/call | Lua µs/call | librl ÷ INCR (target) | librl ÷ Lua (target ≤ 0.40) "
      "| Lua ÷ INCR | librl calls/s | Lua calls/s |" + (" instructions ÷ INCR | instructions ÷ Lua |" if prof else ""))
    w("|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if prof else ""))
    for alg, label, _, _ in ALGORITHMS:
        r = rows[alg]
        t = TARGET_VS_INCR[alg]
        extra = ""
        if prof:
            pc = prof["per_call"]
            extra = f" {pc[alg] / pc['incr']:.2f}x | {pc[alg] / pc['lua_' + alg]:.2f}x |"
        w(f"| {label} | {r['usec']:.2f} | {r['lua_usec']:.2f} | {r['vs_incr']:.2f}x (≤ {t}x: "
          f"{verdict(r['vs_incr'] <= t)}) | {r['vs_lua']:.2f}x ({verdict(r['vs_lua'] <= TARGET_VS_LUA)}) "
          f"| {r['lua_vs_incr']:.2f}x | {r['rps']:,.0f} | {r['lua_rps']:,.0f} |" + extra)
    w("")
    if prof:
        stale = "" if prof["src_tree"] == data["meta"]["src_tree"] else (
            " **src/ has changed since: rerun `make bench-profile`.**")
        w(f"The instruction columns are not timed: they come from `make bench-profile` "
          f"(`profile.md`: callgrind's instructions per call inside Redis's `call()`, same command lines, "
          f"run at commit {prof['commit']}), and do not move with the machine's load.{stale}")
        w("")
    w("Each round's µs/call, in run order:")
    w("")
    for alg, label, lua_label, _ in ALGORITHMS:
        w(f"- {label}: {fmt_rounds(tp[alg])}; {lua_label}: {fmt_rounds(tp['lua_' + alg])}")
    w("")
    w("## Memory per key")
    w("")
    w("`MEMORY USAGE key SAMPLES 0` after N admitted calls, one per millisecond (window 1 day, limit never "
      "reached). librl's keys are built by replaying an AOF of the calls with the primary's `NOW`; the Lua "
      "layouts by running the scripts with the same times, except the million-entry sorted set, built by "
      "ZADD in batches of what a million script calls leave (a million time-scored UUIDs). The Lua "
      "two-window counter is the sum over its window keys.")
    w("")
    sizes = sorted({n for alg in mh["librl"].values() for n in alg})
    head = " | ".join(f"after {n:,}" for n in sizes)
    w(f"| algorithm | layout | {head} |")
    w("|---|---|" + "---:|" * len(sizes))
    layouts = {
        "fixed": ("string, 29-byte state", "integer string (GET/INCRBY)"),
        "sliding": ("string, compact byte log", "sorted set, UUID members"),
        "approx": ("string, 29-byte state", "a counter string per window"),
        "token": ("string, 37-byte state", "hash {tokens, ts}"),
    }
    for alg, label, _, _ in ALGORITHMS:
        for who, layout in (("librl", layouts[alg][0]), ("lua", layouts[alg][1])):
            name = label if who == "librl" else "Lua"
            vals = mh[who].get(alg, {})
            cells = " | ".join(kb(vals[n]) if n in vals else "–" for n in sizes)
            w(f"| {name} | {layout} | {cells} |")
    s10k = mh["librl"]["sliding"][10_000]
    w("")
    w(f"SPEC check: RL.SLIDING after 10,000 calls at distinct ms is {s10k:,} bytes (at most 81,000: "
      f"{verdict(s10k <= 81_000)}), {s10k / 10_000:.1f} bytes per logged call"
      + (f"; after 1,000,000: {mh['librl']['sliding'][1_000_000] / 1_000_000:.2f} bytes per call"
         if 1_000_000 in mh["librl"]["sliding"] else "") + ".")
    w("")
    w("## Hot keys: long sliding logs")
    w("")
    hot = mh["hot"]
    w(f"`RL.SLIDING key {BIG_LIMIT} 1d` (every call admitted and logged) on {HOT_KEYS} keys whose logs hold "
      f"{HOT_ENTRIES:,} entries, against {SMALL_KEYS:,} keys whose logs hold {SMALL_ENTRIES}; same server, "
      f"interleaved rounds. The hot logs held {mh['hot_entries_after']:,} entries at the end.")
    w("")
    w("| run | keys | entries per key at start | µs/call (median) | rounds | calls/s |")
    w("|---|---:|---:|---:|---|---:|")
    w(f"| hot | {HOT_KEYS} | {HOT_ENTRIES:,} | {med(hot['hot']):.2f} | {fmt_rounds(hot['hot'])} "
      f"| {med(hot['hot'], 'rps'):,.0f} |")
    w(f"| small | {SMALL_KEYS:,} | {SMALL_ENTRIES} | {med(hot['small']):.2f} | {fmt_rounds(hot['small'])} "
      f"| {med(hot['small'], 'rps'):,.0f} |")
    w("")
    w(f"Hot ÷ small: **{hot_ratio:.2f}x** (target ≤ {TARGET_HOT}x: {verdict(hot_ratio <= TARGET_HOT)}).")
    w("")
    if "all" in data:
        runs = data["all"]
        w("## RL.ALL: three limits in one call")
        w("")
        w(f"Seed 004's check ({ALL_REQUESTS:,} requests per run, each on its own IP, so all admitted): "
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
        w(f"RL.ALL ÷ three calls: **{ratio(runs['all'], runs['three']):.2f}x** server time, "
          f"**{med(runs['all'], 'wall_us') / med(runs['three'], 'wall_us'):.2f}x** wall time "
          "(and all-or-nothing, which three calls are not).")
        w("")
    w("## The pure cores (ns per decision)")
    w("")
    w("`bench/core`: the algorithms of `src/core` and the layouts of `src/codec` outside Redis, median of 7 "
      "runs, `now` advancing 1 ms per call, every admitted call committed. 'Whole call, pure part' adds "
      "decoding the key's bytes and encoding them (or updating the log in place, rebuilds amortized): "
      "everything a call does that is not Redis's.")
    w("")
    w(data["cores"])
    w("")
    w("## Targets")
    w("")
    for alg, label, _, _ in ALGORITHMS:
        r = rows[alg]
        w(f"- {label}: {r['vs_incr']:.2f}x INCR (≤ {TARGET_VS_INCR[alg]}x) {verdict(r['vs_incr'] <= TARGET_VS_INCR[alg])}; "
          f"{r['vs_lua']:.2f}x its Lua baseline (≤ {TARGET_VS_LUA}x) {verdict(r['vs_lua'] <= TARGET_VS_LUA)}")
    w(f"- hot-key sliding run: {hot_ratio:.2f}x the small-log run (≤ {TARGET_HOT}x) {verdict(hot_ratio <= TARGET_HOT)}")
    w("")
    w("![ratios](latest.png)")
    return "\n".join(out) + "\n"


def chart(data, path):
    sys.path.insert(0, PYDEPS)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is missing (scripts/install-bench-deps.sh installs it): no chart")
        return False
    incr, rows, hot_ratio = summarize(data)
    labels = [a[1].replace("RL.SLIDING APPROX", "RL.SLIDING\nAPPROX") for a in ALGORITHMS]
    algs = [a[0] for a in ALGORITHMS]
    fig, axes = plt.subplots(1, 3, figsize=(15, 5), gridspec_kw={"width_ratios": [4, 4, 1.6]})

    def color(ok):
        return "#3a923a" if ok else "#c8463d"

    ax = axes[0]
    xs = range(len(algs))
    ours = [rows[a]["vs_incr"] for a in algs]
    lua = [rows[a]["lua_vs_incr"] for a in algs]
    ax.bar([x - 0.2 for x in xs], ours, 0.4, color=[color(rows[a]["vs_incr"] <= TARGET_VS_INCR[a]) for a in algs],
           label="librl")
    ax.bar([x + 0.2 for x in xs], lua, 0.4, color="#9aa5b1", label="Lua baseline")
    for x, a in zip(xs, algs):
        ax.hlines(TARGET_VS_INCR[a], x - 0.45, x + 0.05, colors="black", linestyles="dashed")
    for x, v in zip(xs, ours):
        ax.text(x - 0.2, v, f"{v:.1f}x", ha="center", va="bottom", fontsize=9)
    for x, v in zip(xs, lua):
        ax.text(x + 0.2, v, f"{v:.1f}x", ha="center", va="bottom", fontsize=9)
    ax.axhline(1, color="#555", linewidth=0.8)
    ax.set_ylim(0, max(lua + ours) * 1.25)
    ax.set_xticks(list(xs), labels)
    ax.set_title(f"server time per call ÷ INCR ({incr:.2f} µs)\ndashed: target")
    ax.legend(loc="upper center", ncol=2)

    ax = axes[1]
    vals = [rows[a]["vs_lua"] for a in algs]
    ax.bar(list(xs), vals, 0.5, color=[color(v <= TARGET_VS_LUA) for v in vals])
    for x, v in zip(xs, vals):
        ax.text(x, v, f"{v:.2f}x", ha="center", va="bottom", fontsize=9)
    ax.axhline(TARGET_VS_LUA, color="black", linestyle="dashed")
    ax.set_xticks(list(xs), labels)
    ax.set_ylim(0, max(1.0, max(vals) * 1.15))
    ax.set_title(f"librl ÷ its Lua baseline\ndashed: target {TARGET_VS_LUA}x")

    ax = axes[2]
    ax.bar([0], [hot_ratio], 0.5, color=color(hot_ratio <= TARGET_HOT))
    ax.text(0, hot_ratio, f"{hot_ratio:.2f}x", ha="center", va="bottom", fontsize=9)
    ax.axhline(TARGET_HOT, color="black", linestyle="dashed")
    ax.set_xticks([0], [f"{HOT_ENTRIES:,}-entry\nlogs"])
    ax.set_xlim(-0.6, 0.6)
    ax.set_ylim(0, max(1.6, hot_ratio * 1.15))
    ax.set_title(f"hot ÷ small logs\ndashed: target {TARGET_HOT}x")
    fig.suptitle(f"librl make bench, {data['meta']['date']} ({data['meta']['commit']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


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
    body = body.replace("![ratios](latest.png)", "![ratios](results/latest.png)")
    body = "\n".join("#" + line if line.startswith("## ") else line for line in body.split("\n"))
    before = text.split(README_START)[0]
    after = text.split(README_END)[1]
    with open(path, "w") as f:
        f.write(f"{before}{README_START}\n{body}{README_END}{after}")


def git(*args):
    try:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def src_tree():
    """What src/ holds: its tree at HEAD, marked when the work tree differs."""
    dirty = git("status", "--porcelain", "--", "src")
    return git("rev-parse", "--short", "HEAD:src") + ("+changes" if dirty and dirty != "?" else "")


def load_profile():
    try:
        with open(os.path.join(RESULTS, "profile.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=100_000, help="calls per redis-benchmark run")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: few calls, no 1,000,000-entry logs; results not written")
    ap.add_argument("--out", default=RESULTS, help="directory for latest.{md,json,png}")
    args = ap.parse_args()
    if args.quick:
        args.calls = min(args.calls, 20_000)
    if not os.path.exists(MODULE):
        sys.exit(f"{MODULE} is missing: `make bench` builds it first")
    started = time.monotonic()
    dirty = git("status", "--porcelain", "--untracked-files=no")
    data = {
        "meta": {
            "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "commit": git("rev-parse", "--short", "HEAD") + ("+changes" if dirty and dirty != "?" else ""),
            "redis": subprocess.run([REDIS_SERVER, "--version"], capture_output=True, text=True).stdout.split(" sha=")[0],
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "calls": args.calls,
            "rounds": args.rounds,
            "src_tree": src_tree(),
        }
    }
    data["profile"] = load_profile()
    log("phase 1/3: the pure cores (bench/core)")
    data["cores"] = phase_cores(args.quick)
    print(data["cores"], flush=True)
    log(f"phase 2/3: server time per call, {args.rounds} interleaved rounds of {args.calls:,} calls")
    data["throughput"] = phase_throughput(args.rounds, args.calls)
    log("phase 3/3: RL.ALL against three calls")
    data["all"] = phase_all(args.rounds, ALL_REQUESTS if not args.quick else 2_000)
    log("phase 3/3: memory per key and hot keys")
    data["memory_hot"] = phase_memory_and_hot(args.rounds, args.calls, full=not args.quick)
    data["meta"]["seconds"] = time.monotonic() - started
    md = report(data)
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
