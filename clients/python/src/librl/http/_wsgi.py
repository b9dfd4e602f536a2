"""A WSGI request as the contract reads it (Django, Flask): PEP 3333 gives
header values as text decoded from Latin-1, which the contract encodes
back to the bytes that were sent (docs/http.md, Identity), and a path the
server already percent-decoded once."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ._request import Request
from ._routes import decoded_path


def request_of(
    environ: Mapping[str, Any], path: str, route_path: bytes, user: Optional[str]
) -> Request:
    """``path`` is the framework's path (for the decision hook);
    ``route_path`` the once-decoded path as bytes, for the routes."""
    headers: Dict[str, List[str]] = {}
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            headers[key[5:].replace("_", "-").lower()] = [value]
    for key in ("CONTENT_LENGTH", "CONTENT_TYPE"):
        if environ.get(key):
            headers[key.replace("_", "-").lower()] = [environ[key]]
    return Request(
        method=environ.get("REQUEST_METHOD", "GET"),
        path=path,
        headers=headers,
        peer=environ.get("REMOTE_ADDR"),
        user=user,
        raw_path=decoded_path(route_path),
    )
