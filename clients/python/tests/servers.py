"""Real servers for the tests and the bench: redis-server or valkey-server
with librl loaded, on free loopback ports, standalone or as a 3-primary
Redis Cluster. Every process started here is killed when the Python process
exits (atexit, which also removes their directories), and also if it dies
without running atexit (the kernel's parent-death signal).

Environment: LIBRL_MODULE (the module), REDIS_SERVER and VALKEY_SERVER (the
binaries). Unset: target/release/librl.so, redis-server on PATH (Debian's
7.0), and the valkey-server path scripts/servers.env gives, the one file
that names the server binaries for the Makefile and every test suite.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import redis
from redis.cluster import RedisCluster

ROOT = Path(__file__).resolve().parents[3]


def _servers_env() -> Dict[str, str]:
    """scripts/servers.env's VARIABLE=path lines, each path made absolute
    (the file writes them relative to the repository root)."""
    paths: Dict[str, str] = {}
    for line in (ROOT / "scripts/servers.env").read_text().splitlines():
        name, equals, path = line.partition("=")
        if equals and not line.startswith("#"):
            paths[name.strip()] = str(ROOT / path.strip())
    return paths


MODULE = os.environ.get("LIBRL_MODULE") or str(ROOT / "target/release/librl.so")
BINARIES: Dict[str, str] = {
    "redis": os.environ.get("REDIS_SERVER") or "redis-server",
    "valkey": os.environ.get("VALKEY_SERVER") or _servers_env()["VALKEY_SERVER"],
}
FLAVORS = ("redis", "valkey")

_live: List[subprocess.Popen[bytes]] = []
_dirs: List[str] = []


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _kill_all() -> None:
    for proc in list(_live):
        _stop(proc)
    for path in _dirs:
        shutil.rmtree(path, ignore_errors=True)


atexit.register(_kill_all)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    with contextlib.suppress(Exception):
        proc.wait(timeout=10)
    if proc in _live:
        _live.remove(proc)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


_handed_out: set[int] = set()


def free_port(cluster: bool = False) -> int:
    """A free loopback port (and, for a cluster node, its bus port + 10000)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port in _handed_out or (cluster and (port > 55535 or not _bindable(port + 10000))):
            continue
        _handed_out.add(port)
        return port


def binary(flavor: str) -> str:
    path = BINARIES[flavor]
    if shutil.which(path) is None:
        raise RuntimeError(f"{path} is missing: run scripts/install-deps.sh test")
    if not Path(MODULE).exists():
        raise RuntimeError(f"{MODULE} is missing: build it first (cargo build --release)")
    return path


class Server:
    """One server process with librl loaded."""

    def __init__(self, flavor: str, *extra: str, cluster: bool = False) -> None:
        self.flavor = flavor
        self.port = free_port(cluster)
        self.dir = tempfile.mkdtemp(prefix=f"librl-py-{flavor}-")
        _dirs.append(self.dir)
        args = [
            binary(flavor),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self.dir,
            "--logfile",
            "server.log",
            "--loadmodule",
            MODULE,
        ]
        if cluster:
            args += [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
            ]
        self.proc = subprocess.Popen(
            [*args, *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        _live.append(self.proc)

    def client(self, **kwargs: object) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)  # type: ignore[arg-type]

    def wait_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        with self.client(socket_timeout=1) as r:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.flavor} server exited: {self.log_tail()}")
                try:
                    r.ping()
                    return
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (Path(self.dir) / "server.log").read_text()[-2000:]
        return ""

    def stop(self) -> None:
        _stop(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


def start_server(flavor: str, *extra: str) -> Server:
    server = Server(flavor, *extra)
    try:
        server.wait_ready()
    except BaseException:
        server.stop()
        raise
    return server


def _info(r: redis.Redis, section: str) -> Dict[str, Dict[str, int]]:
    """INFO commandstats or errorstats: name -> its fields."""
    return {
        str(name): {str(k): int(v) for k, v in fields.items()}
        for name, fields in r.info(section).items()
        if isinstance(fields, dict)
    }


class Cluster:
    """Three primaries, slots 0-5460, 5461-10922 and 10923-16383."""

    RANGES: Tuple[Tuple[int, int], ...] = ((0, 5460), (5461, 10922), (10923, 16383))

    def __init__(self, flavor: str) -> None:
        self.flavor = flavor
        self.nodes: List[Server] = []
        try:
            self.nodes = [Server(flavor, cluster=True) for _ in self.RANGES]
            for node in self.nodes:
                node.wait_ready()
            self._form()
        except BaseException:
            self.stop()
            raise

    @property
    def port(self) -> int:
        return self.nodes[0].port

    def clients(self) -> List[redis.Redis]:
        return [node.client(decode_responses=True) for node in self.nodes]

    def _form(self) -> None:
        clients = self.clients()
        try:
            for epoch, (r, (lo, hi)) in enumerate(zip(clients, self.RANGES), 1):
                # Distinct epochs from the start, as redis-cli --cluster
                # create sets them: no equal epochs left to resolve by gossip
                # while a test moves a slot (a late bump can hand the slot
                # back to its old owner).
                r.execute_command("CLUSTER", "SET-CONFIG-EPOCH", epoch)
                r.execute_command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
            for node in self.nodes[1:]:
                clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
            deadline = time.monotonic() + 30
            while not all(self._settled(r) for r in clients):
                if time.monotonic() > deadline:
                    raise RuntimeError("cluster did not reach cluster_state:ok")
                time.sleep(0.05)
        finally:
            for r in clients:
                r.close()

    def _settled(self, r: redis.Redis) -> bool:
        info = r.execute_command("CLUSTER", "INFO")
        if isinstance(info, bytes):
            info = info.decode()
        fields = dict(line.split(":", 1) for line in str(info).split() if ":" in line)
        if fields.get("cluster_state") != "ok" or fields.get("cluster_known_nodes") != "3":
            return False
        slots = r.execute_command("CLUSTER", "SLOTS")
        return len(slots) == len(self.RANGES)

    def node_ids(self) -> Dict[int, str]:
        out = {}
        for node in self.nodes:
            with node.client(decode_responses=True) as r:
                out[node.port] = str(r.execute_command("CLUSTER", "MYID"))
        return out

    def owner(self, slot: int) -> Server:
        with self.nodes[0].client(decode_responses=True) as r:
            for lo, hi, primary, *_ in r.execute_command("CLUSTER", "SLOTS"):
                if lo <= slot <= hi:
                    port = int(primary[1])
                    return next(n for n in self.nodes if n.port == port)
        raise LookupError(slot)

    def reset_stats(self) -> None:
        for r in self.clients():
            with r:
                r.execute_command("CONFIG", "RESETSTAT")

    def stats(self) -> Dict[str, int]:
        """Summed over every node: COMMAND GETKEYS calls, MOVED, ASK and
        TRYAGAIN errors replied, and calls of each RL command."""
        totals: Dict[str, int] = {"getkeys": 0, "moved": 0, "ask": 0, "tryagain": 0}
        for r in self.clients():
            with r:
                for name, fields in _info(r, "commandstats").items():
                    calls = fields["calls"]
                    if name in ("cmdstat_command|getkeys", "cmdstat_command|getkeysandflags"):
                        totals["getkeys"] += calls
                    else:
                        totals[name] = totals.get(name, 0) + calls
                for name, fields in _info(r, "errorstats").items():
                    count = fields["count"]
                    if name == "errorstat_MOVED":
                        totals["moved"] += count
                    elif name == "errorstat_ASK":
                        totals["ask"] += count
                    elif name == "errorstat_TRYAGAIN":
                        totals["tryagain"] += count
        return totals

    def fill(self, tag: str, n: int) -> None:
        """``n`` keys under the hash tag ``tag``, so that moving its slot key
        by key takes seconds (docs/contributing.md, Calls while a slot
        moves)."""
        rc = RedisCluster(host="127.0.0.1", port=self.port)
        try:
            pipe = rc.pipeline()
            for i in range(n):
                pipe.set(f"{tag}:fill:{i}", "x")
            pipe.execute()
        finally:
            rc.close()

    def elsewhere(self, slot: int) -> Server:
        """A node that does not own ``slot``: where to move it."""
        owner = self.owner(slot)
        return next(n for n in self.nodes if n is not owner)

    def move_slot(
        self,
        slot: int,
        target: Server,
        between: Optional[object] = None,
        batch: int = 100,
        pause: float = 0.0,
    ) -> None:
        """Reshard one slot to ``target`` as redis-cli --cluster does:
        IMPORTING/MIGRATING, MIGRATE every key, SETSLOT NODE on every node.
        ``between`` (a callable) runs after the first key has moved and
        before the slot's ownership changes: calls then get ASK. ``batch``
        keys go per MIGRATE, with ``pause`` seconds after each: a slot of
        thousands of keys then takes seconds to move, as in production, and
        calls meet it half moved."""
        source = self.owner(slot)
        ids = self.node_ids()
        with source.client() as src, target.client() as dst:
            dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source.port])
            src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target.port])
            first = True
            while True:
                keys = src.execute_command(
                    "CLUSTER", "GETKEYSINSLOT", slot, 1 if first and between else batch
                )
                if not keys:
                    break
                src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
                if first and callable(between):
                    between()
                first = False
                if pause:
                    time.sleep(pause)
            if first and callable(between):
                between()
            for node in (target, source, *[n for n in self.nodes if n not in (source, target)]):
                with node.client() as r:
                    r.execute_command("CLUSTER", "SETSLOT", slot, "NODE", ids[target.port])

    @contextlib.contextmanager
    def open_migration(self, slot: int, target: Server) -> Iterator[None]:
        """The slot marked MIGRATING to ``target`` and IMPORTING there, and
        no key moved: a resharding stalled half-way, until the block ends
        (then SETSLOT STABLE on both)."""
        source = self.owner(slot)
        ids = self.node_ids()
        with source.client() as src, target.client() as dst:
            dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source.port])
            src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target.port])
            try:
                yield
            finally:
                for r in (src, dst):
                    r.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def start_cluster(flavor: str) -> Cluster:
    return Cluster(flavor)
