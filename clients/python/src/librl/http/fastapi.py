"""librl for FastAPI: the ASGI middleware for the configuration's routes,
and a dependency for a route's own policies.

    from fastapi import Depends, FastAPI
    from librl.http.fastapi import RateLimit

    limits = RateLimit("policies.yaml", url="redis://127.0.0.1:6379")
    app = FastAPI()
    limits.install(app)                       # middleware + refusal handler

    @app.get("/search", dependencies=[Depends(limits.policies("search"))])
    async def search(): ...

A route with the dependency is checked against its named policies; to keep
the middleware from checking it too, give it ``policies: []`` in the
configuration's routes (or use no routes and only dependencies, with
``install(app, middleware=False)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Optional, Union

from fastapi import FastAPI, HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ._guard import AsyncGuard, ConfigSource
from ._refusals import Reply
from .asgi import RateLimitMiddleware, UserResolver, request_of, scope_user

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._guard import GuardOptions


class Refused(Exception):
    """Raised by a policies() dependency that refuses the request; the
    handler install() registers sends its reply."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.status)
        self.reply = reply


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    reply = exc.reply
    response = Response(reply.body, status_code=reply.status)
    for name, value in reply.headers:
        response.headers[name] = value
    return response


class RateLimit:
    """One configuration and Redis client for a FastAPI app; ``resolvers``:
    resolvers in code, called with the Starlette Request (coroutine
    functions allowed; docs/http/python.md, Resolvers)."""

    def __init__(
        self,
        config: ConfigSource,
        client: Any = None,
        *,
        user: UserResolver = scope_user,
        **options: Unpack[GuardOptions],
    ) -> None:
        # ``options``: url, cluster_nodes, on_decision, resolvers.
        self.guard = AsyncGuard(config, client, **options)
        self.user = user

    def override_key(
        self, policy: str, value: Union[str, bytes, None] = None, /, **subject: Union[str, bytes]
    ) -> str:
        """The override key the middleware uses for ``policy`` and a
        subject: ``limits.override_key("search", user="alice")``
        (docs/http/python.md, Keys from code)."""
        return self.guard.override_key(policy, value, **subject)

    def install(self, app: FastAPI, *, middleware: bool = True) -> None:
        """Registers the refusal handler the dependencies need, and (unless
        ``middleware=False``) the middleware for the configuration's routes."""
        app.add_exception_handler(Refused, _refused)
        if middleware:
            app.add_middleware(
                RateLimitMiddleware,
                config=self.guard.config,
                user=self.user,
                guard=self.guard,
                native=Request,  # resolvers receive a Starlette Request
            )

    def reload(self, config: ConfigSource) -> None:
        """Swaps the configuration of the middleware and the dependencies
        (AsyncGuard.reload): requests in flight finish on theirs; a bad one
        raises ConfigError and the old one stays."""
        self.guard.reload(config)

    def policies(self, *names: str) -> Callable[..., AsyncIterator[None]]:
        """A dependency checking the named policies (one decision, as a
        route of the configuration would); unknown names raise here."""
        self.guard.engine.named(names)
        guard, resolve = self.guard, self.user

        async def dependency(request: Request, response: Response) -> AsyncIterator[None]:
            async def body_length(limit: int) -> Optional[int]:
                size = len(await request.body())
                return size if size <= limit else None

            admission = await guard.admit(
                request_of(request.scope, lambda: resolve(request.scope), request),
                body_length,
                names,
            )
            if admission.reply is not None:
                raise Refused(admission.reply)
            for name, value in admission.headers:
                response.headers[name] = value
            status = 200
            try:
                yield
                status = response.status_code or 200
            except HTTPException as e:
                status = e.status_code
                raise
            finally:
                await guard.finish(admission, status)
                # FastAPI exits a dependency after the response was sent (or
                # the endpoint raised): the request's concurrency slots end.
                await guard.release(admission)

        return dependency
