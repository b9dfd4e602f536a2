"""The phases of `make bench` beside the main table (bench/bench.py): RL.ALL
against three calls, memory per key and hot keys, a request's whole life
(RESERVE, REFUND, WAIT), and the client packages' rows."""

import json
import os
import selectors
import subprocess
import time
import uuid

from resp import ReplyError, Server, commandstats, encode, redis_benchmark

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
DAY_MS = 86_400_000


CLIENTS = 50
PIPELINE = 16

# The Lua baselines: script file -> (librl algorithm, label).
SCRIPTS = {
    "fixed_window": ("fixed", "Lua fixed window (GET/SET+EXPIRE/INCRBY, TTL)"),
    "sliding_log": ("sliding", "Lua sorted-set log (UUID members, TIME)"),
    "sliding_counter": ("approx", "Lua two-window counter (MGET, INCRBY+PEXPIRE)"),
    "token_bucket": ("token", "Lua hash token bucket (HMGET/HSET+PEXPIRE, TIME)"),
}


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def script_text(name):
    with open(os.path.join(BENCH, "lua", name + ".lua")) as f:
        return f.read()


def load_scripts(conn):
    """SCRIPT LOAD of every baseline: {script name: sha}."""
    return {name: conn.call("SCRIPT", "LOAD", script_text(name)).decode() for name in SCRIPTS}


def timed_run(conn, port, stat_name, command, calls, keyspace, flush=True):
    """One redis-benchmark run from a reset: (server µs per call, calls/s)."""
    if flush:
        conn.call("FLUSHALL", "SYNC")
    conn.call("CONFIG", "RESETSTAT")
    rps = redis_benchmark(port, command, calls, keyspace, CLIENTS, PIPELINE)
    stats = commandstats(conn).get(stat_name)
    if not stats or int(stats["calls"]) != calls:
        raise RuntimeError(f"{command[0]}: expected {calls} calls in commandstats, got {stats}")
    if stats.get("failed_calls", 0) or stats.get("rejected_calls", 0):
        raise RuntimeError(f"{command[0]}: calls failed: {stats}")
    return stats["usec_per_call"], rps


# ---------------------------------------------------------------- RL.ALL

ALL_REQUESTS = 20_000


def all_request(k, together):
    """Forja's check for request k: per-second and per-minute IP limits
    and a per-day API-key quota, as one RL.ALL or as three calls."""
    s = (f"b:{{ip:{k}}}:s", "50", "1s", "ALIGNED")
    m = (f"b:{{ip:{k}}}:m", "500", "1m", "ALIGNED")
    d = (f"b:{{ip:{k}}}:key", "10000", "1d")
    if together:
        return [["RL.ALL", "FIXED", *s, "FIXED", *m, "TOKEN", *d]]
    return [["RL.FIXED", *s], ["RL.FIXED", *m], ["RL.TOKEN", *d]]


def phase_all(module, rounds, requests):
    """RL.ALL with three clauses against the same three limits as three
    separate calls in a pipeline, from one client: server time per request
    (commandstats) and the client's wall time per request, interleaved."""
    server = Server(module, "all")
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


def phase_memory_and_hot(module, rounds, calls, full):
    result = {}
    base_ms = int(time.time() * 1000)

    def prepare(d):
        write_aof(os.path.join(d, "appendonly.aof"), base_ms, full)
        result["aof_bytes"] = os.path.getsize(os.path.join(d, "appendonly.aof"))

    log("writing the AOF that builds the memory and hot-key logs, and replaying it")
    server = Server(module, "memory", ["--appendonly", "yes", "--appendfilename", "appendonly.aof"], prepare)
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
                usec, rps = timed_run(conn, server.port, "rl.sliding", command, calls, keyspace, flush=False)
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



# ------------------------------------------------------ a request's whole life

LIFE_KEYS = 1000
WAITERS = 50


def supports_reserve(conn):
    """The module takes RESERVE when `RL.TOKEN k 10 1 RESERVE 1s` answers an
    array (a module without it answers an error)."""
    try:
        reply = conn.call("RL.TOKEN", "b:probe:reserve", "10", "1", "RESERVE", "1s")
    except ReplyError:
        return False
    finally:
        conn.call("DEL", "b:probe:reserve")
    return isinstance(reply, list)


def life_cases():
    """(id, label, command, how each key is prepared). All three run on the
    same LIFE_KEYS existing keys, so every call updates a key, writes and
    replicates: plain admitted calls on full buckets; RESERVE on emptied
    buckets (each call takes a token from the future, 86.4 s apart, so the
    wait stays far below max_wait); REFUND on emptied buckets of a billion
    tokens refilled over 3650 days (each call gives one back, the bucket
    never fills, and the refill during a run is negligible)."""
    big = "1000000000"
    return [
        ("plain", "RL.TOKEN (admitted)", ["RL.TOKEN", "b:plain:__rand_int__", big, "1d"],
         lambda k: ["RL.TOKEN", k, big, "1d"]),
        ("reserve", "RL.TOKEN ... RESERVE 3650d (reserving)",
         ["RL.TOKEN", "b:reserve:__rand_int__", "1000", "1d", "RESERVE", "3650d"],
         lambda k: ["RL.TOKEN", k, "1000", "1d", "COST", "1000"]),
        ("refund", "RL.TOKEN ... REFUND 1 (refunding)",
         ["RL.TOKEN", "b:refund:__rand_int__", big, "3650d", "REFUND", "1"],
         lambda k: ["RL.TOKEN", k, big, "3650d", "COST", big]),
    ]


def pin_token(conn, key, d_ms):
    """Takes the only token of a 1-per-D-ms bucket inside MULTI between two
    TIMEs; returns the server's millisecond of that call (retried in the
    rare case the two TIMEs fall in different milliseconds)."""
    for _ in range(5):
        conn.call("DEL", key)
        conn.sock.sendall(b"".join(encode(a) for a in (
            ["MULTI"], ["TIME"], ["RL.TOKEN", key, "1", f"{d_ms}ms", "BURST", "1"], ["TIME"], ["EXEC"])))
        for _ in range(4):
            conn.read()  # OK, QUEUED x3
        t1, reply, t2 = conn.read()
        ms1 = int(t1[0]) * 1000 + int(t1[1]) // 1000
        ms2 = int(t2[0]) * 1000 + int(t2[1]) // 1000
        if ms1 == ms2 and reply[0] == 1:
            return ms1
    raise RuntimeError("could not pin the server's millisecond of a call")


def wait_lateness(conn_factory, rounds):
    """WAIT's lateness with WAITERS clients waiting at once: each client has
    its own bucket (1 token per D ms, D from 50 to 197 ms), takes its token
    (pin_token), then sends WAIT, whose reserved time is that millisecond
    + D. Lateness is when the reply arrives at the client (same clock,
    loopback) minus the reserved time."""
    conns = [conn_factory() for _ in range(WAITERS)]
    late = []
    try:
        for r in range(rounds):
            sel = selectors.DefaultSelector()
            due = {}
            for i, c in enumerate(conns):
                d_ms = 50 + 3 * i
                key = f"b:wait:{r}:{i}"
                at = pin_token(c, key, d_ms)
                c.sock.sendall(encode(["RL.TOKEN", key, "1", f"{d_ms}ms", "BURST", "1", "WAIT", f"{2 * d_ms}ms"]))
                due[c.sock.fileno()] = (c, at + d_ms)
                sel.register(c.sock, selectors.EVENT_READ)
            deadline = time.monotonic() + 5
            while due and time.monotonic() < deadline:
                for k, _ in sel.select(timeout=1):
                    arrived = time.time() * 1000
                    c, reserved = due.pop(k.fd)
                    sel.unregister(c.sock)
                    reply = c.read()
                    if isinstance(reply, ReplyError) or reply[0] != 1:
                        raise RuntimeError(f"WAIT did not admit: {reply}")
                    late.append(arrived - reserved)
            sel.close()
            if due:
                raise RuntimeError(f"{len(due)} WAIT replies did not arrive")
    finally:
        for c in conns:
            c.close()
    late.sort()

    def pct(p):
        return late[min(len(late) - 1, int(p * len(late)))]

    return {"samples": len(late), "p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": late[-1],
            "min_ms": late[0], "early": sum(x < 0 for x in late)}


LIFE_INS_CALLS = 5_000


def life_instructions(module, cases):
    """Instructions per call of the same three runs under callgrind
    (bench/instructions.py), each on its prepared buckets."""
    import instructions

    def preparer(command, prepare):
        prefix = command[1].split("__")[0]
        return lambda conn: conn.pipeline(prepare(bench_key(prefix, i)) for i in range(LIFE_KEYS))

    return instructions.run(
        [module], [(cid, command, LIFE_INS_CALLS, LIFE_KEYS, preparer(command, prepare))
                   for cid, _, command, prepare in cases],
        LIFE_INS_CALLS, LIFE_KEYS, CLIENTS, PIPELINE, log=log)


def phase_life(module, rounds, calls):
    """RESERVE and REFUND calls against plain RL.TOKEN (same server,
    interleaved rounds), and WAIT's lateness; None when the module has no
    RESERVE yet."""
    server = Server(module, "life")
    try:
        conn = server.conn()
        if not supports_reserve(conn):
            conn.close()
            return None
        cases = life_cases()
        runs = {cid: [] for cid, _, _, _ in cases}
        try:
            for r in range(rounds):
                for cid, label, command, prepare in cases if r % 2 == 0 else cases[::-1]:
                    conn.call("FLUSHALL", "SYNC")
                    conn.pipeline(prepare(bench_key(command[1].split("__")[0], i)) for i in range(LIFE_KEYS))
                    usec, rps = timed_run(conn, server.port, "rl.token", command, calls, LIFE_KEYS, flush=False)
                    # The run did what it says: a PEEK at one of its buckets
                    # (count beyond the capacity after reservations, below
                    # it after refunds).
                    peek = conn.call(*prepare(bench_key(command[1].split("__")[0], 0))[:4], "PEEK")
                    runs[cid].append({"usec_per_call": usec, "rps": rps, "peek": peek})
                    log(f"round {r + 1}/{rounds} {label:<40} {usec:6.2f} µs/call {rps:>10,.0f} calls/s")
        except (ReplyError, RuntimeError, subprocess.CalledProcessError) as e:
            log(f"RESERVE/REFUND runs failed: {e}")
            return {"error": str(e)}
        conn.close()
        server.stop()
        try:
            ins = life_instructions(module, cases)
        except (RuntimeError, ReplyError, OSError, subprocess.CalledProcessError) as e:
            log(f"RESERVE/REFUND instructions not measured: {e}")
            ins = {}
        server = Server(module, "wait")
        try:
            wait = wait_lateness(server.conn, 10)
            log(f"WAIT lateness over {wait['samples']} replies: p50 {wait['p50_ms']:.2f} ms, "
                f"p99 {wait['p99_ms']:.2f} ms, max {wait['max_ms']:.2f} ms")
        except (RuntimeError, ReplyError, OSError, ValueError, TypeError, IndexError) as e:
            log(f"WAIT lateness not measured: {e}")
            wait = {"error": str(e)}
        return {"labels": {cid: label for cid, label, _, _ in cases},
                "commands": {cid: " ".join(command) for cid, _, command, _ in cases},
                "runs": runs, "wait": wait, "instructions": ins}
    finally:
        server.stop()


# ----------------------------------------------------------------- RL.CONCURRENT

CONC_KEYS = 500_000
CONC_INS_KEYS = 100_000
CONC_INS_CALLS = 5_000


def supports_concurrent(conn):
    """The module has RL.CONCURRENT when a read of one answers an array."""
    try:
        return isinstance(conn.call("RL.CONCURRENT", "b:probe:concurrent", "1", "1", "COST", "0"), list)
    except ReplyError:
        return False


def rl_denied(conn):
    """INFO rl's refusals of RL.CONCURRENT so far (a RELEASE of a lease no
    longer held among them)."""
    info = conn.call("INFO", "rl").decode()
    return int(info.split("rl_concurrent_denied:")[1].split()[0])


def leases_of_two(conn, prefix, keys):
    """Every key of the run (`prefix` + redis-benchmark's 12 digits) holding
    the same two leases of an hour: a prototype key takes them, then COPY
    makes the others (a copy keeps the value, so the same ids, and the
    expiry). Returns the first lease's id, which the RELEASE run frees."""
    proto = f"{prefix}proto"
    conn.call("DEL", proto)
    first = conn.call("RL.CONCURRENT", proto, "100", "1h")[6]
    conn.call("RL.CONCURRENT", proto, "100", "1h")
    conn.pipeline(["COPY", proto, bench_key(prefix, i)] for i in range(keys))
    conn.call("DEL", proto)
    return first


def concurrency_cases():
    """(id, label, command, prepare(conn, keys)): on keys that exist, every
    call writes and replicates. RL.FIXED on keys holding a window (its
    cheapest update: the value rewritten in place), RL.CONCURRENT taking a
    third lease on keys holding two, and RELEASE of the first of those two
    (the value rebuilt with the other). A RELEASE frees a key's lease once:
    with random keys over the keyspace, a call now and then meets a key
    released already in the run (about calls ÷ (2 × keys) of them) and is
    refused, writing nothing: counted, and said in the report. The RELEASE
    command's id is set by its prepare (the run's prototype lease)."""
    release = ["RL.CONCURRENT", "b:crel:__rand_int__", "100", "60", "RELEASE", "0"]

    def prepare_release(conn, keys):
        release[-1] = str(leases_of_two(conn, "b:crel:", keys))

    def prepare_fixed(conn, keys):
        conn.pipeline(["RL.FIXED", bench_key("b:cfix:", i), "1000000", "1h"] for i in range(keys))

    return [
        ("fixed_held", "RL.FIXED (window held)", ["RL.FIXED", "b:cfix:__rand_int__", "1000000", "1h"],
         prepare_fixed),
        ("acquire_held", "RL.CONCURRENT (key holding 2 leases)", ["RL.CONCURRENT", "b:cacq:__rand_int__", "100", "60"],
         lambda conn, keys: leases_of_two(conn, "b:cacq:", keys)),
        ("release", "RL.CONCURRENT ... RELEASE (key holding 2 leases)", release, prepare_release),
    ]


def wake_latency(conn_factory, rounds, waiters=WAITERS):
    """RL.CONCURRENT WAIT's wake-up after a RELEASE: per round, a key with a
    limit of one slot, held by one connection; `waiters` clients send WAIT
    on connections of their own and queue; then the holder releases,
    `waiters` times, each time the lease of the waiter just served. A
    sample is from sending the RELEASE to the next waiter's reply arriving
    (same clock, loopback): the RELEASE's own round trip included."""
    holder = conn_factory()
    conns = [conn_factory() for _ in range(waiters)]
    late, trips = [], []
    try:
        for r in range(rounds):
            key = f"b:wake:{r}"
            held = holder.call("RL.CONCURRENT", key, "1", "1m")[6]
            for c in conns:
                c.sock.sendall(encode(["RL.CONCURRENT", key, "1", "1m", "WAIT", "30s"]))
            deadline = time.monotonic() + 10
            while int(holder.call("INFO", "clients").decode().split("blocked_clients:")[1].split()[0]) < waiters:
                if time.monotonic() > deadline:
                    raise RuntimeError("the waiters did not queue")
                time.sleep(0.001)
            sel = selectors.DefaultSelector()
            for c in conns:
                sel.register(c.sock, selectors.EVENT_READ, c)
            for _ in range(waiters):
                sent = time.time() * 1000
                freed = holder.call("RL.CONCURRENT", key, "1", "1m", "RELEASE", str(held))
                trips.append(time.time() * 1000 - sent)
                if freed[0] != 1:
                    raise RuntimeError(f"RELEASE did not free the lease: {freed}")
                events = sel.select(timeout=5)
                arrived = time.time() * 1000
                if not events:
                    raise RuntimeError("no waiter was served after a RELEASE")
                c = events[0][0].data
                sel.unregister(c.sock)
                reply = c.read()
                if isinstance(reply, ReplyError) or reply[0] != 1:
                    raise RuntimeError(f"the waiter was not admitted: {reply}")
                late.append(arrived - sent)
                held = reply[6]
            sel.close()
    finally:
        holder.close()
        for c in conns:
            c.close()
    late.sort()
    trips.sort()

    def pct(values, p):
        return values[min(len(values) - 1, int(p * len(values)))]

    return {"samples": len(late), "p50_ms": pct(late, 0.50), "p99_ms": pct(late, 0.99), "max_ms": late[-1],
            "release_p50_ms": pct(trips, 0.50), "waiters": waiters}


def phase_concurrency(module, rounds, calls, quick):
    """RL.CONCURRENT's acquire and RELEASE on keys holding leases against
    RL.FIXED on keys holding a window (same server, interleaved rounds, then
    under callgrind), and WAIT's wake-up after a RELEASE; None when the
    module has no RL.CONCURRENT."""
    import instructions

    keys = 200_000 if quick else CONC_KEYS
    server = Server(module, "concurrency")
    try:
        conn = server.conn()
        if not supports_concurrent(conn):
            conn.close()
            return None
        cases = concurrency_cases()
        runs = {cid: [] for cid, _, _, _ in cases}
        for r in range(rounds):
            for cid, label, command, prepare in cases if r % 2 == 0 else cases[::-1]:
                conn.call("FLUSHALL", "SYNC")
                prepare(conn, keys)
                denied_before = rl_denied(conn)
                usec, rps = timed_run(conn, server.port, command[0].lower(), command, calls, keys, flush=False)
                refused = rl_denied(conn) - denied_before
                runs[cid].append({"usec_per_call": usec, "rps": rps, "refused": refused})
                log(f"round {r + 1}/{rounds} {label:<48} {usec:6.2f} µs/call {rps:>10,.0f} calls/s")
        conn.close()
        server.stop()
        ins_calls = 1_000 if quick else CONC_INS_CALLS
        ins_keys = 20_000 if quick else CONC_INS_KEYS

        def on_keys(prepare):
            return lambda c: prepare(c, ins_keys)

        ins = instructions.run(
            [module], [(cid, command, ins_calls, ins_keys, on_keys(prepare)) for cid, _, command, prepare in cases],
            ins_calls, ins_keys, CLIENTS, PIPELINE, log=log)
        server = Server(module, "wake")
        wake = wake_latency(server.conn, 3 if quick else 10)
        log(f"RL.CONCURRENT WAIT wake-up over {wake['samples']} releases: p50 {wake['p50_ms']:.2f} ms, "
            f"p99 {wake['p99_ms']:.2f} ms, max {wake['max_ms']:.2f} ms")
        return {"labels": {cid: label for cid, label, _, _ in cases},
                "commands": {cid: " ".join(command) for cid, _, command, _ in cases},
                "runs": runs, "instructions": ins, "wake": wake, "keys": keys, "ins_keys": ins_keys,
                "ins_calls": ins_calls, "calls": calls}
    finally:
        server.stop()


# ------------------------------------------------------------ long exact logs

LONG_LOGS = (10_000, 100_000)
LONG_KEYS = 2
LONG_COST = 100  # units per logged call: refunds of 1 unit leave the entries in place


def long_log_cases():
    """(id, label, command, calls divisor) on logs of N calls at distinct
    milliseconds, each of LONG_COST units, window 1 day: an admitted call,
    REFUND 1, and denials: at the limit (the usual one: the oldest entry
    must leave), and after the limit was lowered (an override) to one
    entry's units or to half of what the log holds. A denial reads the
    entries from the end nearer to the one that decides its wait."""
    cases = []
    for n in LONG_LOGS:
        key = f"long:{n}:__rand_int__"
        units = n * LONG_COST
        cases += [
            (f"{n}-admit", "admitted (appended)", ["RL.SLIDING", key, BIG_LIMIT, "1d"], 1),
            (f"{n}-refund", "REFUND 1", ["RL.SLIDING", key, BIG_LIMIT, "1d", "REFUND", "1"], 1),
            (f"{n}-deny", "denied at the limit", ["RL.SLIDING", key, str(units), "1d"], 1),
            (f"{n}-low", f"denied, limit lowered to {LONG_COST}",
             ["RL.SLIDING", key, str(LONG_COST), "1d"], 1),
            (f"{n}-half", f"denied, limit lowered to half ({units // 2:,})",
             ["RL.SLIDING", key, str(units // 2), "1d"], 10),
        ]
    return cases


def long_log_payloads(module, base_ms):
    """Builds the long logs by replaying an AOF of their calls (with the
    primary's NOW) and returns {key: (DUMP payload, PEXPIRETIME)}, so that
    each run starts from the same logs by RESTORE, whatever the layout."""

    def prepare(d):
        with open(os.path.join(d, "appendonly.aof"), "wb") as f:
            for n in LONG_LOGS:
                times = range(base_ms - n - 1, base_ms - 1)
                for i in range(LONG_KEYS):
                    f.write(aof_commands(["RL.SLIDING", bench_key(f"long:{n}:", i), BIG_LIMIT, "1d",
                                          "COST", str(LONG_COST)], times))

    server = Server(module, "long-logs", ["--appendonly", "yes", "--appendfilename", "appendonly.aof"], prepare)
    try:
        conn = server.conn()
        payloads = {}
        for n in LONG_LOGS:
            for i in range(LONG_KEYS):
                key = bench_key(f"long:{n}:", i)
                assert peek_count(conn, "RL.SLIDING", key, BIG_LIMIT, "1d") == n * LONG_COST + 1
                payloads[key] = (conn.call("DUMP", key), conn.call("PEXPIRETIME", key))
        conn.close()
        return payloads
    finally:
        server.stop()


def restore(payloads, n):
    """A `prepare(conn)` putting back the logs of N entries."""
    def prepare(conn):
        conn.pipeline(["RESTORE", key, str(at), dump, "ABSTTL", "REPLACE"]
                      for key, (dump, at) in payloads.items() if key.startswith(f"long:{n}:"))
    return prepare


def phase_long_logs(module, rounds, calls, ins_calls):
    """REFUND and denials on exact logs of 10,000 and 100,000 entries
    against an admitted call on the same logs: server µs per call
    (interleaved rounds, each from the same logs) and instructions per call
    (callgrind)."""
    import instructions

    base_ms = int(time.time() * 1000)
    payloads = long_log_payloads(module, base_ms)
    cases = long_log_cases()
    runs = {cid: [] for cid, _, _, _ in cases}
    server = Server(module, "long")
    try:
        conn = server.conn()
        for r in range(rounds):
            for cid, label, command, div in cases if r % 2 == 0 else cases[::-1]:
                n = int(cid.split("-")[0])
                conn.call("FLUSHALL", "SYNC")
                restore(payloads, n)(conn)
                # Whole pipelines for every client: redis-benchmark sends
                # a few more calls than asked otherwise.
                n = max(CLIENTS * PIPELINE, calls // div // (CLIENTS * PIPELINE) * CLIENTS * PIPELINE)
                usec, rps = timed_run(conn, server.port, "rl.sliding", command, n, LONG_KEYS, flush=False)
                runs[cid].append({"usec_per_call": usec, "rps": rps})
                log(f"round {r + 1}/{rounds} {n:>7,}-entry log, {label:<40} {usec:8.2f} µs/call")
        conn.close()
    finally:
        server.stop()
    ins = instructions.run(
        [module], [(cid, command, max(50, ins_calls // (10 * div)), LONG_KEYS,
                    restore(payloads, int(cid.split("-")[0])))
                   for cid, _, command, div in cases],
        ins_calls, LONG_KEYS, CLIENTS, PIPELINE, log=log)
    return {"labels": {cid: label for cid, label, _, _ in cases},
            "commands": {cid: " ".join(command) for cid, _, command, _ in cases},
            "runs": runs, "instructions": ins}


# ----------------------------------------------------------------- client packages

CLIENT_SCRIPTS = [
    # (name, file under bench/clients, how to run it)
    ("Python", "python_bench.py", "python"),
    ("Node.js", "node_bench.mjs", "node"),
    ("Rust", os.path.join("rust", "Cargo.toml"), "cargo"),
    ("Java", os.path.join("java", "ClientBench.java"), "java"),
]
# Maven's build of the Java package and the classpath the Java benchmark runs
# with, under target/ (offline from .deps/m2 when scripts/install-deps.sh
# fetched it for this pom).
JAVA_BUILD = os.path.join(ROOT, "target", "java-bench")
JAVA_CLASSPATH = os.path.join(JAVA_BUILD, "classpath.txt")
MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
CLIENT_TIMEOUT = 300


BUILD_TIMEOUT = 900


def java_build_command():
    pom = os.path.join(ROOT, "clients", "java", "pom.xml")
    m2 = os.path.join(ROOT, ".deps", "m2")
    stamp = os.path.join(m2, ".librl-pom")
    offline = []
    if os.path.exists(stamp):
        with open(stamp, "rb") as a, open(pom, "rb") as b:
            offline = ["-o"] if a.read() == b.read() else []
    return ["mvn", "-B", "-q", "--no-transfer-progress", *offline, "-f", pom, "-Dmaven.repo.local=" + m2,
            "-Dlibrl.build.dir=" + JAVA_BUILD, "-Dmaven.test.skip=true", "compile",
            MAVEN_DEPENDENCY_PLUGIN + ":build-classpath", "-Dmdep.outputFile=" + JAVA_CLASSPATH]


def client_command(kind, path):
    if kind == "java":
        with open(JAVA_CLASSPATH) as f:
            classpath = os.path.join(JAVA_BUILD, "classes") + os.pathsep + f.read().strip()
        return ["java", "-cp", classpath, path]
    if kind == "python":
        venv = os.path.join(ROOT, ".deps", "venv", "bin", "python")
        return [venv if os.path.exists(venv) else "python3", path]
    if kind == "node":
        return ["node", path]
    # The crate's own target dir (its own lock and dependencies).
    return ["cargo", "run", "--release", "--quiet", "--manifest-path", path, "--"]


def run_group(cmd, timeout):
    """Runs cmd in its own process group; on timeout the whole group (cargo
    and its rustc children, a script and its servers) is killed.
    Returns (returncode, stdout, stderr), returncode None on timeout."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        return None, out, err


def parse_client_output(out):
    """Every JSON object a client script printed (one per line, or a list)."""
    rows = []
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith(("{", "[")):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        for row in value if isinstance(value, list) else [value]:
            if isinstance(row, dict) and "client" in row:
                rows.append(row)
    return rows


def phase_clients(module, redis_server):
    """Runs each client package's benchmark that exists; each prints
    `{"client": .., "standalone": {"rl_us": .., "incr_us": ..}, "cluster":
    {...}}`. A missing script is noted, not an error."""
    results = []
    for name, rel, kind in CLIENT_SCRIPTS:
        path = os.path.join(BENCH, "clients", rel)
        if not os.path.exists(path):
            log(f"clients: {name}: bench/clients/{rel} not present")
            results.append({"package": name, "status": "not present", "script": f"bench/clients/{rel}"})
            continue
        try:
            if kind == "java":
                # The package's classes and classpath first, apart from the timed run.
                log(f"clients: {name}: building clients/java (mvn compile)")
                code, out, err = run_group(java_build_command(), BUILD_TIMEOUT)
                if code != 0:
                    why = "build timed out" if code is None else f"build failed (exit {code})"
                    log(f"clients: {name}: {why}: {(err or out).strip()[-500:]}")
                    results.append({"package": name, "status": why, "script": f"bench/clients/{rel}"})
                    continue
            cmd = client_command(kind, path) + ["--module", module, "--redis-server", redis_server]
            if kind == "cargo":
                # Built first, apart from the timed run (a first build takes minutes).
                log(f"clients: {name}: building bench/clients/{rel} (release)")
                code, out, err = run_group(["cargo", "build", "--release", "--quiet", "--manifest-path", path],
                                           BUILD_TIMEOUT)
                if code != 0:
                    why = "build timed out" if code is None else f"build failed (exit {code})"
                    log(f"clients: {name}: {why}: {err.strip()[-500:]}")
                    results.append({"package": name, "status": why, "script": f"bench/clients/{rel}"})
                    continue
            started = time.monotonic()
            code, out, err = run_group(cmd, CLIENT_TIMEOUT)
        except OSError as e:
            results.append({"package": name, "status": f"could not run: {e}", "script": f"bench/clients/{rel}"})
            continue
        seconds = time.monotonic() - started
        rows = parse_client_output(out)
        if code != 0 or not rows:
            why = (f"no result within {CLIENT_TIMEOUT} s" if code is None
                   else f"exit {code}" if code else "no JSON result")
            log(f"clients: {name}: {why}: {(err or out).strip()[-500:]}")
            results.append({"package": name, "status": why, "script": f"bench/clients/{rel}"})
            continue
        for row in rows:
            row["package"] = name
            row["status"] = "ok"
            row["seconds"] = seconds
            results.append(row)
        log(f"clients: {name}: {len(rows)} row(s) in {seconds:.0f} s")
    return results
