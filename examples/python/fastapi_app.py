"""The conformance app on FastAPI (docs/http.md, Conformance and examples):
every path and method answers ``ok`` (status from X-Conformance-Status),
behind librl's middleware; X-Conformance-User authenticates a user the
Starlette way (AuthenticationMiddleware puts it in scope["user"]).

    LIBRL_POLICIES=policies.yaml PORT=8080 python serve.py fastapi
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Tuple

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse
from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection

from librl.http.fastapi import RateLimit

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

if TYPE_CHECKING:
    from serve import AppOptions
    from typing_extensions import Unpack


class ConformanceUser(AuthenticationBackend):
    async def authenticate(self, conn: HTTPConnection) -> Optional[Tuple[AuthCredentials, Any]]:
        name = conn.headers.get("x-conformance-user")
        return (AuthCredentials(["authenticated"]), SimpleUser(name)) if name else None


def make_app(config: Any, **options: Unpack[AppOptions]) -> FastAPI:
    app = FastAPI()
    RateLimit(config, **options).install(app)
    # Added last, so it runs first: the user is known when librl checks.
    app.add_middleware(AuthenticationMiddleware, backend=ConformanceUser())

    @app.api_route("/{path:path}", methods=METHODS)
    async def ok(request: Request) -> PlainTextResponse:
        status = int(request.headers.get("x-conformance-status", "200"))
        return PlainTextResponse("ok", status_code=status)

    return app
