"""What the contract reads of a request, as an adapter hands it over:
method, paths, header lines as bytes, the peer's address and the
authenticated user.

Every part is read when the contract needs it, not before: most
configurations read one header or none, and a framework's user may cost a
session lookup (Django's ``request.user``), so the adapters give a header
lookup and a user resolver rather than copies (``ScopeRequest`` for ASGI,
``_wsgi.EnvironRequest`` for WSGI)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from ._routes import decoded_path

#: A header line: bytes, or text a WSGI server decoded from Latin-1.
Line = Union[bytes, str]

_SPACE = b" \t"


class Request:
    """A request as the contract reads it.

    ``headers`` maps lower-case names to every line of that name, as
    bytes (a ``str`` line is text a WSGI server decoded from Latin-1, and
    is encoded back so); ``raw_path`` is the path routes are matched on,
    as the adapter received it (raw, or decoded once by the server, with
    ``?`` escaped by ``decoded_path``; None: ``path`` read so); ``path`` is
    the path as the framework shows it, for the decision hook; ``user`` is
    the framework's authenticated user, as the adapter's resolver found
    it (``user_of``: the resolver, called the first time the user is
    needed, at most once); ``native`` is the framework's own request,
    which resolvers in code receive; ``query`` is the raw query string
    (after the ``?``), None without one; ``attribute_of(native, name)``
    reads a value the application left on the request (docs/http.md,
    Request attributes), where the adapter's framework keeps them, and
    ``attributes`` holds them instead when there is no framework."""

    __slots__ = (
        "_attribute_of",
        "_attributes",
        "_headers",
        "_query",
        "_user",
        "_user_of",
        "method",
        "native",
        "path",
        "peer",
        "raw_path",
    )

    def __init__(
        self,
        method: str,
        path: str,
        headers: Mapping[str, Sequence[Line]],
        peer: Optional[str],
        user: Optional[str] = None,
        raw_path: Optional[bytes] = None,
        *,
        user_of: Optional[Callable[[], Optional[str]]] = None,
        native: Any = None,
        query: Optional[bytes] = None,
        attribute_of: Optional[Callable[[Any, str], Any]] = None,
        attributes: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.method = method
        self.path = path
        self._headers = headers
        self.peer = peer
        self._user = user
        self._user_of = user_of
        self.raw_path = raw_path
        self.native = native
        self._query = query
        self._attribute_of = attribute_of
        self._attributes = attributes

    @property
    def query(self) -> Optional[bytes]:
        """The raw query string, as sent (named identities read it)."""
        return self._query

    @property
    def headers(self) -> Mapping[str, Sequence[Line]]:
        """Every header line by lower-case name (what ``header`` reads)."""
        return self._headers

    @property
    def user(self) -> Optional[str]:
        user_of = self._user_of
        if user_of is not None:
            self._user_of = None
            self._user = user_of()
        return self._user

    def attribute(self, name: str) -> Any:
        """The request attribute ``name`` as the application left it (any
        type; None when absent)."""
        attribute_of = self._attribute_of
        if attribute_of is not None:
            return attribute_of(self.native, name)
        attributes = self._attributes
        return None if attributes is None else attributes.get(name)

    def header(self, name: str) -> Optional[bytes]:
        """The value of the header ``name`` (lower case): header_value of
        its lines; None when the request has none."""
        lines = self._headers.get(name)
        if not lines:
            return None
        if len(lines) == 1:
            line = lines[0]
            if isinstance(line, str):
                line = line.encode("latin-1")
            return line.strip(_SPACE)
        return header_value(lines)

    def header_lines(self, name: str) -> List[bytes]:
        """Every line of the header ``name`` (lower case), as bytes."""
        return [
            line if isinstance(line, bytes) else line.encode("latin-1")
            for line in self.headers.get(name, ())
        ]

    def route_path(self) -> bytes:
        if self.raw_path is not None:
            return self.raw_path
        return decoded_path(self.path.encode())


class ScopeRequest(Request):
    """An ASGI request: its header lines are grouped by name the first time
    one is read (ASGI gives them as a list of pairs); its attributes are
    Starlette's ``request.state``, the scope's ``state`` dict, read when a
    source asks (the app's code may set one after the request was made)."""

    __slots__ = ("_pairs", "_scope")

    def __init__(
        self,
        method: str,
        path: str,
        pairs: Iterable[Sequence[bytes]],
        peer: Optional[str],
        raw_path: Optional[bytes],
        user_of: Optional[Callable[[], Optional[str]]],
        native: Any,
        query: Optional[bytes] = None,
        scope: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(
            method, path, {}, peer, None, raw_path, user_of=user_of, native=native, query=query
        )
        self._pairs: Optional[Iterable[Sequence[bytes]]] = pairs
        self._scope = scope

    def attribute(self, name: str) -> Any:
        state = self._scope.get("state") if self._scope is not None else None
        return state.get(name) if isinstance(state, dict) else None

    @property
    def headers(self) -> Mapping[str, Sequence[Line]]:
        pairs = self._pairs
        if pairs is not None:
            self._pairs = None
            headers: Dict[str, List[bytes]] = {}
            for key, value in pairs:
                headers.setdefault(key.decode("latin-1").lower(), []).append(value)
            self._headers = headers
        return self._headers

    def header(self, name: str) -> Optional[bytes]:
        if self._pairs is not None:
            self.headers  # noqa: B018 - groups the lines
        return super().header(name)


def header_value(lines: Iterable[Line]) -> Optional[bytes]:
    """A header's lines joined by ``, ``, as HTTP combines them, trimmed of
    spaces and tabs; None without lines (docs/http.md, Identity: header
    values are bytes)."""
    encoded = [line if isinstance(line, bytes) else line.encode("latin-1") for line in lines]
    if not encoded:
        return None
    return b", ".join(encoded).strip(_SPACE)
