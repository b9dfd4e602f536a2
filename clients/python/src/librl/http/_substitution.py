"""``${VAR}`` and ``${VAR:-default}`` in a configuration file's text,
replaced before it is parsed (docs/http.md, Environment variables)."""

from __future__ import annotations

import re
from typing import List, Mapping

from ._configuration import ConfigError

#: ``$${`` (a literal ``${``), or a reference: ``${NAME}`` / ``${NAME:-default}``
#: (the default: the text up to the first ``}``).
_REFERENCE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def substitute(text: str, env: Mapping[str, str]) -> str:
    """``text`` with each reference replaced from ``env`` (a value is not
    read again); a ConfigError naming an unset variable without a
    default, or a ``${`` that starts no reference."""
    out: List[str] = []
    at = 0
    for match in _REFERENCE.finditer(text):
        _refuse_malformed(text, at, match.start())
        out.append(text[at : match.start()])
        at = match.end()
        name = match.group(1)
        if name is None:
            out.append("${")
            continue
        value = env.get(name)
        default = match.group(2)
        if default is not None and not value:
            value = default
        if value is None:
            raise ConfigError(f"${{{name}}}", "not set")
        out.append(value)
    _refuse_malformed(text, at, len(text))
    out.append(text[at:])
    return "".join(out)


def _refuse_malformed(text: str, start: int, end: int) -> None:
    """A ``${`` between references starts none: refused, quoted."""
    where = text.find("${", start, end)
    if where >= 0:
        close = text.find("}", where, end)
        quoted = text[where : close + 1] if close >= 0 else text[where:end]
        raise ConfigError(quoted, "not a ${VAR} or ${VAR:-default} reference")
