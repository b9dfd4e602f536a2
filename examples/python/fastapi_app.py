"""The conformance app on FastAPI (docs/http.md, Conformance and examples):
every path and method answers ``ok`` (status from X-Conformance-Status,
after X-Conformance-Delay-Ms; X-Conformance-Fail raises), behind librl's
middleware; X-Conformance-User authenticates a user the
Starlette way (AuthenticationMiddleware puts it in scope["user"]), and
X-Conformance-Attribute: NAME=VALUE sets ``request.state.NAME``, as an
application's own middleware would.

    LIBRL_POLICIES=policies.yaml PORT=8080 python serve.py fastapi
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Optional, Tuple

from conformance_resolvers import ASYNC_RESOLVERS
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse
from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from librl.http.fastapi import RateLimit

if TYPE_CHECKING:
    from serve import AppOptions
    from typing_extensions import Unpack


class ConformanceUser(AuthenticationBackend):
    async def authenticate(self, conn: HTTPConnection) -> Optional[Tuple[AuthCredentials, Any]]:
        name = conn.headers.get("x-conformance-user")
        if name:
            # Starlette hands header values as Latin-1 text; the name is UTF-8.
            name = name.encode("latin-1").decode("utf-8", "replace")
        return (AuthCredentials(["authenticated"]), SimpleUser(name)) if name else None


class ConformanceAttribute:
    """Sets ``request.state.NAME`` to VALUE from X-Conformance-Attribute:
    NAME=VALUE, before librl's middleware runs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = Request(scope).headers.get("x-conformance-attribute")
            if given:
                # Starlette hands header values as Latin-1 text; the value is UTF-8.
                name, _, value = given.encode("latin-1").decode("utf-8", "replace").partition("=")
                setattr(Request(scope).state, name, value)
        await self.app(scope, receive, send)


def make_app(config: Any, **options: Unpack[AppOptions]) -> FastAPI:
    app = FastAPI()
    # The conformance resolvers, as coroutine functions: FastAPI awaits them.
    app.state.librl = RateLimit(config, resolvers=ASYNC_RESOLVERS, **options)
    app.state.librl.install(app)
    # Added last, so they run first: the user and the attribute are known
    # when librl checks.
    app.add_middleware(AuthenticationMiddleware, backend=ConformanceUser())
    app.add_middleware(ConformanceAttribute)

    # An ASGI app as the endpoint: Starlette then serves every method with
    # it (M-SEARCH, PROPFIND...), where a function endpoint gets GET only.
    app.router.routes.append(Route("/{path:path}", Ok()))
    return app


def reload(app: FastAPI, config: Any) -> None:
    """serve.py's SIGHUP: the configuration swapped (ConfigError: kept)."""
    app.state.librl.reload(config)


class Ok:
    """Answers ``ok``, with the status X-Conformance-Status asks for, after
    sleeping X-Conformance-Delay-Ms (without blocking the loop); raises
    with X-Conformance-Fail (Starlette answers 500)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        status = int(request.headers.get("x-conformance-status", "200"))
        await asyncio.sleep(int(request.headers.get("x-conformance-delay-ms", "0")) / 1000)
        if request.headers.get("x-conformance-fail"):
            raise RuntimeError("X-Conformance-Fail: the handler fails")
        await PlainTextResponse("ok", status_code=status)(scope, receive, send)
