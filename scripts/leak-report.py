#!/usr/bin/env python3
"""Reads the valgrind logs `make leakcheck` left (one per server process) and
judges the module.

Usage: leak-report.py LOG_DIR [CARGO_TEST_OUTPUT]

A loss record or memory error is the module's when a frame of its stack is in
librl.so (`rl::` and `redis_module::` frames, `RedisModule_OnLoad`). Module
leaks are split by when the block was allocated:

* at load (the stack goes through RedisModule_OnLoad): allocated once per
  server process. Some are held in the module's statics for its life and
  become "definitely lost" only because Valkey unloads modules when it
  shuts down (forked children exit without unloading and do not report
  them); others are lost from the start. Each must have the same size in
  every process that reports it, so none grows with traffic.
  LEAKCHECK_STRICT=1 fails on them too.
* at run time (any other stack): a leak per call, the thing this check is
  for. Any of them fails the check, as does any memory error (invalid
  read/write/free, uninitialised value) in a module frame.
"""

import collections
import os
import re
import sys

MODULE_FRAME = re.compile(r"librl\.so|(?<![A-Za-z0-9_])rl::|redis_module::|RedisModule_OnLoad")
AT_LOAD = re.compile(r"RedisModule_OnLoad|\bmoduleLoad\b")
LOST = re.compile(
    r"^([\d,]+)(?: \(([\d,]+) direct, ([\d,]+) indirect\))? bytes in ([\d,]+) blocks are definitely lost"
)
SUMMARY_DEF = re.compile(r"definitely lost: ([\d,]+) bytes in ([\d,]+) blocks")
MEMORY_ERROR = re.compile(
    r"^(Invalid (read|write|free)|Mismatched free|Conditional jump|Use of uninitialised|"
    r"Syscall param|Source and destination overlap|Argument .* of function)"
)
PREFIX = re.compile(r"^==\d+== ?")


def num(text):
    return int(text.replace(",", "")) if text else 0


def records(lines):
    """Valgrind's blank-line separated records: (header, stack lines)."""
    header, stack = None, []
    for line in lines:
        if not line.strip():
            if header is not None:
                yield header, stack
            header, stack = None, []
        elif header is None:
            header = line
        else:
            stack.append(line.strip())
    if header is not None:
        yield header, stack


def signature(stack):
    """A record's identity across processes: its function names."""
    names = []
    for frame in stack:
        m = re.match(r"(?:at|by) 0x[0-9A-F]+: (.*)", frame)
        if m:
            names.append(re.sub(r" \(in .*\)$", "", m.group(1)))
    return tuple(names)


def main():
    log_dir = sys.argv[1]
    test_output = sys.argv[2] if len(sys.argv) > 2 else None
    strict = os.environ.get("LEAKCHECK_STRICT", "") not in ("", "0")

    logs = sorted(f for f in os.listdir(log_dir) if f.startswith("vg-") and f.endswith(".log"))
    checked, unfinished = 0, []
    total_def_bytes = total_def_blocks = 0
    load_per_process = collections.Counter()  # bytes at load -> processes
    # signature -> processes it appears in (a process may repeat a signature)
    load_records = collections.defaultdict(set)
    load_sizes = collections.defaultdict(set)  # signature -> per-process bytes
    runtime_records = collections.defaultdict(set)
    error_records = collections.defaultdict(set)
    runtime_bytes = 0
    examples = {}

    for name in logs:
        with open(os.path.join(log_dir, name), errors="replace") as f:
            lines = [PREFIX.sub("", l.rstrip("\n")) for l in f]
        text = "\n".join(lines)
        if "LEAK SUMMARY" not in text and "All heap blocks were freed" not in text:
            # Killed (Server::kill is a SIGKILL), or still running.
            unfinished.append(name)
            continue
        checked += 1
        for m in SUMMARY_DEF.finditer(text):
            total_def_bytes += num(m.group(1))
            total_def_blocks += num(m.group(2))
        load_bytes = 0
        per_sig = collections.Counter()
        for header, stack in records(lines):
            joined = "\n".join(stack)
            if not MODULE_FRAME.search(joined):
                continue
            sig = signature(stack)
            lost = LOST.match(header)
            if lost:
                size = num(lost.group(1))
                if AT_LOAD.search(joined):
                    load_bytes += size
                    load_records[sig].add(name)
                    per_sig[sig] += size
                else:
                    runtime_bytes += size
                    runtime_records[sig].add(name)
                examples.setdefault(sig, (name, header, stack))
            elif MEMORY_ERROR.match(header):
                error_records[sig].add(name)
                examples.setdefault(sig, (name, header, stack))
        for sig, size in per_sig.items():
            load_sizes[sig].add(size)
        load_per_process[load_bytes] += 1

    def show(title, found):
        for sig, logs_with in sorted(found.items(), key=lambda kv: -len(kv[1])):
            log, header, stack = examples[sig]
            sizes = ""
            if sig in load_sizes:
                sizes = " (" + " or ".join(f"{b:,}" for b in sorted(load_sizes[sig])) + " bytes per process)"
            print(f"  {title} in {len(logs_with)} process(es){sizes}, e.g. {log}:")
            print(f"    {header}")
            for frame in stack[:14]:
                print(f"      {frame}")

    print(f"leakcheck: {checked} server processes checked", end="")
    print(f" ({len(unfinished)} more were SIGKILLed by their test and have no leak summary)")
    print(f"leakcheck: definitely lost, all sources: {total_def_bytes:,} bytes in {total_def_blocks:,} blocks")
    sizes = ", ".join(f"{b:,} bytes in {n} process(es)" for b, n in sorted(load_per_process.items()))
    print(f"leakcheck: module, allocated at load (direct+indirect, per process): {sizes or 'none'}")
    show("at load", load_records)
    runtime_count = sum(len(v) for v in runtime_records.values())
    print(f"leakcheck: module, allocated at run time: {runtime_bytes:,} bytes ({runtime_count} record(s))")
    show("AT RUN TIME", runtime_records)
    print(f"leakcheck: memory errors in module frames: {sum(len(v) for v in error_records.values())}")
    show("MEMORY ERROR", error_records)

    if test_output and os.path.exists(test_output):
        with open(test_output, errors="replace") as f:
            out = f.read()
        results = re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed", out)
        passed = sum(int(p) for p, _ in results)
        failed = sum(int(x) for _, x in results)
        failures = sorted(set(re.findall(r"^test (\S+) \.\.\. FAILED", out, re.M)))
        print(f"leakcheck: tests under valgrind: {passed} passed, {failed} failed", end="")
        print(" (not judged here: servers run ~20x slower, so tight timing assertions can fail)")
        for t in failures:
            print(f"  failed: {t}")

    problems = []
    if checked == 0:
        problems.append("no server process wrote a leak summary")
    if runtime_records:
        problems.append("the module leaks at run time")
    if error_records:
        problems.append("memory errors in module code")
    if any(len(sizes) > 1 for sizes in load_sizes.values()):
        problems.append("a load-time allocation differs in size between processes")
    if strict and any(b for b in load_per_process):
        problems.append("load-time allocations are lost at unload (LEAKCHECK_STRICT)")
    if problems:
        print("leakcheck: FAILED: " + "; ".join(problems))
        return 1
    print("leakcheck: OK: no definite leak and no memory error from the module at run time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
