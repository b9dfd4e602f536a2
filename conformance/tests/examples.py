"""`scripts/serve-example NAME` as a black box (docs/http.md, Conformance
and examples): started with a configuration file, a free loopback port and
a Redis location, waited for until it accepts connections, and stopped
with everything it started (its own process group)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from servers import free_port

from contract import ROOT

SERVE = ROOT / "scripts" / "serve-example"
#: What each framework has beyond the contract's core (a case's `requires`);
#: a framework not listed has none.
CAPABILITIES: Dict[str, frozenset[str]] = {
    name: frozenset({"fail-local"})
    for name in (
        "axum",
        "hyper",
        "tonic",
        "fastapi",
        "django",
        "flask",
        "express",
        "fastify",
        "go",
        "java",
        "java-webflux",
    )
}
#: Every framework with an example: scripts/examples/NAME.sh.
FRAMEWORKS = tuple(sorted(p.stem for p in (ROOT / "scripts" / "examples").glob("*.sh")))
_live: List[subprocess.Popen[bytes]] = []
#: How long a reload's line may take to appear on the app's stderr.
RELOAD_S = 5.0
#: Starts of one example before a taken port fails the case.
PORT_ATTEMPTS = 3


def stop_all() -> None:
    for proc in list(_live):
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    # The example runs in a session of its own: its group is everything it started.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=5)
            break
        except subprocess.TimeoutExpired:
            continue
    if proc in _live:
        _live.remove(proc)


def listeners(port: int, session: int) -> List[int]:
    """The processes of a session that listen on a loopback TCP port: the
    socket's inode from /proc/net/tcp{,6}, then the processes holding it."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for row in f.read().splitlines()[1:]:
                fields = row.split()
                # local address "ADDR:PORT" in hex, state 0A is LISTEN
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                    inodes.add(f"socket:[{fields[9]}]")
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        with contextlib.suppress(OSError):
            if os.getsid(pid) != session:
                continue
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in fds):
                pids.append(pid)
    return pids


def accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class StartupFailed(Exception):
    def __init__(self, code: Optional[int], stderr: str) -> None:
        super().__init__(f"exited with {code}: {stderr[-2000:]}")
        self.code = code
        self.stderr = stderr


class Example:
    """One run of `scripts/serve-example NAME` with one configuration."""

    def __init__(self, name: str, config: Any, redis_env: Dict[str, str]) -> None:
        self.name = name
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix=f"librl-blackbox-{name}-")
        self.config_path = Path(self.dir) / "policies.json"
        self.config_path.write_text(json.dumps(config), encoding="utf-8")
        self.stderr_path = Path(self.dir) / "stderr"
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "REDIS_CLUSTER_NODES")}
        env.update(redis_env, LIBRL_POLICIES=str(self.config_path), PORT=str(self.port))
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [str(SERVE), name],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        _live.append(self.proc)

    def stderr(self) -> str:
        with contextlib.suppress(OSError):
            return self.stderr_path.read_text(errors="replace")
        return ""

    def reload(self, config: Any, timeout: float = RELOAD_S) -> str:
        """A `reload` step (conformance/README.md, Steps): the configuration
        written where LIBRL_POLICIES names it, SIGHUP sent to the process
        that listens on the port (the app, whatever wraps it), and the first
        line about it on its stderr (`librl: configuration reloaded` or an
        error starting `librl: configuration: `); "" when none comes."""
        seen = len(self.stderr())
        self.config_path.write_text(json.dumps(config), encoding="utf-8")
        pids = listeners(self.port, os.getsid(self.proc.pid))
        if not pids:
            return ""
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGHUP)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.stderr()[seen:].splitlines():
                if line.startswith("librl: configuration"):
                    return line.strip()
            if self.proc.poll() is not None:
                return ""
            time.sleep(0.02)
        return ""

    def wait_ready(self, timeout: float) -> None:
        """Until the example itself listens on its port; StartupFailed if it
        exits. A port is picked free and bound later, so another suite's
        server may take it in between: a connection that merely succeeds
        could be answered by that server, not the example."""
        deadline = time.monotonic() + timeout
        while not (accepts(self.port) and listeners(self.port, self.proc.pid)):
            code = self.proc.poll()
            if code is not None:
                raise StartupFailed(code, self.stderr())
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.name} did not listen within {timeout} s: {self.stderr()[-2000:]}"
                )
            time.sleep(0.02)

    def wait_exit(self, timeout: float) -> int:
        """Its exit status, for a configuration it must refuse at start-up;
        TimeoutError if it listens (or runs on) instead."""
        deadline = time.monotonic() + timeout
        while True:
            code = self.proc.poll()
            if code is not None:
                return code
            if accepts(self.port):
                # Ports are picked free and bound later, so the listener may be
                # another suite's while the example still compiles: it started
                # only if it still runs 30 s later.
                try:
                    return self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
                raise TimeoutError(f"{self.name} started instead of refusing the configuration")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} neither exited nor listened within {timeout} s")
            time.sleep(0.02)

    def stop(self) -> None:
        _stop(self.proc)
        for path in (self.config_path, self.stderr_path):
            with contextlib.suppress(OSError):
                path.unlink()
        with contextlib.suppress(OSError):
            os.rmdir(self.dir)


@contextlib.contextmanager
def serving(name: str, config: Any, redis_env: Dict[str, str], timeout: float) -> Iterator[Example]:
    example = started(name, config, redis_env, timeout)
    try:
        yield example
    finally:
        example.stop()


def started(name: str, config: Any, redis_env: Dict[str, str], timeout: float) -> Example:
    """An example listening on its port; started again on another port when
    the one picked was taken before the example could bind it."""
    for attempt in range(PORT_ATTEMPTS):
        example = Example(name, config, redis_env)
        try:
            example.wait_ready(timeout)
            return example
        except StartupFailed as failed:
            example.stop()
            if attempt + 1 == PORT_ATTEMPTS or "in use" not in failed.stderr.lower():
                raise
        except BaseException:
            example.stop()
            raise
    raise AssertionError("unreachable")


def build(name: str) -> None:
    """Whatever the example builds on its first start (cargo, tsc, go
    build), done before any case is timed: one start with a configuration
    it refuses."""
    example = Example(name, {"policies": [{"name": "p"}]}, {"REDIS_URL": "redis://127.0.0.1:1"})
    try:
        example.wait_exit(1800)
    finally:
        example.stop()
