"""librl's HTTP integrations (docs/http.md): one configuration, one
behaviour, in every framework.

- ``librl.http.asgi``: RateLimitMiddleware for Starlette, FastAPI, any ASGI app;
- ``librl.http.fastapi``: RateLimit, the middleware plus per-route dependencies;
- ``librl.http.django``: RateLimitMiddleware (settings.LIBRL) and @rate_limit;
- ``librl.http.flask``: RateLimit, the extension, and its policies() decorator.

This package holds what they share and imports no framework: a core
without I/O whose modules are named after docs/http.md's sections
(_configuration with the generated _schema, _request, _identity,
_sources, _keys, _routes, _resolvers, _plan, _decide, _headers,
_refusals, _fail with _local, _hook; _engine ties them for one
configuration), and the Redis exchanges over a blocking
client (``Guard``) or an asyncio one (``AsyncGuard``). The adapters only
move requests and responses.
"""

from ._configuration import Config, ConfigError, Policy, Route, load, parse
from ._engine import Engine
from ._guard import Admission, AsyncGuard, Guard, connect, connect_async
from ._hook import CheckReport, DecisionEvent, Hook, Outcome
from ._refusals import Reply
from ._request import Request
from ._resolvers import Resolver, Resolvers

__all__ = [
    "Admission",
    "AsyncGuard",
    "CheckReport",
    "Config",
    "ConfigError",
    "DecisionEvent",
    "Engine",
    "Guard",
    "Hook",
    "Outcome",
    "Policy",
    "Reply",
    "Request",
    "Resolver",
    "Resolvers",
    "Route",
    "connect",
    "connect_async",
    "load",
    "parse",
]
