"""What the WSGI integrations share (Django, Flask): a request as the
contract reads it, and a response iterable that releases the request's
concurrency slots when the server closes it (Flask's; Django's responses
close themselves). PEP 3333 gives header values
as text decoded from Latin-1, which the contract encodes back to the bytes
that were sent (docs/http.md, Identity), and a path the server already
percent-decoded once."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional

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


class Releasing:
    """A response iterable that calls ``release`` when the server closes it
    (PEP 3333: after the last byte was written, or when writing failed
    because the client went away), after closing the iterable it wraps."""

    def __init__(self, body: Iterable[bytes], release: Callable[[], None]) -> None:
        self._body = body
        self._release = release

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._body)

    def close(self) -> None:
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            self._release()
