"""librl's HTTP integrations (docs/http.md): one configuration, one
behaviour, in every framework.

- ``librl.http.asgi``: RateLimitMiddleware for Starlette, FastAPI, any ASGI app;
- ``librl.http.fastapi``: RateLimit, the middleware plus per-route dependencies;
- ``librl.http.django``: RateLimitMiddleware (settings.LIBRL) and @rate_limit;
- ``librl.http.flask``: RateLimit, the extension, and its policies() decorator.

This package holds what they share and imports no framework: the
configuration (``load``), the contract (``Engine``) and its Redis exchange
over a blocking client (``Guard``) or an asyncio one (``AsyncGuard``).
"""

from ._config import Config, ConfigError, Policy, Route, load, parse
from ._engine import CheckReport, DecisionEvent, Engine, Hook, Reply, Request
from ._guard import Admission, AsyncGuard, Guard, connect, connect_async

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
    "Policy",
    "Reply",
    "Request",
    "Route",
    "connect",
    "connect_async",
    "load",
    "parse",
]
