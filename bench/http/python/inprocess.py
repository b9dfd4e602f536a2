"""The Python apps of make bench-http without a server or a network: each
app's WSGI or ASGI callable is called in a loop, in this process, and the
CPU it took per request is printed. With ``--fake`` the Redis client's
``execute_command`` answers at once with a canned RL.ALL reply (admitted on
/open, refused on /half) for the floor and librl alike, so what is left
between them is the middleware's own Python, free of the socket and of
Redis; without it, REDIS_URL must name a Redis with the module.

    python inprocess.py fastapi|flask|django floor|librl|none [--path /open] [--requests N] [--fake]

A/B of two source trees: run it once with each on PYTHONPATH (before
clients/python/src), in turn, a few times, and compare the medians;
``--profile FILE`` writes a cProfile of the timed requests (CPU time).
Env: LIBRL_POLICIES and REDIS_URL as app.py reads them.
"""

import argparse
import io
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import app as bench_app

WARM_UP = 200


def fake_redis(path: str) -> None:
    """Both redis-py clients answer RL.ALL at once: admitted with plenty
    left on /open, refused for 9 s on /half."""
    import redis
    import redis.asyncio

    allowed = 1 if path == "/open" else 0
    reply = [allowed, 0 if allowed else 9000, [allowed, 1, 0 if allowed else 9000, 10**9, 10**9 - 1, 60000]]

    def execute(self: Any, *args: Any, **options: Any) -> Any:
        return reply

    async def execute_async(self: Any, *args: Any, **options: Any) -> Any:
        return reply

    redis.Redis.execute_command = execute  # type: ignore[method-assign]
    redis.asyncio.Redis.execute_command = execute_async  # type: ignore[method-assign]


def wsgi_runner(app: Any, path: str) -> Callable[[range], None]:
    def start_response(status: str, headers: Any, exc_info: Any = None) -> None:
        pass

    def one(i: int) -> None:
        environ = {
            "REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1",
            "HTTP_HOST": "127.0.0.1:8000", "HTTP_USER_AGENT": "wrk", "HTTP_X_CLIENT": f"c{i}",
            "wsgi.version": (1, 0), "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(b""),
            "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }  # fmt: skip
        body = app(environ, start_response)
        for _ in body:
            pass
        close = getattr(body, "close", None)
        if close is not None:
            close()

    def run(requests: range) -> None:
        for i in requests:
            one(i)

    return run


def asgi_runner(app: Any, path: str) -> Callable[[range], None]:
    import uvloop

    loop = uvloop.new_event_loop()

    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        pass

    async def one(i: int) -> None:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
            "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
            "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
            "headers": [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"wrk"),
                        (b"x-client", f"c{i}".encode())],
            "state": {},
        }  # fmt: skip
        await app(scope, receive, send)

    async def all_of(requests: range) -> None:
        for i in requests:
            await one(i)

    return lambda requests: loop.run_until_complete(all_of(requests))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("framework", choices=("fastapi", "flask", "django"))
    ap.add_argument("variant", choices=("none", "floor", "librl"))
    ap.add_argument("--path", default="/open", choices=("/open", "/half"))
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--fake", action="store_true", help="a canned reply instead of Redis")
    ap.add_argument("--profile", help="write a cProfile (CPU time) of the timed requests here")
    args = ap.parse_args()
    if args.fake:
        fake_redis(args.path)
    build = {"fastapi": bench_app.fastapi_app, "flask": bench_app.flask_app, "django": bench_app.django_app}
    app = build[args.framework](args.variant)
    run = (asgi_runner if args.framework == "fastapi" else wsgi_runner)(app, args.path)
    run(range(WARM_UP))
    profile = None
    if args.profile:
        import cProfile

        profile = cProfile.Profile(time.process_time)
        profile.enable()
    start = time.process_time()
    run(range(WARM_UP, WARM_UP + args.requests))
    cpu = time.process_time() - start
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.profile)
    print(json.dumps({
        "framework": args.framework, "variant": args.variant, "path": args.path, "fake": args.fake,
        "cpu_us_per_request": round(cpu / args.requests * 1e6, 1), "load": round(os.getloadavg()[0], 1),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
