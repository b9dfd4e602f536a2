"""librl from Python: the axum example's middleware in a few lines of redis-py.

Policies are (name, algorithm, limit, window_s, *options) tuples, e.g.
("per-second", "FIXED", 5, 1, "ALIGNED") or ("uploads", "TOKEN", 10, 60,
"BURST", 20). Each is one RL.* call, in order, stopping at the first denial.

    r = redis.Redis()

    @app.get("/hello")
    @rate_limited(r, ("hello", "SLIDING", 30, 60))
    def hello():
        return "hello"
"""

import hashlib
import json
from functools import wraps

import redis

FIELDS = ("allowed", "count", "retry_after_ms", "limit", "remaining", "reset_after_ms")


def ceil_s(ms):
    return -(-ms // 1000)


def check(r, who, policies, cost=1, fail_open=True):
    """Returns (status, headers, problem): status 200 means serve the request
    and add the headers; otherwise answer `problem` as problem+json."""
    checked = []
    try:
        for name, algorithm, limit, window_s, *options in policies:
            reply = r.execute_command(
                f"RL.{algorithm}", f"rl:{{{who}}}:{name}", limit, window_s,
                "COST", cost, *options)
            checked.append((name, window_s, dict(zip(FIELDS, reply))))
            if not checked[-1][2]["allowed"]:
                break
    except redis.RedisError:  # Redis down or hung: the fail mode decides.
        if fail_open:
            return 200, {}, None
        return 503, {}, problem(503, "Service Unavailable", "The rate limiter is unavailable.")
    if not checked:
        return 200, {}, None
    # The denial, else the policy with the smallest share of its limit left.
    name, _, worst = min(checked, key=lambda c: (c[2]["allowed"], c[2]["remaining"] / c[2]["limit"]))
    headers = {
        "RateLimit-Policy": ", ".join(f'"{n}";q={c["limit"]};w={w}' for n, w, c in checked),
        "RateLimit": f'"{name}";r={worst["remaining"]};t={ceil_s(worst["reset_after_ms"])}',
        "X-RateLimit-Limit": str(worst["limit"]),
        "X-RateLimit-Remaining": str(worst["remaining"]),
        "X-RateLimit-Reset": str(ceil_s(worst["reset_after_ms"])),
    }
    if worst["allowed"]:
        return 200, headers, None
    if worst["retry_after_ms"] < 0:  # -1: the cost exceeds the limit, no wait helps
        detail = f'This request costs more than rate limit "{name}" ever admits.'
    else:
        headers["Retry-After"] = str(max(1, ceil_s(worst["retry_after_ms"])))
        detail = f'Rate limit "{name}" exceeded; retry in {headers["Retry-After"]} s.'
    return 429, headers, problem(429, "Too Many Requests", detail, policy=name)


def problem(status, title, detail, **extra):
    return {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}


def rate_limited(r, *policies, fail_open=True):
    """Flask decorator: the client is its X-Api-Key (hashed), else its IP.
    Behind a proxy, set Flask's ProxyFix for the proxies you trust only."""
    from flask import Response, make_response, request

    def decorate(view):
        @wraps(view)
        def wrapper(*args, **kwargs):
            key = request.headers.get("X-Api-Key")
            who = f"key:{hashlib.sha256(key.encode()).hexdigest()[:32]}" if key else f"ip:{request.remote_addr}"
            status, headers, body = check(r, who, policies, fail_open=fail_open)
            if body is not None:
                return Response(json.dumps(body), status, headers, mimetype="application/problem+json")
            response = make_response(view(*args, **kwargs))
            response.headers.update(headers)
            return response
        return wrapper
    return decorate
