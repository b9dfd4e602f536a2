"""The Python apps of make bench-http, each served as the bench serves it
(app.py: waitress or uvicorn, one process) under callgrind, against a real
Redis with the module: the instructions the whole server process executes
per request (the server's own loop, the framework, the middleware, redis-py
and its socket reads), counted over a fixed number of requests sent one
after the other on one keep-alive connection.

Instruction counts do not move with the machine's load, where CPU time per
request on a shared machine does by tens of percent, so the difference
between floor and librl (the middleware's own cost, as the bench's table
defines it) can be compared between two source trees in one run. Kernel
time (the syscalls) is not counted: compare the syscalls apart.

    python server_instructions.py flask floor librl [--path /open] [--requests N]
        [--src LABEL=DIR ...]

Each ``--src LABEL=DIR`` is a librl source tree (a clients/python/src) to
serve the librl variant from; without one, this tree's. Env: REDIS_URL (a
Redis with the module), LIBRL_POLICIES (the policies file, as app.py reads
it). Needs valgrind (callgrind_control).
"""

import argparse
import glob
import http.client
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
DEPS = os.path.join(ROOT, ".deps")
WARM_UP = 300


def send(port: int, path: str, requests: int, nonce: str) -> dict:
    """``requests`` GETs on one connection; /half alternates a fresh and a
    spent subject, as load.lua does. Returns the count of each status."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    statuses: dict = {}
    for i in range(requests):
        headers = {}
        if path == "/half":
            headers["X-Client"] = f"spent-{nonce}" if i % 2 else f"c-{nonce}-{i}"
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        statuses[response.status] = statuses.get(response.status, 0) + 1
    conn.close()
    return statuses


def totals(path: str) -> int:
    with open(path) as f:
        for line in f:
            if line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def measure(
    framework: str, variant: str, src: str, port: int, path: str, requests: int, out: str
) -> float:
    """Instructions per request of one app: counters zeroed after a
    warm-up, dumped after ``requests`` requests."""
    pythonpath = os.pathsep.join([os.path.join(DEPS, "bench-http", "py"), src])
    env = dict(os.environ, PORT=str(port), PYTHONPATH=pythonpath)
    prefix = os.path.join(out, f"{variant}-{port}")
    python = os.path.join(DEPS, "venv", "bin", "python")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={prefix}.%p",
           python, os.path.join(HERE, "app.py"), framework, variant]  # fmt: skip
    with open(f"{prefix}.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            time.sleep(1)
            try:
                send(port, path, 1, f"start-{port}")
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"{variant} exited; see {prefix}.log") from None
        nonce = f"{os.getpid()}-{port}-{time.monotonic_ns()}"
        send(port, path, WARM_UP, "w" + nonce)
        subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True)
        statuses = send(port, path, requests, nonce)
        subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True)
    finally:
        proc.terminate()
        proc.wait()
    dumps = sorted(glob.glob(f"{prefix}.{proc.pid}.*"))
    if not dumps:
        raise RuntimeError(f"no callgrind dump for {variant}; see {prefix}.log")
    print(f"  {variant} {src}: statuses {statuses}", file=sys.stderr)
    return totals(dumps[-1]) / requests


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("framework", choices=("fastapi", "flask", "django"))
    ap.add_argument("variants", nargs="+", choices=("none", "floor", "librl", "peer"))
    ap.add_argument("--path", default="/open", choices=("/open", "/half"))
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--src", action="append", default=[], help="LABEL=DIR, a librl source tree")
    args = ap.parse_args()
    sources = [tuple(s.split("=", 1)) for s in args.src] or [
        ("this", os.path.join(ROOT, "clients", "python", "src"))
    ]
    jobs = []
    for variant in args.variants:
        for label, src in sources if variant == "librl" else sources[:1]:
            jobs.append((f"{variant}[{label}]" if variant == "librl" else variant, variant, src))
    out = tempfile.mkdtemp(prefix="librl-server-instructions-")
    # One app at a time: each takes a core while it runs under callgrind.
    for i, (label, variant, src) in enumerate(jobs):
        per = measure(
            args.framework, variant, os.path.abspath(src), 18900 + i, args.path, args.requests, out
        )
        print(
            f"{args.framework} {args.path} {label}: {per:,.0f} instructions per request", flush=True
        )


if __name__ == "__main__":
    main()
