"""Client-side cost of the Python package: µs per call of Limiter.fixed
against the same redis-py client's INCR, on a standalone server and on a
3-primary Redis Cluster, each started here on free loopback ports and
stopped at the end. Prints one JSON object:

  {"client": "redis-py", "redis_py": "8.1.0",
   "standalone": {"rl_us": .., "incr_us": ..},
   "cluster": {"rl_us": .., "incr_us": .., "getkeys_calls": 0, "moved": 0,
               "plain_rl_us": .., "plain_getkeys_per_call": ..}}

Each figure is the median over CALLS calls (one connection, no pipelining: a
round trip each), INCR and RL.FIXED alternating and timed one by one, after
a warm-up. In the
cluster, keys spread over all three primaries; getkeys_calls and moved are
what every node's INFO commandstats/errorstats counted during the measured
librl calls. plain_* is the same RL.FIXED sent with a fresh RedisCluster's
own execute_command, without the package: what redis-py alone costs.

    python3 bench/clients/python_bench.py --module target/release/librl.so \
        --redis-server /usr/bin/redis-server
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict

ROOT = Path(__file__).resolve().parents[2]
CALLS = 2000
KEYS = 1000


def measure(client: Any, limiter: Any, prefix: str) -> Dict[str, float]:
    """INCR and Limiter.fixed alternately, each call timed on its own: both
    see the same machine load, and the medians ignore the spikes."""
    clock = time.perf_counter
    rl_samples, incr_samples = [], []
    for i in range(-300, CALLS):  # the first 300 warm up
        t0 = clock()
        client.incr(f"{prefix}:incr:{i % KEYS}")
        t1 = clock()
        limiter.fixed(f"{prefix}:rl:{i % KEYS}", 10**9, 60)
        t2 = clock()
        if i >= 0:
            incr_samples.append(t1 - t0)
            rl_samples.append(t2 - t1)
    return {
        "rl_us": round(statistics.median(rl_samples) * 1e6, 1),
        "incr_us": round(statistics.median(incr_samples) * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", required=True, help="librl.so")
    parser.add_argument("--redis-server", required=True, help="the redis-server binary")
    args = parser.parse_args()
    os.environ["LIBRL_MODULE"] = str(Path(args.module).resolve())
    os.environ["REDIS_SERVER"] = args.redis_server
    sys.path[:0] = [str(ROOT / "clients/python/src"), str(ROOT / "clients/python/tests")]

    import redis
    from redis.cluster import RedisCluster

    import librl
    from servers import start_cluster, start_server

    result: Dict[str, Any] = {"client": "redis-py", "redis_py": redis.__version__}
    server = start_server("redis")
    try:
        with server.client() as r:
            result["standalone"] = measure(r, librl.Limiter(r), "bench")
    finally:
        server.stop()

    cluster = start_cluster("redis")
    try:
        rc = RedisCluster(host="127.0.0.1", port=cluster.port)
        limiter = librl.Limiter(rc)
        limiter.fixed("bench:warm", 10**9, 60)
        cluster.reset_stats()
        figures = measure(rc, limiter, "bench")
        stats = cluster.stats()
        figures["getkeys_calls"] = stats["getkeys"]
        figures["moved"] = stats["moved"]
        rc.close()

        plain = RedisCluster(host="127.0.0.1", port=cluster.port)
        plain.execute_command("RL.FIXED", "bench:warm", 10**9, 60)
        cluster.reset_stats()
        calls = 500
        samples = []
        for i in range(calls):
            t0 = time.perf_counter()
            plain.execute_command("RL.FIXED", f"bench:plain:{i}", 10**9, 60)
            samples.append(time.perf_counter() - t0)
        figures["plain_rl_us"] = round(statistics.median(samples) * 1e6, 1)
        figures["plain_getkeys_per_call"] = round(cluster.stats()["getkeys"] / calls, 2)
        plain.close()
        result["cluster"] = figures
    finally:
        cluster.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
