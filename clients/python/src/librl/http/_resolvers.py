"""Resolvers in code (docs/http.md, Resolvers): what only the
application knows, named in the file as ``code:<name>`` and registered as
callables of the framework's request: a request's cost, its limit and
window, and its mode. Registered as a mapping of the three kinds::

    resolvers = {
        "cost": {"elements": lambda request: rows(request) * columns(request)},
        "limit": {"plans": lambda request: plan_of(request)},   # (limit, window ms[, burst])
        "mode": {"switch": lambda request: "shadow"},           # enforce, shadow or off
    }

or as a module, whose attribute ``<name>`` is the resolver ``code:<name>``
of every kind (Django's ``LIBRL["resolvers"] = "views"``).

A resolver may be a coroutine function under ASGI (FastAPI, Starlette);
under WSGI (Django, Flask) it is called on the request's thread."""

from __future__ import annotations

import datetime
import inspect
import logging
from dataclasses import dataclass, field
from types import ModuleType
from typing import (
    Any,
    Callable,
    Iterator,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

log = logging.getLogger("librl.http")

#: A resolver: a callable of the framework's request (async under ASGI).
Resolver = Callable[[Any], Any]

KINDS = ("cost", "limit", "mode")
MAX_UNITS = 2**50
MAX_WINDOW_MS = 3650 * 86_400_000


@dataclass(frozen=True)
class Resolvers:
    """The registered resolvers, by kind and name."""

    cost: Mapping[str, Resolver] = field(default_factory=dict)
    limit: Mapping[str, Resolver] = field(default_factory=dict)
    mode: Mapping[str, Resolver] = field(default_factory=dict)
    #: The module the resolvers are found in, by name (None: a mapping).
    module: Optional[str] = None

    def of(self, kind: str) -> Mapping[str, Resolver]:
        found: Mapping[str, Resolver] = getattr(self, kind)
        return found


class _Functions(Mapping[str, Resolver]):
    """A module's callable attributes by name: each ``code:<name>`` of the
    file is looked up when the configuration is loaded (and reloaded)."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module

    def __getitem__(self, name: str) -> Resolver:
        found = getattr(self._module, name, None)
        if name.startswith("__") or not callable(found):
            raise KeyError(name)
        return found  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return (name for name in vars(self._module) if name in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


#: What the integrations take: Resolvers, a dict of the three kinds, or a
#: module whose functions are found by the names the file gives.
ResolversSource = Union[Resolvers, Mapping[str, Mapping[str, Resolver]], ModuleType, None]

NONE = Resolvers()


def resolvers_of(source: ResolversSource) -> Resolvers:
    """``source`` as Resolvers; a TypeError for a kind that is not one
    (a typo must not leave a resolver unregistered silently)."""
    if source is None:
        return NONE
    if isinstance(source, Resolvers):
        return source
    if isinstance(source, ModuleType):
        functions = _Functions(source)
        return Resolvers(functions, functions, functions, source.__name__)
    unknown = set(source) - set(KINDS)
    if unknown:
        raise TypeError(
            f"librl: resolvers: unknown kinds {sorted(unknown)} (give cost, limit and mode)"
        )
    for kind, named in source.items():
        for name, resolver in named.items():
            if not callable(resolver):
                raise TypeError(f"librl: resolvers: the {kind} resolver {name!r} is not callable")
    cost, limit, mode = (dict(source.get(kind, {})) for kind in KINDS)
    return Resolvers(cost, limit, mode)


class Resolving(NamedTuple):
    """One resolver a request calls: its kind, the policy it is for (none
    for the mode), its name and itself."""

    kind: str
    policy: Optional[str]
    name: str
    resolver: Resolver


#: A cost resolver that raised: the 400 of a bad cost.
FAILED = object()


def resolve(calls: Sequence[Resolving], request: Any) -> List[Any]:
    """Each resolver's value for ``request``, in order (WSGI: called on
    this thread). A cost resolver that raises gives FAILED; a limit or
    mode resolver's exception is the application's error, and goes up."""
    values = []
    for call in calls:
        try:
            value = call.resolver(request)
        except Exception:
            if call.kind != "cost":
                raise
            log.exception("librl: the cost resolver %r failed (a 400)", call.name)
            value = FAILED
        if inspect.isawaitable(value):
            close = getattr(value, "close", None)
            if close is not None:
                close()  # never awaited: no "never awaited" warning
            raise TypeError(
                f"librl: the {call.kind} resolver {call.name!r} is async; "
                "a WSGI integration calls resolvers on the request's thread"
            )
        values.append(value)
    return values


async def resolve_async(calls: Sequence[Resolving], request: Any) -> List[Any]:
    """resolve(), awaiting the resolvers that are coroutine functions."""
    values = []
    for call in calls:
        try:
            value = call.resolver(request)
            if inspect.isawaitable(value):
                value = await value
        except Exception:
            if call.kind != "cost":
                raise
            log.exception("librl: the cost resolver %r failed (a 400)", call.name)
            value = FAILED
        values.append(value)
    return values


def cost_value(value: Any) -> Optional[int]:
    """A cost resolver's value as a cost: an integer from 1 to 2^50 (not a
    boolean); None for anything else (the 400)."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_UNITS:
        return value
    return None


def limit_value(name: str, value: Any) -> Optional[Tuple[int, int, Optional[int]]]:
    """A limit resolver's value: None (the policy does not apply), or
    ``(limit, window)`` or ``(limit, window, burst)``, the window in ms or
    a timedelta; a ValueError naming the resolver for anything else."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)) and len(value) in (2, 3):
        limit, window, *rest = value
        burst = rest[0] if rest else None
        if isinstance(window, datetime.timedelta):
            window = window // datetime.timedelta(milliseconds=1)
        if (
            _units(limit)
            and isinstance(window, int)
            and not isinstance(window, bool)
            and 1 <= window <= MAX_WINDOW_MS
            and (burst is None or _units(burst))
        ):
            return limit, window, burst
    raise ValueError(
        f"librl: the limit resolver {name!r} gave {value!r}: give None, or (limit, window ms) "
        "or (limit, window ms, burst), each an integer from 1 (limit and burst to 2^50, the "
        "window to 3650 days)"
    )


def _units(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_UNITS


def mode_value(name: str, value: Any) -> str:
    """A mode resolver's value: enforce, shadow or off; a ValueError
    naming the resolver for anything else."""
    if value in ("enforce", "shadow", "off") and isinstance(value, str):
        return value
    raise ValueError(
        f"librl: the mode resolver {name!r} gave {value!r}: give enforce, shadow or off"
    )
