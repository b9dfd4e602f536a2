"""librl from Python: the axum example's middleware in a few lines, on the
librl package (pip install ./clients/python).

A route's policies are checked in ONE call, RL.ALL: the request is admitted
only if every policy admits it, and then counted in all of them; if one
refuses it, it is counted nowhere. (Calling the policies one by one would
count a refused request in the policies checked before the refusal.) All of
a client's keys share the hash tag {who}, so the call also works on a
Redis Cluster.

    import redis, librl

    limiter = librl.Limiter(redis.Redis())      # or redis.RedisCluster(...)

    @app.get("/hello")
    @rate_limited(
        limiter,
        Policy("per-second", librl.Fixed, 5, 1, aligned=True),
        Policy("hello", librl.Sliding, 30, 60),
        Policy("uploads", librl.Token, 10, 60, burst=20),
    )
    def hello():
        return "hello"

Flask is only needed for rate_limited(); check() works with any framework.
"""

from __future__ import annotations

import hashlib
import json
from functools import wraps
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

import redis

import librl

F = TypeVar("F", bound=Callable[..., Any])
Headers = Dict[str, str]
Problem = Optional[Dict[str, Any]]


class Policy:
    """One limit of a route: a name (in keys and headers), the algorithm's
    clause class (librl.Fixed, Sliding or Token), the limit (TOKEN: the rate)
    per window_s seconds, and the clause's options (aligned=True, burst=20,
    approx=True, block="1h", ...)."""

    def __init__(
        self, name: str, kind: Callable[..., librl.Clause], limit: int, window_s: int,
        **options: Any,
    ) -> None:  # fmt: skip
        self.name, self.kind, self.limit, self.window_s = name, kind, limit, window_s
        self.options = options

    def clause(self, who: str, cost: int) -> librl.Clause:
        key = f"rl:{{{who}}}:{self.name}"
        return self.kind(key, self.limit, self.window_s, cost=cost, **self.options)


def ceil_s(ms: int) -> int:
    return -(-ms // 1000)


def check(
    limiter: librl.Limiter, who: str, policies: Tuple[Policy, ...], cost: int = 1,
    fail_open: bool = True,
) -> Tuple[int, Headers, Problem]:  # fmt: skip
    """Returns (status, headers, problem): status 200 means serve the request
    and add the headers; otherwise answer `problem` as problem+json."""
    if not policies:
        return 200, {}, None
    try:
        result = limiter.all(*(policy.clause(who, cost) for policy in policies))
    except redis.RedisError:  # Redis down or hung: the fail mode decides.
        if fail_open:
            return 200, {}, None
        return 503, {}, problem(503, "Service Unavailable", "The rate limiter is unavailable.")
    checked = list(zip(policies, result.decisions))
    # A refusing policy, else the one with the smallest share of its limit left.
    worst_policy, worst = min(checked, key=lambda c: (c[1].allowed, c[1].remaining / c[1].limit))
    name = worst_policy.name
    headers = {
        "RateLimit-Policy": ", ".join(f'"{p.name}";q={d.limit};w={p.window_s}' for p, d in checked),
        "RateLimit": f'"{name}";r={worst.remaining};t={ceil_s(worst.reset_after_ms)}',
        "X-RateLimit-Limit": str(worst.limit),
        "X-RateLimit-Remaining": str(worst.remaining),
        "X-RateLimit-Reset": str(ceil_s(worst.reset_after_ms)),
    }
    if result.allowed:
        return 200, headers, None
    if result.retry_after_ms < 0:  # -1: the cost exceeds a limit, no wait helps
        detail = f'This request costs more than rate limit "{name}" ever admits.'
        return 429, headers, problem(429, "Too Many Requests", detail, policy=name)
    # When every refusing policy admits again: the largest of their waits.
    headers["Retry-After"] = str(max(1, ceil_s(result.retry_after_ms)))
    detail = f'Rate limit "{name}" exceeded; retry in {headers["Retry-After"]} s.'
    return 429, headers, problem(429, "Too Many Requests", detail, policy=name)


def problem(status: int, title: str, detail: str, **extra: Any) -> Dict[str, Any]:
    return {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}


def client_id(api_key: Optional[str], remote_addr: Optional[str]) -> str:
    """The client is its API key (hashed: keys never reach Redis), else its IP."""
    if api_key:
        return f"key:{hashlib.sha256(api_key.encode()).hexdigest()[:32]}"
    return f"ip:{remote_addr}"


def rate_limited(
    limiter: librl.Limiter, *policies: Policy, fail_open: bool = True
) -> Callable[[F], F]:
    """Flask decorator: the client is its X-Api-Key (hashed), else its IP.
    Behind a proxy, set Flask's ProxyFix for the proxies you trust only."""
    from flask import Response, make_response, request

    def decorate(view: F) -> F:
        @wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            who = client_id(request.headers.get("X-Api-Key"), request.remote_addr)
            status, headers, body = check(limiter, who, policies, fail_open=fail_open)
            if body is not None:
                return Response(
                    json.dumps(body), status, headers, mimetype="application/problem+json"
                )
            response = make_response(view(*args, **kwargs))
            response.headers.update(headers)
            return response

        return wrapper  # type: ignore[return-value]

    return decorate
