"""Which policies apply to a request (docs/http.md, Routes): the route
whose canonical path is the longest whole-segment prefix of the request's
canonical path, among the routes whose methods include the request's."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional, Sequence

if TYPE_CHECKING:
    from ._configuration import Route

_HEX = frozenset(b"0123456789abcdefABCDEF")


#: An absolute-form target's scheme and authority (http://host:80).
_ABSOLUTE_FORM = re.compile(rb"[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")
_QUERY_OR_FRAGMENT = re.compile(rb"[?#]")


def canonical_path(path: bytes) -> bytes:
    """docs/http.md, The canonical path: an absolute-form target's scheme and
    authority dropped, the query and any fragment dropped, percent-escapes
    decoded until none is left, ``;`` parameters, empty and ``.`` segments
    dropped, ``..`` applied (never above the root), no trailing slash."""
    absolute = _ABSOLUTE_FORM.match(path)
    if absolute:
        path = path[absolute.end() :]
    path = _QUERY_OR_FRAGMENT.split(path, 1)[0]
    if b"%" in path:
        path = _decode_all(path)
    segments: list[bytes] = []
    for segment in path.split(b"/"):
        segment = segment.split(b";", 1)[0]
        if segment in (b"", b"."):
            continue
        if segment == b"..":
            if segments:
                segments.pop()
            continue
        segments.append(segment)
    return b"/" + b"/".join(segments)


def _decode_all(path: bytes) -> bytes:
    """Percent-decodes until no ``%XX`` is left, in one pass: a decoded
    byte can only complete an escape with the bytes just before it, so
    checking the output's end after each byte gives what decoding the
    whole path again and again gives, in linear time (a path of ``%2525...``
    would otherwise take one pass per two bytes)."""
    out = bytearray()
    for byte in path:
        out.append(byte)
        while len(out) >= 3 and out[-3] == 0x25 and out[-2] in _HEX and out[-1] in _HEX:
            value = int(out[-2:], 16)
            del out[-3:]
            out.append(value)
    return bytes(out)


def decoded_path(path: bytes) -> bytes:
    """A path the server or framework already percent-decoded once, as
    canonical_path reads it: its query is gone, so a ``?`` or ``#`` in it
    came from ``%3F`` or ``%23`` and is escaped again rather than read as a
    query's or a fragment's start."""
    return path.replace(b"?", b"%3F").replace(b"#", b"%23")


def folded(path: str) -> bytes:
    """A route's path as requests are compared with it (made so when the
    configuration is read)."""
    return folded_path(path.encode())


def folded_path(path: bytes) -> bytes:
    """A path as routes compare it: canonical, its ASCII letters in lower
    case (bytes.lower() leaves every other byte as it is)."""
    return canonical_path(path).lower()


def select(routes: Sequence[Route], method: str, path: bytes) -> Optional[Route]:
    """The route of longest canonical path covering ``path`` (a request's
    raw or once-decoded path), among those whose methods include
    ``method``; the first listed among equally long ones; None when none
    covers it."""
    requested = folded_path(path)
    best: Optional[Route] = None
    for route in routes:
        if route.methods is not None and method not in route.methods:
            continue
        prefix = route.folded
        if (prefix == b"/" or requested == prefix or requested.startswith(prefix + b"/")) and (
            best is None or len(prefix) > len(best.folded)
        ):
            best = route
    return best
