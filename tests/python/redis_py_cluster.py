"""librl through redis-py's RedisCluster against a real cluster.

Run by tests/cluster.rs with the project's own virtualenv
(.deps/venv/bin/python, redis-py as installed by scripts/install-deps.sh)
and the ports of the cluster's nodes:

    python tests/python/redis_py_cluster.py PORT [PORT ...]

It drives RL.FIXED, the container form RL.OVERRIDE SET|GET|DEL|LIST (redis-py
7 and 8 refuse the dotted names RL.OVERRIDE.SET and friends before sending
them) and a malformed RL.ALL, which must come back as redis.ResponseError
with librl's own message, not as a client-side "missing key". Synchronously,
with asyncio, and in pipelines. Prints what it checked; exits 1 on the first
difference.
"""

import asyncio
import sys

import redis
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import ClusterNode, RedisCluster

MALFORMED_ALL = ("RL.ALL", "FIXED", "{py}k", "notanumber", "60")
MALFORMED_MESSAGE = "limit must be an integer from 1 to 1125899906842624 (2^50)"


def check(what, got, want):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")
    print(f"ok: {what}")


def ok_reply(reply):
    return reply in (True, "OK", b"OK")


def check_limiter(what, reply, want_first_five):
    check(what, list(reply[:5]), want_first_five)
    if len(reply) != 6 or reply[5] <= 0:
        raise AssertionError(f"{what}: not a limiter reply: {reply!r}")


def check_malformed(what, error):
    """``error``: what the malformed call raised, or returned when accepted."""
    if not isinstance(error, BaseException):
        raise AssertionError(f"{what} was accepted: {error!r}")
    kind = f"{type(error).__module__}.{type(error).__name__}"
    check(
        f"{what} is a redis.ResponseError",
        (kind, isinstance(error, redis.ResponseError)),
        (kind, True),
    )
    check(what, str(error), MALFORMED_MESSAGE)


def outcome(call, *args):
    """What ``call(*args)`` returns, or the redis.RedisError it raises."""
    try:
        return call(*args)
    except redis.RedisError as error:
        return error


def listed_everywhere(list_on, nodes, pattern):
    """Every okey RL.OVERRIDE LIST returns on any primary, by cursor."""
    names = set()
    for node in nodes:
        cursor = b"0"
        while True:
            cursor, entries = list_on(node, cursor, pattern)
            names.update(
                e[0].decode() if isinstance(e[0], bytes) else e[0] for e in entries
            )
            if cursor in (b"0", "0", 0):
                break
    return names


def run_sync(ports):
    rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports])
    try:
        check_limiter(
            "sync RL.FIXED",
            rc.execute_command("RL.FIXED", "{py}f", 3, 60),
            [1, 1, 0, 3, 2],
        )
        check(
            "sync RL.OVERRIDE SET",
            ok_reply(
                rc.execute_command("RL.OVERRIDE", "SET", "{py}o", 5, "1h", "BURST", 7)
            ),
            True,
        )
        check(
            "sync RL.OVERRIDE GET",
            list(rc.execute_command("RL.OVERRIDE", "GET", "{py}o")),
            [5, 3_600_000, 7, -1],
        )
        check_limiter(
            "sync RL.FIXED with the override",
            rc.execute_command("RL.FIXED", "{py}g", 100, 1, "OVERRIDE", "{py}o"),
            [1, 1, 0, 5, 4],
        )
        # Subcommand names are case-insensitive; okeys in other slots.
        for i in range(20):
            check(
                f"sync rl.override set {{py{i}}}o",
                ok_reply(
                    rc.execute_command("rl.override", "set", f"{{py{i}}}o", 1 + i, 60)
                ),
                True,
            )
        names = listed_everywhere(
            lambda node, cursor, pattern: rc.execute_command(
                "RL.OVERRIDE",
                "LIST",
                cursor,
                "MATCH",
                pattern,
                "COUNT",
                1000,
                target_nodes=node,
            ),
            rc.get_primaries(),
            "{py*}o",
        )
        check(
            "sync RL.OVERRIDE LIST on every primary",
            sorted(names),
            sorted(["{py}o"] + [f"{{py{i}}}o" for i in range(20)]),
        )
        for i in range(20):
            check(
                f"sync RL.OVERRIDE Del {{py{i}}}o",
                rc.execute_command(
                    "RL.OVERRIDE", "Del", f"{{py{i}}}o", f"{{py{i}}}none"
                ),
                1,
            )
        check(
            "sync RL.OVERRIDE DEL", rc.execute_command("RL.OVERRIDE", "DEL", "{py}o"), 1
        )
        check(
            "sync RL.OVERRIDE GET after DEL",
            rc.execute_command("RL.OVERRIDE", "GET", "{py}o"),
            None,
        )
        check_malformed(
            "sync malformed RL.ALL", outcome(rc.execute_command, *MALFORMED_ALL)
        )

        pipe = rc.pipeline()
        pipe.execute_command("RL.FIXED", "{pipe}f", 3, 60)
        pipe.execute_command("RL.OVERRIDE", "SET", "{pipe}o", 9, "1m")
        pipe.execute_command("RL.OVERRIDE", "GET", "{pipe}o")
        pipe.execute_command("RL.FIXED", "{pipe}g", 100, 1, "OVERRIDE", "{pipe}o")
        pipe.execute_command("RL.OVERRIDE", "DEL", "{pipe}o")
        pipe.execute_command(*MALFORMED_ALL)
        fixed, set_, got, over, deleted, malformed = pipe.execute(raise_on_error=False)
        check_limiter("pipeline RL.FIXED", fixed, [1, 1, 0, 3, 2])
        check("pipeline RL.OVERRIDE SET", ok_reply(set_), True)
        check("pipeline RL.OVERRIDE GET", list(got), [9, 60_000, 0, -1])
        check_limiter("pipeline RL.FIXED with the override", over, [1, 1, 0, 9, 8])
        check("pipeline RL.OVERRIDE DEL", deleted, 1)
        check_malformed("pipeline malformed RL.ALL", malformed)
    finally:
        rc.close()


async def run_async(ports):
    rc = AsyncRedisCluster(
        startup_nodes=[AsyncClusterNode("127.0.0.1", p) for p in ports]
    )
    try:
        check_limiter(
            "async RL.FIXED",
            await rc.execute_command("RL.FIXED", "{apy}f", 3, 60),
            [1, 1, 0, 3, 2],
        )
        check(
            "async RL.OVERRIDE SET",
            ok_reply(
                await rc.execute_command(
                    "RL.OVERRIDE", "set", "{apy}o", 6, "2h", "TTL", "1h"
                )
            ),
            True,
        )
        got = list(await rc.execute_command("RL.OVERRIDE", "GET", "{apy}o"))
        check("async RL.OVERRIDE GET", got[:3], [6, 7_200_000, 0])
        if not 3_500_000 < got[3] <= 3_600_000:
            raise AssertionError(f"async RL.OVERRIDE GET: ttl {got[3]}")
        names = set()
        for node in rc.get_primaries():
            cursor = b"0"
            while True:
                cursor, entries = await rc.execute_command(
                    "RL.OVERRIDE", "LIST", cursor, "MATCH", "{apy}*", target_nodes=node
                )
                names.update(e[0].decode() for e in entries)
                if cursor in (b"0", "0", 0):
                    break
        check("async RL.OVERRIDE LIST on every primary", sorted(names), ["{apy}o"])
        check(
            "async RL.OVERRIDE DEL",
            await rc.execute_command("RL.OVERRIDE", "DEL", "{apy}o"),
            1,
        )
        # gather() hands back what the call raised, as outcome() does.
        (malformed,) = await asyncio.gather(
            rc.execute_command(*MALFORMED_ALL), return_exceptions=True
        )
        check_malformed("async malformed RL.ALL", malformed)

        pipe = rc.pipeline()
        pipe.execute_command("RL.FIXED", "{apipe}f", 3, 60)
        pipe.execute_command("RL.OVERRIDE", "SET", "{apipe}o", 4, "1m")
        pipe.execute_command("RL.OVERRIDE", "GET", "{apipe}o")
        pipe.execute_command("RL.OVERRIDE", "DEL", "{apipe}o")
        pipe.execute_command(*MALFORMED_ALL)
        fixed, set_, got, deleted, malformed = await pipe.execute(raise_on_error=False)
        check_limiter("async pipeline RL.FIXED", fixed, [1, 1, 0, 3, 2])
        check("async pipeline RL.OVERRIDE SET", ok_reply(set_), True)
        check("async pipeline RL.OVERRIDE GET", list(got), [4, 60_000, 0, -1])
        check("async pipeline RL.OVERRIDE DEL", deleted, 1)
        check_malformed("async pipeline malformed RL.ALL", malformed)
    finally:
        await rc.aclose()


def main():
    ports = [int(p) for p in sys.argv[1:]]
    if not ports:
        sys.exit("usage: redis_py_cluster.py PORT [PORT ...]")
    print(f"redis-py {redis.__version__}")
    try:
        run_sync(ports)
        asyncio.run(run_async(ports))
    except Exception as error:  # noqa: BLE001 - every failure is reported
        print(f"FAILED: {type(error).__name__}: {error}")
        sys.exit(1)


if __name__ == "__main__":
    main()
