"""The little the benchmark needs to drive redis-server: a RESP client with
pipelining, a server process on a free loopback port, redis-benchmark, and
INFO commandstats. Standard library only."""

import os
import shutil
import socket
import subprocess
import tempfile
import time

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_BENCHMARK = shutil.which("redis-benchmark") or "/usr/bin/redis-benchmark"


class ReplyError(Exception):
    pass


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if not isinstance(a, bytes):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port, timeout=600):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.file = self.sock.makefile("rb", buffering=1 << 20)

    def close(self):
        self.file.close()
        self.sock.close()

    def read(self):
        """One reply; an error reply is returned as a ReplyError, not raised,
        so that a pipeline stays in step."""
        line = self.file.readline()
        if not line:
            raise ConnectionError("the server closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return ReplyError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise ConnectionError(f"unexpected reply line {line!r}")

    def call(self, *args):
        self.sock.sendall(encode(args))
        reply = self.read()
        if isinstance(reply, ReplyError):
            raise reply
        return reply

    def pipeline(self, commands, batch=5000):
        """Sends commands (lists of args) in batches; returns the replies.
        Raises on the first error reply, after reading the whole batch."""
        replies = []
        chunk = []
        for args in commands:
            chunk.append(encode(args))
            if len(chunk) == batch:
                replies.extend(self._flush(chunk))
                chunk = []
        if chunk:
            replies.extend(self._flush(chunk))
        return replies

    def _flush(self, chunk):
        self.sock.sendall(b"".join(chunk))
        replies = [self.read() for _ in chunk]
        for r in replies:
            if isinstance(r, ReplyError):
                raise r
        return replies


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """redis-server with the module (a path, or a list of paths) loaded, in
    a fresh directory. `prepare` may write files (an AOF to load) into the
    directory first; `wrapper` runs the server under another program
    (valgrind)."""

    def __init__(self, module, name, extra=(), prepare=None, wrapper=(), start_timeout=600):
        modules = [module] if isinstance(module, str) else list(module)
        self.dir = tempfile.mkdtemp(prefix=f"librl-bench-{name}-")
        if prepare:
            prepare(self.dir)
        self.port = free_port()
        cmd = [
            *wrapper,
            REDIS_SERVER,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", self.dir,
            "--logfile", "server.log",
            "--save", "",
            "--appendonly", "no",
            *extra,
            *(a for m in modules for a in ("--loadmodule", m)),
        ]
        started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready(start_timeout)
        self.start_seconds = time.monotonic() - started

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited; log:\n{self.log()}")
            try:
                c = Conn(self.port, timeout=5)
                try:
                    # PING answers LOADING while an AOF is read back.
                    if c.call("PING") == "PONG":
                        return
                except ReplyError:
                    pass
                finally:
                    c.close()
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start in {timeout}s; log:\n{self.log()}")

    def log(self):
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def conn(self):
        return Conn(self.port)

    def stop(self):
        if self.proc.poll() is None:
            try:
                c = Conn(self.port, timeout=30)
                c.sock.sendall(encode(["SHUTDOWN", "NOSAVE"]))
                c.close()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def redis_benchmark(port, command, calls, keyspace, clients=50, pipeline=16):
    """Runs redis-benchmark with one command; returns its requests/second."""
    cmd = [
        REDIS_BENCHMARK,
        "-h", "127.0.0.1",
        "-p", str(port),
        "-c", str(clients),
        "-P", str(pipeline),
        "-n", str(calls),
        "-r", str(keyspace),
        "--csv",
        *command,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = [line for line in out.splitlines() if line.startswith('"') and not line.startswith('"test"')]
    if not rows:
        raise RuntimeError(f"redis-benchmark printed no result:\n{out}")
    return float(rows[-1].split('","')[1])


def commandstats(conn):
    """INFO commandstats as {lower-case command: {calls, usec, usec_per_call, ...}}."""
    info = conn.call("INFO", "commandstats").decode()
    stats = {}
    for line in info.splitlines():
        if not line.startswith("cmdstat_"):
            continue
        name, fields = line[len("cmdstat_"):].split(":", 1)
        stats[name.lower()] = {k: float(v) for k, v in (f.split("=") for f in fields.split(","))}
    return stats
