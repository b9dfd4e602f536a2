"""What the WSGI integrations share (Django, Flask): a request as the
contract reads it, and a response iterable that releases the request's
concurrency slots when the server closes it (Flask's; Django's responses
close themselves). PEP 3333 gives header values
as text decoded from Latin-1, which the contract encodes back to the bytes
that were sent (docs/http.md, Identity), and a path the server already
percent-decoded once."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from ._headers import HEADER_NAMES
from ._request import Request
from ._routes import decoded_path

#: A header's name as the WSGI environ keys it, by its lower-case name.
_ENVIRON_NAMES: Dict[str, str] = {
    "content-length": "CONTENT_LENGTH",
    "content-type": "CONTENT_TYPE",
}


def _environ_name(name: str) -> str:
    key = _ENVIRON_NAMES.get(name)
    if key is None:
        key = "HTTP_" + name.upper().replace("-", "_")
        if len(_ENVIRON_NAMES) < 1024:  # the configuration's names, and a few more
            _ENVIRON_NAMES[name] = key
    return key


#: EnvironRequest's headers mapping, never read (its ``headers`` reads the
#: environ).
_NO_HEADERS: Mapping[str, Sequence[str]] = {}


class EnvironRequest(Request):
    """A WSGI request: each header is read from the environ when the
    contract asks for it (PEP 3333 has joined a header's lines already)."""

    __slots__ = ("_environ",)

    def __init__(
        self,
        environ: Mapping[str, Any],
        path: str,
        route_path: bytes,
        user_of: Optional[Callable[[], Optional[str]]],
        native: Any,
        attribute_of: Optional[Callable[[Any, str], Any]],
    ) -> None:
        # Request.__init__'s slots set here: its call, with keywords, cost
        # every request more than the rest of this (the headers are read
        # from the environ; no query, user or attributes given).
        self.method = environ.get("REQUEST_METHOD", "GET")
        self.path = path
        self._headers = _NO_HEADERS
        self.peer = environ.get("REMOTE_ADDR")
        self._user = None
        self._user_of = user_of
        self.raw_path = decoded_path(route_path)
        self.native = native
        self._query = None
        self._attribute_of = attribute_of
        self._attributes = None
        self._environ = environ

    @property
    def query(self) -> Optional[bytes]:
        text = self._environ.get("QUERY_STRING")
        return text.encode("latin-1") if text is not None else None

    @property
    def headers(self) -> Mapping[str, Sequence[str]]:
        environ = self._environ
        out = {k[5:].replace("_", "-").lower(): [v] for k, v in environ.items() if k[:5] == "HTTP_"}
        for key in ("CONTENT_LENGTH", "CONTENT_TYPE"):
            if environ.get(key):
                out[key.replace("_", "-").lower()] = [environ[key]]
        return out

    def header(self, name: str) -> Optional[bytes]:
        key = _environ_name(name)
        value = self._environ.get(key)
        if not value:
            # An empty CONTENT_LENGTH or CONTENT_TYPE is a server's "none".
            return None if value is None or not key.startswith("HTTP_") else b""
        return value.encode("latin-1").strip(b" \t")  # type: ignore[no-any-return]

    def header_lines(self, name: str) -> List[bytes]:
        # The server has joined a header's lines into one already.
        value = self._environ.get(_environ_name(name))
        return [value.encode("latin-1")] if value else []


def request_of(
    environ: Mapping[str, Any],
    path: str,
    route_path: bytes,
    user_of: Optional[Callable[[], Optional[str]]],
    native: Any = None,
    attribute_of: Optional[Callable[[Any, str], Any]] = None,
) -> Request:
    """``path`` is the framework's path (for the decision hook);
    ``route_path`` the once-decoded path as bytes, for the routes;
    ``user_of`` finds the user, when a policy needs it; ``attribute_of``
    reads a request attribute where the framework keeps them."""
    return EnvironRequest(environ, path, route_path, user_of, native, attribute_of)


def add_headers(headers: List[Tuple[str, str]], extra: List[Tuple[str, str]]) -> None:
    """The rate-limit headers into a WSGI response's header list, each
    replacing any the application set under the same name (looked for
    only when the application set a rate-limit header at all)."""
    for name, _ in headers:  # a loop, not any(): no generator per response
        if name.lower() in HEADER_NAMES:
            names = {name.lower() for name, _ in extra}
            headers[:] = [(name, value) for name, value in headers if name.lower() not in names]
            break
    headers.extend(extra)


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
