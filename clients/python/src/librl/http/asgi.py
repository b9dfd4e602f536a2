"""librl for ASGI: Starlette, FastAPI, or any ASGI app, over redis.asyncio.

    from librl.http.asgi import RateLimitMiddleware

    app.add_middleware(RateLimitMiddleware, config="policies.yaml",
                       url="redis://127.0.0.1:6379")

The user of ``key: user`` is ``scope["user"]`` (Starlette's
AuthenticationMiddleware, which must then run before this one) or
``request.state.user`` (``scope["state"]["user"]``); an object gives its
``username``, ``identity``, ``display_name`` or ``id``, and an unauthenticated one
(``is_authenticated`` false) is no user. Pass ``user=`` a function of the
ASGI scope to look elsewhere. Per-route policies: librl.http.fastapi.

Resolvers in code (``resolvers=``, docs/http/python.md, Resolvers) receive
the ASGI scope, or what ``native`` makes of it (FastAPI's RateLimit: a
Starlette Request); they may be coroutine functions.
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Dict,
    List,
    MutableMapping,
    Optional,
    Sequence,
    Tuple,
)

from ._guard import Admission, AsyncGuard, ConfigSource
from ._identity import user_name
from ._refusals import Reply
from ._request import Request, ScopeRequest

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._guard import GuardOptions

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
#: Finds the authenticated user of a request in its ASGI scope.
UserResolver = Callable[[Scope], Optional[str]]


def scope_user(scope: Scope) -> Optional[str]:
    """The default resolver: scope["user"], else request.state.user."""
    user = scope.get("user")
    if user is None:
        state = scope.get("state")
        if isinstance(state, dict):
            user = state.get("user")
    return user_name(user)


def request_of(
    scope: Scope, user_of: Optional[Callable[[], Optional[str]]], native: Any = None
) -> Request:
    """The request as the contract reads it: the header lines as the bytes
    that were sent, and the raw path (``raw_path``, when the server gives
    it; else ``path``, which the server decoded once); ``user_of`` finds
    the user when a policy needs it; ``native`` is what resolvers in code
    receive (the ASGI scope, unless a framework has its own request). Its
    attributes are the scope's ``state`` (Starlette's ``request.state``)."""
    client = scope.get("client")
    return ScopeRequest(
        scope.get("method", "GET"),
        scope.get("path", "/"),
        scope.get("headers", ()),
        client[0] if client else None,
        scope.get("raw_path"),
        user_of,
        scope if native is None else native,
        scope.get("query_string"),
        scope,
    )


#: Header names as ASGI sends them: lower-case bytes.
_NAMES: Dict[str, bytes] = {}


def encoded(headers: List[Tuple[str, str]]) -> List[Tuple[bytes, bytes]]:
    """Headers as an ASGI message carries them."""
    out = []
    for name, value in headers:
        raw = _NAMES.get(name)
        if raw is None:
            raw = name.lower().encode()
            if len(_NAMES) < 256:
                _NAMES[name] = raw
        out.append((raw, value.encode()))
    return out


async def send_reply(send: Send, reply: Reply) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": reply.status,
            "headers": encoded(reply.headers),
        }
    )
    await send({"type": "http.response.body", "body": reply.body})


class RateLimitMiddleware:
    """The ASGI middleware: checks every HTTP request against the
    configuration's routes (or, without routes, every policy)."""

    def __init__(
        self,
        app: ASGIApp,
        config: ConfigSource,
        client: Any = None,
        *,
        user: UserResolver = scope_user,
        guard: Optional[AsyncGuard] = None,
        native: Optional[Callable[[Scope], Any]] = None,
        **options: Unpack[GuardOptions],
    ) -> None:
        self.app = app
        # ``guard``: one shared with others (FastAPI's RateLimit and its
        # dependencies), so that one reload reaches them all.
        # ``options``: url, cluster_nodes, on_decision, resolvers.
        self.guard = guard or AsyncGuard(config, client, **options)
        self.user = user
        #: What resolvers receive, made from the scope (None: the scope).
        self.native = native

    def reload(self, config: ConfigSource) -> None:
        """Swaps the configuration (AsyncGuard.reload): requests in flight
        finish on theirs; a bad one raises ConfigError and the old stays."""
        self.guard.reload(config)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        user, native, guard = self.user, self.native, self.guard
        # Made only for a configuration whose requests call resolvers.
        made = native(scope) if native is not None and guard.engine.config.resolving else None
        await guarded(guard, self.app, scope, receive, send, lambda: user(scope), None, made)


async def guarded(
    guard: AsyncGuard,
    app: ASGIApp,
    scope: Scope,
    receive: Receive,
    send: Send,
    user_of: Callable[[], Optional[str]],
    names: Optional[Sequence[str]],
    native: Any = None,
) -> None:
    """One request through the guard: check, call the app with the headers
    added to its response, refund after it (before its last body chunk
    goes out, so the client's next request sees the refund), and release
    its concurrency slots once the response is finished: after its last
    body chunk was sent, or when the app hears the client is gone, or when
    the app ends without sending it (it raised, or was cancelled)."""
    buffered: List[Message] = []

    async def body_length(limit: int) -> Optional[int]:
        size = 0
        while True:
            message = await receive()
            buffered.append(message)
            if message["type"] != "http.request":
                return size
            size += len(message.get("body", b""))
            if size > limit:
                return None
            if not message.get("more_body", False):
                return size

    admission = await guard.admit(request_of(scope, user_of, native), body_length, names)
    if admission.reply is not None:
        await send_reply(send, admission.reply)
        return

    async def replay() -> Message:
        return buffered.pop(0) if buffered else await receive()

    if not admission.holds_slots:
        if admission.headers or admission.settles:
            send = _sender(guard, admission, send)
        await app(scope, replay if buffered else receive, send)
        return
    sender = _sender(guard, admission, send)
    try:
        await app(scope, _hearing_disconnect(guard, admission, replay), sender)
    finally:
        await guard.release(admission)


def _hearing_disconnect(guard: AsyncGuard, admission: Admission, receive: Receive) -> Receive:
    """``receive``, releasing the slots when it says the client is gone."""

    async def wrapped() -> Message:
        message = await receive()
        if message["type"] == "http.disconnect":
            await guard.release(admission)
        return message

    return wrapped


def _sender(guard: AsyncGuard, admission: Admission, send: Send) -> Send:
    extra = encoded(admission.headers)
    status = [200]
    # Nothing to do after the response: only the headers are added.
    after = admission.settles or admission.holds_slots

    async def wrapped(message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            status[0] = int(message["status"])
            if extra:
                message = dict(message)
                message["headers"] = [*message.get("headers", ()), *extra]
        elif after and kind == "http.response.body" and not message.get("more_body", False):
            await guard.finish(admission, status[0])
            await send(message)
            await guard.release(admission)
            return
        await send(message)

    return wrapped
