"""librl: the Python client of the librl Redis module's rate-limiting commands.

    import redis, librl

    limiter = librl.Limiter(redis.Redis())
    decision = limiter.fixed("rl:user:42", 10, 60)   # 10 calls a minute
    if not decision:
        print(f"retry in {decision.retry_after_ms} ms")

``Limiter`` takes a ``redis.Redis`` or ``redis.RedisCluster``;
``AsyncLimiter`` a ``redis.asyncio.Redis`` or ``RedisCluster``.
"""

from ._args import Clause, Concurrent, Duration, Fixed, Sliding, Token
from ._async import AsyncLimiter
from ._leases import AsyncLease, Lease
from ._sync import Limiter
from ._types import (
    AllDecision,
    Decision,
    DurabilityError,
    KeyT,
    LeaseLost,
    LeaseRefused,
    Override,
    OverrideEntry,
)

__version__ = "0.1.0"

__all__ = [
    "AllDecision",
    "AsyncLease",
    "AsyncLimiter",
    "Clause",
    "Concurrent",
    "Decision",
    "DurabilityError",
    "Duration",
    "Fixed",
    "KeyT",
    "Lease",
    "LeaseLost",
    "LeaseRefused",
    "Limiter",
    "Override",
    "OverrideEntry",
    "Sliding",
    "Token",
    "__version__",
]
