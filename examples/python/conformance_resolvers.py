"""The resolvers every conformance app registers (conformance/README.md,
What the app behind the middleware does), each reading a request header;
FastAPI's, Django's and Flask's requests all have ``headers.get``.

    RateLimit(..., resolvers=conformance_resolvers.RESOLVERS)        # Django, Flask
    RateLimit(..., resolvers=conformance_resolvers.ASYNC_RESOLVERS)  # FastAPI
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple, Union

Resolver = Callable[[Any], Any]


def cost(request: Any) -> Union[int, str]:
    """``X-Conformance-Cost`` as a decimal integer, whatever its size;
    absent: 1; other text as is (not a cost: the 400)."""
    text = request.headers.get("X-Conformance-Cost")
    if text is None:
        return 1
    return int(text) if text.isascii() and text.isdigit() else str(text)


def limit(request: Any) -> Optional[Tuple[int, ...]]:
    """``X-Conformance-Limit: <limit>/<window ms>[/<burst>]``; absent:
    nothing (the policy does not apply)."""
    text = request.headers.get("X-Conformance-Limit")
    if text is None:
        return None
    return tuple(int(part) for part in text.split("/"))


def mode(request: Any) -> str:
    """``X-Conformance-Mode``; absent: enforce."""
    return str(request.headers.get("X-Conformance-Mode", "enforce"))


RESOLVERS: Dict[str, Dict[str, Resolver]] = {
    "cost": {"conformance-cost": cost},
    "limit": {"conformance-limit": limit},
    "mode": {"conformance-mode": mode},
}


def _async(resolver: Resolver) -> Resolver:
    async def resolved(request: Any) -> Any:
        return resolver(request)

    return resolved


#: The same, as coroutine functions (an ASGI integration awaits them).
ASYNC_RESOLVERS: Dict[str, Dict[str, Resolver]] = {
    kind: {name: _async(resolver) for name, resolver in named.items()}
    for kind, named in RESOLVERS.items()
}
