"""The ASGI middleware keeps serving while the slot of its subject moves key
by key (docs/operations.md, While a slot moves): its RL.ALL names an
override that was never set, so the half-moved slot answers TRYAGAIN for
the whole move, and the package splits the call. Requests go through a real
uvicorn server from two clients at once; none fails (fail: closed would
answer 503), each 429 is the 300 ms policy's with its Retry-After, no
request outlasts the middleware's timeout, and the 1 h policy counts
exactly the requests served."""

from __future__ import annotations

import http.client
import threading
import time
from typing import Any, Callable, Dict, List

from redis.cluster import RedisCluster

import librl
from http_servers import Running
from librl.http.asgi import RateLimitMiddleware
from servers import Cluster
from test_migration import BATCH, BIG, FILL, PAUSE

SUBJECT = "{ip:127.0.0.1}"
# A second, not the default 250 ms: the split is what is tested, and a
# loaded 2-core machine alone has delayed a request by 200 ms.
TIMEOUT_S = 1.0
CONFIG: Dict[str, Any] = {
    "fail": "closed",
    "timeout": "1s",
    "exempt_loopback": False,
    "policies": [
        {"name": "hour", "algorithm": "fixed", "limit": BIG, "window": "1h", "overridable": True},
        {"name": "burst", "algorithm": "fixed", "limit": 5, "window": "300ms", "overridable": True},
    ],
}


async def ok(scope: Any, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def test_asgi_middleware_keeps_serving_while_its_slot_moves(cluster: Cluster) -> None:
    failures: List[str] = []
    app = RateLimitMiddleware(
        ok,
        CONFIG,
        cluster_nodes=f"127.0.0.1:{cluster.port}",
        on_decision=lambda e: failures.append(f"{e.outcome}: {e.error}") if e.error else None,
    )
    server = Running(app, asgi=True)
    tally = {"served": 0, "refused": 0}
    others: List[str] = []
    slowest = [0.0]
    lock = threading.Lock()

    def request() -> None:
        started = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            conn.request("GET", "/")
            response = conn.getresponse()
            response.read()
        finally:
            conn.close()
        took = time.monotonic() - started
        with lock:
            slowest[0] = max(slowest[0], took)
            if response.status == 200:
                tally["served"] += 1
            elif (
                response.status == 429
                and response.getheader("retry-after") == "1"
                and response.getheader("ratelimit-policy")
            ):
                tally["refused"] += 1
            else:
                others.append(f"{response.status} {response.getheaders()}")

    rc = RedisCluster(host="127.0.0.1", port=cluster.port)
    try:
        slot = rc.keyslot(SUBJECT)
        cluster.fill(SUBJECT, FILL)
        request()  # the subject exists before the slot moves
        assert tally["served"] == 1, (others, failures)
        tally["served"], slowest[0] = 0, 0.0
        cluster.reset_stats()
        stop = threading.Event()

        def work() -> None:
            while not stop.is_set():
                request()
                time.sleep(0.001)
            request()  # one more, on the slot's new owner

        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        started = time.monotonic()
        try:
            cluster.move_slot(slot, cluster.elsewhere(slot), batch=BATCH, pause=PAUSE)
        finally:
            took = time.monotonic() - started
            stop.set()
            for t in threads:
                t.join()
        stats = cluster.stats()
        total = tally["served"] + tally["refused"] + len(others)
        report = (
            f"{cluster.flavor}: slot {slot} ({FILL} keys) moved in {took:.2f} s: "
            f"{total} requests, {tally['served']} served, "
            f"{tally['refused']} refused (429), {len(others)} other, {len(failures)} failed in the "
            f"middleware, slowest {slowest[0] * 1000:.0f} ms; TRYAGAIN {stats['tryagain']}, "
            f"ASK {stats['ask']}, MOVED {stats['moved']}, RL.ALL {stats.get('cmdstat_rl.all', 0)}, "
            f"RL.OVERRIDE GET {stats.get('cmdstat_rl.override|get', 0)}"
        )
        print(report)
        assert not others, f"{report}\n{others[0]}"
        assert not failures, f"{report}\n{failures[0]}"
        assert tally["refused"] > 0, f"the 300 ms policy never denied: {report}"
        assert slowest[0] < TIMEOUT_S, report
        hour = librl.Limiter(rc).all(librl.Fixed(f"rl:{SUBJECT}:hour", BIG, "1h", cost=0))
        # The first request and every one served during the move.
        assert hour.decisions[0].count == tally["served"] + 1, report
    finally:
        server.stop()
        rc.close()
