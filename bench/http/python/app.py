"""make bench-http's FastAPI, Flask and Django apps (bench/README.md, "make
bench-http"): the routes /open and /half served one of four ways.

    python app.py fastapi|flask|django none|librl|peer|floor

- none: no limiter;
- librl: librl's integration (clients/python/src) on LIBRL_POLICIES;
- peer: slowapi (FastAPI), flask-limiter (Flask), django-ratelimit
  (Django, on Django's own Redis cache), each on Redis;
- floor: a bare handler sending the same RL.ALL through the same client
  (redis-py; its asyncio client under FastAPI), so the middleware's own
  cost is the difference.

(No ``from __future__ import annotations`` here: FastAPI must see the
views' ``Request`` annotations as classes.)

FastAPI is served by uvicorn with uvloop and httptools (uvicorn[standard],
as deployed), Flask and Django by waitress (4 threads), as the examples
are; one process, no access log. Env: PORT, REDIS_URL, LIBRL_POLICIES. The
limits are the policies file's: /open 1,000,000,000 a minute per client
address (never refuses), /half 1 per 10 s per X-Client header.
"""

import os
import sys
from collections.abc import Callable
from typing import Any

OPEN_RATE, HALF_RATE = "1000000000/minute", "1/10 seconds"
OPEN_ARGS = ("1000000000", "60000ms", "COST", "1")
HALF_ARGS = ("1", "10000ms", "COST", "1")
URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
POLICIES = os.environ.get("LIBRL_POLICIES", "")


def open_key(address: str) -> str:
    return f"rl:{{ip:{address}}}:open"


def half_key(client: str) -> str:
    return f"rl:{{header:x-client:{client}}}:half"


def fastapi_app(variant: str) -> Any:
    from fastapi import FastAPI, Request, Response
    from fastapi.responses import PlainTextResponse

    app = FastAPI()
    if variant == "librl":
        from librl.http.fastapi import RateLimit

        RateLimit(POLICIES, url=URL).install(app)
    if variant == "peer":
        from slowapi import Limiter, _rate_limit_exceeded_handler
        from slowapi.errors import RateLimitExceeded
        from slowapi.util import get_remote_address

        limiter = Limiter(
            key_func=get_remote_address, storage_uri=URL, headers_enabled=True,
            strategy="fixed-window",
        )  # fmt: skip
        app.state.limiter = limiter
        app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)  # type: ignore[arg-type]

        @app.get("/open")
        @limiter.limit(OPEN_RATE)
        async def open_peer(request: Request, response: Response) -> Any:
            return PlainTextResponse("ok")

        @app.get("/half")
        @limiter.limit(HALF_RATE, key_func=lambda request: request.headers.get("x-client", ""))
        async def half_peer(request: Request, response: Response) -> Any:
            return PlainTextResponse("ok")

        return app
    if variant == "floor":
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(URL)

        async def floor(key: str, args: tuple) -> Response:
            reply = await client.execute_command("RL.ALL", "FIXED", key, *args)
            return PlainTextResponse("ok") if reply[0] == 1 else Response(status_code=429)

        @app.get("/open")
        async def open_floor(request: Request) -> Response:
            return await floor(open_key(request.client.host if request.client else ""), OPEN_ARGS)

        @app.get("/half")
        async def half_floor(request: Request) -> Response:
            return await floor(half_key(request.headers.get("x-client", "")), HALF_ARGS)

        return app

    @app.get("/open")
    @app.get("/half")
    async def ok() -> Response:
        return PlainTextResponse("ok")

    return app


def flask_app(variant: str) -> Any:
    from flask import Flask, Response, request

    app = Flask(__name__)

    def ok() -> Response:
        return Response("ok", content_type="text/plain; charset=utf-8")

    def route(path: str, view: Callable[[], Response], name: str) -> None:
        app.add_url_rule(path, name, view)

    if variant == "librl":
        from librl.http.flask import RateLimit

        RateLimit(app, config=POLICIES, url=URL)
    if variant == "peer":
        from flask_limiter import Limiter
        from flask_limiter.util import get_remote_address

        limiter = Limiter(
            get_remote_address, app=app, storage_uri=URL, headers_enabled=True,
            strategy="fixed-window",
        )  # fmt: skip
        route("/open", limiter.limit(OPEN_RATE)(ok), "open")
        by_header = limiter.limit(HALF_RATE, key_func=lambda: request.headers.get("X-Client", ""))
        route("/half", by_header(ok), "half")
        return app
    if variant == "floor":
        import redis

        client = redis.Redis.from_url(URL)

        def floor(key: str, args: tuple) -> Response:
            reply = client.execute_command("RL.ALL", "FIXED", key, *args)
            return ok() if reply[0] == 1 else Response(status=429)

        route("/open", lambda: floor(open_key(request.remote_addr or ""), OPEN_ARGS), "open")
        route("/half", lambda: floor(half_key(request.headers.get("X-Client", "")), HALF_ARGS), "half")
        return app
    route("/open", ok, "open")
    route("/half", ok, "half")
    return app


# Django: the views and the URL configuration live in this module
# (ROOT_URLCONF), chosen at start-up.
urlpatterns: list = []


def django_refused(request: Any, exception: Any) -> Any:
    """django-ratelimit's RATELIMIT_VIEW: its refusal as a 429 (its default is 403)."""
    from django.http import HttpResponse

    return HttpResponse("Too Many Requests", status=429)


def django_app(variant: str) -> Any:
    import django
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler
    from django.http import HttpResponse
    from django.urls import path

    # CommonMiddleware, as in every Django project's settings: it sets
    # Content-Length, without which waitress closes each connection.
    middleware = ["django.middleware.common.CommonMiddleware"]
    if variant == "librl":
        middleware.append("librl.http.django.RateLimitMiddleware")
    if variant == "peer":
        middleware.append("django_ratelimit.middleware.RatelimitMiddleware")
    settings.configure(
        DEBUG=False,
        SECRET_KEY="librl-bench",
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=["django_ratelimit"] if variant == "peer" else [],
        MIDDLEWARE=middleware,
        LOGGING_CONFIG=None,
        CACHES={"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": URL}},
        RATELIMIT_VIEW=f"{__name__}.django_refused",
        LIBRL={"config": POLICIES, "url": URL},
    )
    django.setup()

    def ok(request: Any) -> Any:
        return HttpResponse("ok", content_type="text/plain; charset=utf-8")

    views = {"open": ok, "half": ok}
    if variant == "peer":
        from django_ratelimit.decorators import ratelimit

        views = {
            "open": ratelimit(key="ip", rate="1000000000/m", block=True)(ok),
            "half": ratelimit(key="header:x-client", rate="1/10s", block=True)(ok),
        }
    if variant == "floor":
        import redis

        client = redis.Redis.from_url(URL)

        def floor(key: str, args: tuple) -> Any:
            reply = client.execute_command("RL.ALL", "FIXED", key, *args)
            return ok(None) if reply[0] == 1 else HttpResponse(status=429)

        views = {
            "open": lambda request: floor(open_key(request.META.get("REMOTE_ADDR", "")), OPEN_ARGS),
            "half": lambda request: floor(half_key(request.headers.get("X-Client", "")), HALF_ARGS),
        }
    urlpatterns[:] = [path(name, view) for name, view in views.items()]
    return WSGIHandler()


def main(args: list) -> None:
    builders = {"fastapi": fastapi_app, "flask": flask_app, "django": django_app}
    if len(args) != 2 or args[0] not in builders or args[1] not in ("none", "librl", "peer", "floor"):
        sys.exit("usage: python app.py fastapi|flask|django none|librl|peer|floor")
    app = builders[args[0]](args[1])
    port = int(os.environ["PORT"])
    if args[0] == "fastapi":
        import uvicorn

        uvicorn.run(app, host="127.0.0.1", port=port, loop="uvloop", http="httptools",
                    access_log=False, log_level="warning")  # fmt: skip
    else:
        import waitress

        waitress.serve(app, host="127.0.0.1", port=port, threads=4)


if __name__ == "__main__":
    main(sys.argv[1:])
