"""Instructions per call under callgrind, for `make bench` (totals) and
`make bench-profile` (where they go).

redis-server, with every module of the run loaded, runs under
`valgrind --tool=callgrind --toggle-collect=call`: only what runs inside
Redis's `call()` (the command itself, as INFO commandstats times it, with
any nested call() of a script) is counted. For each case the counters are
zeroed, redis-benchmark sends the calls, and the profile is dumped
(callgrind_control). Instruction counts do not depend on what else the
machine does, so their ratios are the stable measure."""

import glob
import os
import re
import shutil
import subprocess
import tempfile
import time

from resp import Server, redis_benchmark

WRAPPER = ["valgrind", "--tool=callgrind", "--toggle-collect=call", "--dump-instr=no"]


def dump_total(path):
    """The dump's total instruction count (its `summary:` or `totals:` line)."""
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"{path}: no totals line")


def run(modules, cases, calls, keyspace, clients, pipeline, setup=None, keep=None, log=print):
    """cases: [(id, command)], or [(id, command, calls[, keyspace[,
    prepare]])] for a case's own number of calls, keyspace, and
    `prepare(conn)` run after each FLUSHALL (not counted). Returns
    {id: instructions per call}; with
    `keep` (a directory), the dumps stay there as `<id>.callgrind`.
    `setup(conn)` runs once after the server starts (e.g. SCRIPT LOAD)."""
    cg_dir = tempfile.mkdtemp(prefix="librl-callgrind-")
    out_file = os.path.join(cg_dir, "callgrind.out")
    server = None
    per_call = {}
    try:
        # No rehashing from serverCron: whether a table finishes rehashing
        # in the cron or in the commands depends on timing; this way it is
        # the commands' work, the same in every run.
        server = Server(modules, "callgrind", ["--activerehashing", "no"],
                        wrapper=WRAPPER + [f"--callgrind-out-file={out_file}"])
        conn = server.conn()
        if setup:
            setup(conn)
        for cid, command, *own in cases:
            n = own[0] if own else calls
            ks = own[1] if len(own) > 1 else keyspace
            prepare = own[2] if len(own) > 2 else (lambda _conn: None)
            # A warm-up run of the same command first, so each case starts
            # from the allocator and table state its own calls leave (not
            # what the case before it left), then the counted run.
            conn.call("FLUSHALL", "SYNC")
            prepare(conn)
            redis_benchmark(server.port, command, max(100, n // 5), ks, clients, pipeline)
            conn.call("FLUSHALL", "SYNC")
            prepare(conn)
            subprocess.run(["callgrind_control", "--zero", str(server.proc.pid)], check=True, capture_output=True)
            redis_benchmark(server.port, command, n, ks, clients, pipeline)
            before = set(glob.glob(out_file + ".*"))
            subprocess.run(["callgrind_control", f"--dump={cid}", str(server.proc.pid)], check=True,
                           capture_output=True)
            deadline = time.monotonic() + 120
            new = set()
            while not new and time.monotonic() < deadline:
                time.sleep(0.1)
                new = set(glob.glob(out_file + ".*")) - before
            if not new:
                raise RuntimeError(f"callgrind wrote no dump for {cid}")
            dump = sorted(new)[-1]
            # The dump is written when its file is complete: wait for totals.
            for _ in range(100):
                try:
                    total = dump_total(dump)
                    break
                except RuntimeError:
                    time.sleep(0.1)
            else:
                total = dump_total(dump)
            per_call[cid] = total / n
            if keep:
                os.makedirs(keep, exist_ok=True)
                shutil.move(dump, os.path.join(keep, f"{cid}.callgrind"))
            log(f"instructions {cid:<16} {total / n:>9,.0f} per call ({n:,} calls)")
        conn.close()
    finally:
        if server:
            server.stop()
        shutil.rmtree(cg_dir, ignore_errors=True)
    return per_call


# ------------------------------------------------------------ annotation

LINE = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+([*>]?)\s*(.*)$")
NAME = re.compile(r"^[^:]*:(.+?)(?: \(([\d,]+)x\))? \[(.*)\]$")


class Profile:
    """One dump as a call graph: per function its inclusive instructions and
    object file, and its callees with the instructions and calls of each arc."""

    def __init__(self, path):
        out = subprocess.run(
            ["callgrind_annotate", "--inclusive=yes", "--tree=calling", "--threshold=100", path],
            capture_output=True, text=True, check=True,
        ).stdout
        self.total = 0
        self.functions = {}  # name -> {"ir", "obj", "callees": {name: (ir, calls)}}
        current = None
        for line in out.splitlines():
            m = LINE.match(line)
            if not m:
                current = None
                continue
            ir = int(m.group(1).replace(",", ""))
            if m.group(3).startswith("PROGRAM TOTALS"):
                self.total = ir
                continue
            n = NAME.match(m.group(3))
            if not n:
                continue
            name, obj = n.group(1), n.group(3)
            if m.group(2) == "*":
                # (It may have been seen as a callee first.)
                current = self.functions.setdefault(name, {"ir": ir, "obj": obj, "callees": {}})
                current["ir"], current["obj"] = ir, obj
            elif m.group(2) == ">" and current is not None:
                calls = int((n.group(2) or "0").replace(",", ""))
                old = current["callees"].get(name, (0, 0))
                current["callees"][name] = (old[0] + ir, old[1] + calls)
                self.functions.setdefault(name, {"ir": 0, "obj": obj, "callees": {}})

    def ir(self, name):
        f = self.functions.get(name)
        return f["ir"] if f else 0

    def callees(self, name):
        f = self.functions.get(name)
        return f["callees"] if f else {}

    def is_module(self, name):
        """Code from a module's .so (not the server, libc or the loader)."""
        f = self.functions.get(name)
        return bool(f) and f["obj"].endswith(".so") and "/lib/" not in f["obj"] and "ld-linux" not in f["obj"]

    def module_functions(self):
        return [n for n in self.functions if self.is_module(n)]

    def self_ir(self, name):
        f = self.functions.get(name)
        if not f:
            return 0
        return max(0, f["ir"] - sum(ir for ir, _ in f["callees"].values()))


DISPATCHER = "RedisModuleCommandDispatcher"
AROUND = "Redis's call() around the command"
CONTEXT = "module context (RedisModuleCommandDispatcher)"
OWN = "the module's own code"
# What breakdown's lines mean, for the reports that show them (profile.py's
# and bench.py's), said once.
LINES_EXPLAINED = (
    "**API** lines are a module-API function's inclusive cost (what runs inside Redis for it), "
    "summed over every call the module makes to it; *the module's own code* is everything else "
    "under the command handler: argument conversion, parsing, mode and statistics, the decision, "
    "encoding, and the Rust side of allocations.")


def breakdown(p):
    """{line: instructions} for a module command's dump (None for a command
    that is not a module's): Redis's call() around the command, the module
    context, each module-API function the module calls (inclusive, summed
    over its calls), and the module's own code (everything else under the
    handler, libc calls from it included)."""
    if p.ir(DISPATCHER) == 0:
        return None
    server_obj = p.functions["call"]["obj"] if "call" in p.functions else None
    handlers = {n: ir for n, (ir, _) in p.callees(DISPATCHER).items() if p.is_module(n)}
    handler_ir = sum(handlers.values())
    lines = {AROUND: p.total - p.ir(DISPATCHER), CONTEXT: p.ir(DISPATCHER) - handler_ir}
    api = {}
    for name in p.module_functions():
        for callee, (ir, _) in p.callees(name).items():
            if not p.is_module(callee) and p.functions.get(callee, {}).get("obj") == server_obj:
                api[callee] = api.get(callee, 0) + ir
    lines.update(api)
    lines[OWN] = handler_ir - sum(api.values())
    return lines
