"""What Limiter and AsyncLimiter share: their options, their state, and
their public methods, each written once as a command of _commands.Commands
(its signature and docstring) and bound through ``Method``. A subclass only
says how to perform a command's sends (``_method``) and which clients it
takes (``_check_client``).
"""

from __future__ import annotations

import inspect
import sys
from types import MethodType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Coroutine,
    Dict,
    Generic,
    List,
    Optional,
    Tuple,
    TypeVar,
    overload,
)

from ._cache import DenialCache
from ._cluster import retries
from ._commands import Command, Commands, T, check_durable

if sys.version_info >= (3, 10):
    from typing import Concatenate, ParamSpec
else:  # pragma: no cover
    from typing_extensions import Concatenate, ParamSpec

if TYPE_CHECKING:
    from ._async import AsyncLimiter
    from ._sync import Limiter

P = ParamSpec("P")
ClientT = TypeVar("ClientT")

#: A command of Commands, as Method takes it.
CommandFunction = Callable[Concatenate[Commands, P], Command[T]]


class Method(Generic[P, T]):
    """A public method of both limiters: on a Limiter it returns the
    command's result, on an AsyncLimiter an awaitable of it. The function
    is made once per class, by the class's ``_method``."""

    def __init__(self, command: CommandFunction[P, T]) -> None:
        self.command = command
        self.functions: Dict[type, Callable[..., Any]] = {}

    @overload
    def __get__(self, obj: None, owner: type) -> Callable[..., Any]: ...
    @overload
    def __get__(self, obj: Limiter, owner: type) -> Callable[P, T]: ...
    @overload
    def __get__(self, obj: AsyncLimiter, owner: type) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, obj: Optional[Limiting[Any]], owner: type) -> Callable[..., Any]:
        function = self.functions.get(owner)
        if function is None:
            function = self.functions[owner] = owner._method(self.command)  # type: ignore[attr-defined]
            # help() and inspect show the command's parameters and what the
            # method returns (awaited, for AsyncLimiter), not the generator.
            signature = inspect.signature(self.command)
            result = str(signature.return_annotation)
            if result.startswith("Command[") and result.endswith("]"):
                signature = signature.replace(return_annotation=result[len("Command[") : -1])
            function.__signature__ = signature
        return function if obj is None else MethodType(function, obj)


class Limiting(Generic[ClientT]):
    """The base of Limiter and AsyncLimiter (see the module docstring)."""

    #: The client class that makes this limiter route by slot.
    _cluster_client: type = type(None)

    def __init__(
        self,
        client: ClientT,
        *,
        denial_cache: bool = False,
        denial_cache_size: int = 10_000,
        durable: Optional[Tuple[int, int]] = None,
    ) -> None:
        self._check_client(client)
        self._client: Any = client
        self._cluster = isinstance(client, self._cluster_client)
        cache = DenialCache(denial_cache_size) if denial_cache else None
        self._commands = Commands(client, self._cluster, cache, check_durable(durable))
        #: redis-py's commands table as last hinted (see _cluster).
        self._hinted: Any = None
        self._retries = retries(client) if self._cluster else 0

    @staticmethod
    def _method(command: CommandFunction[P, T]) -> Callable[..., Any]:
        """The class's function for a command: performs its sends."""
        raise NotImplementedError

    def _check_client(self, client: object) -> None:
        """Raises TypeError for a client this limiter cannot send through."""
        raise NotImplementedError

    @property
    def client(self) -> ClientT:
        """The redis-py client this limiter sends through."""
        return self._client  # type: ignore[no-any-return]

    # -- the commands ---------------------------------------------------------

    fixed = Method(Commands.fixed)
    sliding = Method(Commands.sliding)
    token = Method(Commands.token)
    all = Method(Commands.all)
    override_set = Method(Commands.override_set)
    override_get = Method(Commands.override_get)
    override_delete = Method(Commands.override_delete)
    override_list = Method(Commands.override_list)

    def clear_denial_cache(self) -> None:
        """Forget every cached denial (no-op without the denial cache)."""
        self._commands.clear_cache()

    def _primaries(self) -> List[Any]:
        """The nodes override_scan_iter lists: every primary of a cluster,
        or None, the one server."""
        return self._client.get_primaries() if self._cluster else [None]
