"""What Limiter and AsyncLimiter share: their options, their state, and
their public methods, each written once as a command of _commands.Commands
(its signature and docstring) and bound through ``Method``. A subclass only
says how to perform a command's sends (``_method``) and which clients it
takes (``_check_client``).
"""

from __future__ import annotations

import inspect
import sys
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Coroutine,
    Generic,
    List,
    Optional,
    Tuple,
    TypeVar,
    Union,
    overload,
)

from . import _args
from ._args import Duration
from ._cache import DenialCache
from ._cluster import Retrying, retries
from ._commands import Command, Commands, Send, T, check_durable
from ._types import KeyT

if sys.version_info >= (3, 10):
    from typing import Concatenate, ParamSpec
else:  # pragma: no cover
    from typing_extensions import Concatenate, ParamSpec

if TYPE_CHECKING:
    from ._async import AsyncLimiter
    from ._sync import Limiter

P = ParamSpec("P")

#: How long a cluster call keeps retrying while its slot migrates, unless
#: ``try_again_wait`` says otherwise: a slot of a few thousand keys takes a
#: second or two to move.
DEFAULT_TRY_AGAIN_WAIT_S = 5.0
ClientT = TypeVar("ClientT")

#: A command of Commands, as Method takes it.
CommandFunction = Callable[Concatenate[Commands, P], Command[T]]


class Method(Generic[P, T]):
    """A public method of both limiters, written once as a command of
    Commands. Each limiter class gets its own function for it when it is
    defined (``Limiting.__init_subclass__``, from the class's ``_method``):
    on a Limiter it returns the command's result, on an AsyncLimiter an
    awaitable of it, as the overloads of ``__get__`` tell type checkers."""

    def __init__(self, command: CommandFunction[P, T]) -> None:
        self.command = command

    @overload
    def __get__(self, obj: None, owner: type) -> Callable[..., Any]: ...
    @overload
    def __get__(self, obj: Limiter, owner: type) -> Callable[P, T]: ...
    @overload
    def __get__(self, obj: AsyncLimiter, owner: type) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, obj: Optional[Limiting[Any]], owner: type) -> Callable[..., Any]:
        # Only Limiting itself, which sends nothing, still holds the descriptor.
        return self.command

    def function(self, owner: Any) -> Callable[..., Any]:
        """``owner``'s function for the command: it performs the sends, and
        help() and inspect show the command's parameters and what the
        method returns (awaited, for AsyncLimiter), not the generator."""
        function = owner._method(self.command)
        signature = inspect.signature(self.command)
        result = str(signature.return_annotation)
        if result.startswith("Command[") and result.endswith("]"):
            signature = signature.replace(return_annotation=result[len("Command[") : -1])
        function.__signature__ = signature
        return function  # type: ignore[no-any-return]


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
        denial_cache_max_age: Union[float, Duration] = 1.0,
        durable: Optional[Tuple[int, int]] = None,
        try_again_wait: Union[float, Duration] = DEFAULT_TRY_AGAIN_WAIT_S,
    ) -> None:
        self._check_client(client)
        self._client: Any = client
        self._cluster = isinstance(client, self._cluster_client)
        max_age = _args.seconds("denial_cache_max_age", denial_cache_max_age)
        cache = DenialCache(denial_cache_size, max_age) if denial_cache else None
        self._commands = Commands(client, self._cluster, cache, check_durable(durable))
        #: redis-py's commands table as last hinted (see _cluster).
        self._hinted: Any = None
        self._retries = retries(client) if self._cluster else 0
        self._try_again_wait = _args.seconds("try_again_wait", try_again_wait)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A class that says how to send (Limiter, AsyncLimiter) gets a plain
        # function per command, so a call costs no descriptor lookup; its
        # subclasses inherit them, and keep any method they define.
        super().__init_subclass__(**kwargs)
        if "_method" in vars(cls):
            for name, method in vars(Limiting).items():
                if isinstance(method, Method) and name not in vars(cls):
                    setattr(cls, name, method.function(cls))

    @staticmethod
    def _method(command: CommandFunction[P, T]) -> Callable[..., Any]:
        """The class's function for a command: performs its sends."""
        raise NotImplementedError

    def _retrying(self, send: Send) -> Retrying:
        """A cluster send's retries, once its first try failed: a held call
        is not resent after a connection error (it may have run)."""
        return Retrying(
            self._retries, self._try_again_wait, resend=send.hold is None, split=send.split
        )

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
        """Forget every cached denial (no-op without the denial cache): an
        override changed elsewhere (another process, redis-cli) applies at
        once instead of within ``denial_cache_max_age``."""
        self._commands.clear_cache()

    def forget_denials(self, *keys: KeyT) -> None:
        """Forget the cached denials of calls naming any of ``keys``
        (limiter keys or override keys; no-op without the denial cache): a
        key deleted or refunded elsewhere applies at once instead of within
        ``denial_cache_max_age``."""
        checked = [_args.check_key("key", key) for key in keys]
        if self._commands.cache is not None:
            self._commands.cache.forget_keys(checked)

    def _primaries(self) -> List[Any]:
        """The nodes override_scan_iter lists: every primary of a cluster,
        or None, the one server."""
        return self._client.get_primaries() if self._cluster else [None]
