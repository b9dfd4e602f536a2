"""What the contract reads of a request, as an adapter hands it over:
method, paths, header lines as bytes, the peer's address and the
authenticated user."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence, Union

from ._routes import decoded_path

#: A header line: bytes, or text a WSGI server decoded from Latin-1.
Line = Union[bytes, str]


@dataclass
class Request:
    """A request as the contract reads it.

    ``headers`` maps lower-case names to every line of that name, as
    bytes (a ``str`` line is text a WSGI server decoded from Latin-1, and
    is encoded back so); ``raw_path`` is the path routes are matched on,
    as the adapter received it (raw, or decoded once by the server, with
    ``?`` escaped by ``decoded_path``; None: ``path`` read so); ``path`` is
    the path as the framework shows it, for the decision hook; ``user`` is
    the framework's authenticated user, as the adapter's resolver found
    it."""

    method: str
    path: str
    headers: Mapping[str, Sequence[Line]]
    peer: Optional[str]
    user: Optional[str] = None
    raw_path: Optional[bytes] = None

    def header(self, name: str) -> Optional[bytes]:
        """The value of the header ``name`` (lower case): header_value of
        its lines; None when the request has none."""
        return header_value(self.headers.get(name, ()))

    def route_path(self) -> bytes:
        if self.raw_path is not None:
            return self.raw_path
        return decoded_path(self.path.encode())


def header_value(lines: Iterable[Line]) -> Optional[bytes]:
    """A header's lines joined by ``, ``, as HTTP combines them, trimmed of
    spaces and tabs; None without lines (docs/http.md, Identity: header
    values are bytes)."""
    encoded = [line if isinstance(line, bytes) else line.encode("latin-1") for line in lines]
    if not encoded:
        return None
    return b", ".join(encoded).strip(b" \t")
