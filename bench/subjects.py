#!/usr/bin/env python3
"""Bytes per subject, for sizing memory (docs/memory.md, Sizing): on each
of the four servers, a fresh server takes SUBJECTS subjects one call each
of one command, and the growth of `used_memory` divided by SUBJECTS is that
command's cost per subject, the key's name, value, expiry and its share of
the keyspace's tables included. An INCR counter with a TTL (the Lua
scripts' and the tutorial's layout) is the yardstick.

Part of `make bench` (bench.py); alone: `python3 bench/subjects.py
[--subjects N]`. Standard library only.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the work tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resp import Conn, ReplyError, free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = os.environ.get("LIBRL_MODULE", os.path.join(ROOT, "target", "release", "librl.so"))
SUBJECTS = 200_000


def server_binary(variable):
    """The binary named by `variable`: the variable when set, else where
    scripts/servers.env (the one list of the servers' paths, which the
    Makefile and the test suites read) puts it."""
    if os.environ.get(variable):
        return os.environ[variable]
    with open(os.path.join(ROOT, "scripts", "servers.env")) as f:
        for line in f:
            name, sep, path = line.strip().partition("=")
            if sep and not name.startswith("#") and name.strip() == variable:
                return os.path.join(ROOT, path.strip())
    raise RuntimeError(f"scripts/servers.env does not name {variable}")


# The four servers of the test suite (Debian's redis-server 7.0 on PATH).
SERVERS = [
    ("Redis 7.0", os.environ.get("REDIS_SERVER") or shutil.which("redis-server") or "/usr/bin/redis-server"),
    ("Redis 8.2", server_binary("REDIS8_SERVER")),
    ("Valkey 8.1", server_binary("VALKEY8_SERVER")),
    ("Valkey 9.1", server_binary("VALKEY_SERVER")),
]

# One subject's commands: a limit of 10 per minute, as a login or API limit.
COMMANDS = [
    ("RL.FIXED", lambda k: [["RL.FIXED", k, "10", "60"]]),
    ("RL.SLIDING", lambda k: [["RL.SLIDING", k, "10", "60"]]),
    ("RL.SLIDING APPROX", lambda k: [["RL.SLIDING", k, "10", "60", "APPROX"]]),
    ("RL.TOKEN", lambda k: [["RL.TOKEN", k, "10", "60"]]),
    ("RL.CONCURRENT (one lease)", lambda k: [["RL.CONCURRENT", k, "10", "60"]]),
    ("RL.CONCURRENT (five leases)", lambda k: [["RL.CONCURRENT", k, "10", "60"]] * 5),
    ("INCR + PEXPIRE", lambda k: [["INCR", k], ["PEXPIRE", k, "60000"]]),
]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def used_memory(conn):
    info = conn.call("INFO", "memory").decode()
    for line in info.splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":", 1)[1])
    raise RuntimeError("INFO memory has no used_memory")


def start(binary):
    """A fresh server with the module, nothing persisted; (process, port, dir)."""
    d = tempfile.mkdtemp(prefix="librl-bench-subjects-")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--logfile", "server.log",
         "--save", "", "--appendonly", "no", "--enable-debug-command", "local",
         "--loadmodule", MODULE],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            c = Conn(port, timeout=5)
            try:
                if c.call("PING") == "PONG":
                    return proc, port, d
            finally:
                c.close()
        except (OSError, ReplyError):
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{binary} did not start")


def stop(proc, d):
    proc.kill()
    proc.wait()
    shutil.rmtree(d, ignore_errors=True)


def settled_memory(conn):
    """`used_memory` once the keyspace's tables have finished growing: a
    table that doubled moves its entries over in steps, both tables held
    meanwhile, so a reading taken while that is under way counts both and
    varies from run to run. The server finishes it in its background cron
    (1 ms every 100 ms); wait until two readings a few cron ticks apart
    agree."""
    last = used_memory(conn)
    for _ in range(50):
        time.sleep(0.3)
        now = used_memory(conn)
        if now == last:
            return now
        last = now
    return last


def bytes_per_subject(binary, calls, subjects):
    proc, port, d = start(binary)
    try:
        conn = Conn(port)
        # A token bucket's key lives only until it is full again (6 s here):
        # no key may expire while the subjects are added and measured.
        conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        before = settled_memory(conn)
        conn.pipeline(cmd for i in range(subjects) for cmd in calls(f"subject:{i:07d}"))
        assert conn.call("DBSIZE") == subjects
        after = settled_memory(conn)
        conn.close()
        return (after - before) / subjects
    finally:
        stop(proc, d)


def phase(subjects=SUBJECTS, calls_each=1):
    """{server: {command: bytes per subject}}, servers that are not
    installed left out. With `calls_each` 2, every subject is called twice:
    the second call reads the value and rewrites it, which is what a
    subject that keeps calling costs (docs/memory.md)."""
    out = {"subjects": subjects, "calls_each": calls_each, "servers": {}}
    for server, binary in SERVERS:
        if not os.path.exists(binary):
            log(f"{server}: {binary} is missing, skipped")
            continue
        row = {}
        for name, one in COMMANDS:
            calls = (lambda one: lambda k: one(k) * calls_each)(one)
            row[name] = bytes_per_subject(binary, calls, subjects)
            log(f"{server:<10} {name:<27} {row[name]:6.0f} B per subject")
        out["servers"][server] = row
    return out


COUNTER = "INCR + PEXPIRE"
# The targets, as multiples of the counter (one call each).
TARGETS = {"RL.FIXED": 1.3, "RL.SLIDING APPROX": 1.3, "RL.TOKEN": 1.3, "RL.SLIDING": 1.8}


def report(result):
    servers = list(result["servers"])
    if not servers:
        return ""
    each = {1: "one call each", 2: "two calls each"}.get(result.get("calls_each", 1), "")
    lines = [
        "",
        f"## Bytes per subject ({result['subjects']:,} subjects, {each}, limit 10 per minute)",
        "",
        ("Growth of `used_memory` divided by the subjects (the keyspace's tables having finished "
         "growing): key, value, expiry and the tables' share; beside each, the multiple of an INCR "
         "counter with PEXPIRE on the same server. Sizing and where the bytes go: docs/memory.md."),
        "",
        "| command | " + " | ".join(servers) + " |",
        "|---|" + "---:|" * len(servers),
    ]
    verdicts = []
    for name, _ in COMMANDS:
        cells = []
        for server in servers:
            row = result["servers"][server]
            if name == COUNTER:
                cells.append(f"{row[name]:.0f} B")
                continue
            times = row[name] / row[COUNTER]
            cells.append(f"{row[name]:.0f} B ({times:.2f}×)")
            target = TARGETS.get(name)
            if target and result.get("calls_each", 1) == 1:
                verdicts.append((name, server, times, target))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if verdicts:
        lines += ["", "Targets (one call each): RL.FIXED, APPROX and TOKEN at most 1.3× the counter, "
                  "RL.SLIDING at most 1.8×, on every server:"]
        for name, server, times, target in verdicts:
            met = "met" if times <= target else "**missed**"
            lines.append(f"- {name} on {server}: {times:.2f}× (≤ {target}×) {met}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subjects", type=int, default=SUBJECTS)
    ap.add_argument("--calls-each", type=int, default=1, choices=(1, 2))
    args = ap.parse_args()
    print(report(phase(args.subjects, args.calls_each)))


if __name__ == "__main__":
    main()
