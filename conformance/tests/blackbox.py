"""The black-box runner (conformance/README.md, The black-box runner): a
case run against `scripts/serve-example NAME` over real HTTP, with its
Redis: every primary flushed, the example started with the case's
configuration on a free loopback port against a real Redis 7 with the
module (a real 3-primary cluster for `cluster` cases; a port where nothing
listens for `down`; a listener that never answers for `hang`), the steps
run, the example stopped. A start-up case
expects the example to exit non-zero, naming the field on stderr."""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Set, Tuple

from servers import Cluster, Server, free_port, start_cluster

from contract import Case
from examples import FRAMEWORKS, Example, build, serving
from hanging import HangingRedis
from steps import Mismatch, Redis, case_problems, run_steps

#: The first start builds (cargo, tsc, go build) before any case runs; after
#: it, an example that is not listening within this many seconds is broken.
READY_S = 60.0


def examples() -> List[str]:
    names = [n.strip() for n in os.environ.get("LIBRL_EXAMPLES", "").split(",") if n.strip()]
    return list(FRAMEWORKS) if names == ["all"] else names


class Clusters:
    """A 3-primary cluster, started the first time a case needs it."""

    def __init__(self) -> None:
        self.cluster: Optional[Cluster] = None

    def get(self) -> Cluster:
        if self.cluster is None:
            self.cluster = start_cluster("redis")
        return self.cluster


_built: Set[str] = set()


def built(name: str) -> None:
    if name not in _built:
        build(name)
        _built.add(name)


def redis_for(
    case: Case, standalone: Server, clusters: Clusters, hanging: Optional[HangingRedis] = None
) -> Tuple[Optional[Redis], Dict[str, str]]:
    kind = case.get("redis", "standalone")
    if kind == "down":
        return None, {"REDIS_URL": f"redis://127.0.0.1:{free_port()}"}
    if kind == "hang":
        assert hanging is not None
        # The steps' own commands go to the real server; the app's hang.
        return Redis([standalone.port], cluster=False), {
            "REDIS_URL": f"redis://127.0.0.1:{hanging.port}"
        }
    if kind == "cluster":
        nodes = [n.port for n in clusters.get().nodes]
        env = {"REDIS_CLUSTER_NODES": ",".join(f"127.0.0.1:{p}" for p in nodes)}
        return Redis(nodes, cluster=True), env
    return Redis([standalone.port], cluster=False), {
        "REDIS_URL": f"redis://127.0.0.1:{standalone.port}"
    }


def run_case(name: str, case: Case, standalone: Server, clusters: Clusters) -> None:
    """One case against one example; AssertionError (or Mismatch) when it fails."""
    problems = case_problems(case)
    assert not problems, f"{case['name']}: {'; '.join(problems)}"
    built(name)
    hanging = HangingRedis(standalone.port) if case.get("redis") == "hang" else None
    r, env = redis_for(case, standalone, clusters, hanging)
    try:
        if r is not None:
            r.flush()
        if "startup_error" in case:
            example = Example(name, case["config"], env)
            try:
                code = example.wait_exit(READY_S)
                stderr = example.stderr()
            finally:
                example.stop()
            assert code != 0, f"{case['name']}: exited with 0"
            assert case["startup_error"] in stderr, (
                f"{case['name']}: stderr does not name {case['startup_error']!r}: {stderr[-1000:]}"
            )
            return
        with serving(name, case["config"], env, READY_S) as example:
            hang = None if hanging is None else hanging.set_hanging
            try:
                run_steps(case, example.port, r, hang, example.reload)
            except Mismatch as mismatch:
                # The app's own account (a fail-open warning, a timeout) is
                # what tells a stalled machine from a broken rule.
                tail = example.stderr()[-1500:].strip() or "(nothing)"
                raise Mismatch(f"{mismatch}\nthe app's stderr: {tail}", mismatch.took_ms) from None
    finally:
        if r is not None:
            r.close()
        if hanging is not None:
            hanging.close()
