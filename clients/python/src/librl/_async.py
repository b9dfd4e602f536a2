"""AsyncLimiter: librl over redis.asyncio's Redis and RedisCluster.

The commands and the public methods are _commands and _limiting's, as
Limiter's; this file performs their sends with redis.asyncio.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from time import monotonic
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Optional,
    Union,
)

from redis.asyncio.client import Pipeline, Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import AskError, MovedError

from ._args import Concurrent, Duration
from ._cluster import (
    RETRY_OR_REDIRECT,
    Retrying,
    asked_node,
    hint_key_positions,
    patch_slot_map,
)
from ._commands import Done, Send, T, exchange, step
from ._leases import AsyncLease, AsyncLeaseScope, OnLost, check_clause, held_decision
from ._limiting import CommandFunction, Limiting, P
from ._types import DurabilityError, KeyT, OverrideEntry


async def drive(steps: Generator[Any, Any, T], perform: Callable[[Any], Awaitable[Any]]) -> T:
    """_sync.drive, each operation awaited."""
    op = step(steps)
    while not isinstance(op, Done):
        try:
            reply = await perform(op)
        except BaseException as e:
            op = step(steps, error=e)
        else:
            op = step(steps, reply)
    return op.value  # type: ignore[no-any-return]


async def _call(op: Callable[[], Awaitable[Any]]) -> Any:
    return await op()


class AsyncLimiter(Limiting[Union[Redis, RedisCluster]]):
    """librl's commands over a ``redis.asyncio`` ``Redis`` or ``RedisCluster``:
    the same methods and options as Limiter (see its docstring), awaited;
    ``override_scan_iter`` is an async iterator.
    """

    _cluster_client = RedisCluster

    @staticmethod
    def _method(command: CommandFunction[P, T]) -> Callable[..., Any]:
        @functools.wraps(command)
        async def method(self: AsyncLimiter, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return await drive(command(self._commands, *args, **kwargs), self._send)

        method.__qualname__ = f"AsyncLimiter.{command.__name__}"
        return method

    def _check_client(self, client: object) -> None:
        if not isinstance(client, (Redis, RedisCluster)) or isinstance(client, Pipeline):
            raise TypeError(
                "AsyncLimiter needs a redis.asyncio.Redis or redis.asyncio.RedisCluster, not "
                f"{type(client).__module__}.{type(client).__name__} (librl.Limiter takes "
                "synchronous clients; pipelines are not supported: RL.ALL checks several "
                "limits in one call)"
            )

    async def override_scan_iter(
        self, *, match: Optional[KeyT] = None, count: Optional[int] = None
    ) -> AsyncIterator[OverrideEntry]:
        """``Limiter.override_scan_iter``, as an async iterator."""
        if self._cluster:
            await self._client.initialize()
        for node in self._primaries():
            cursor = 0
            while True:
                cursor, entries = await self.override_list(
                    cursor, match=match, count=count, node=node
                )
                for entry in entries:
                    yield entry
                if cursor == 0:
                    break

    # -- concurrency limits -----------------------------------------------------

    async def acquire(
        self,
        key: KeyT,
        limit: int,
        lease: Duration,
        *,
        cost: int = 1,
        wait: Optional[Duration] = None,
        override: Optional[KeyT] = None,
        peek: bool = False,
    ) -> AsyncLease:
        """``Limiter.acquire``: an AsyncLease (``await lease.release()``)."""
        clause = Concurrent(key, limit, lease, cost=cost, override=override)
        return await self._acquire(clause, wait, peek)

    def concurrent(
        self,
        key: KeyT,
        limit: int,
        lease: Duration,
        *,
        cost: int = 1,
        wait: Optional[Duration] = None,
        override: Optional[KeyT] = None,
        keep_alive: bool = False,
        on_lost: Optional[OnLost] = None,
    ) -> AsyncLeaseScope:
        """``Limiter.concurrent``, as ``async with limiter.concurrent(...) as lease:``."""
        clause = Concurrent(key, limit, lease, cost=cost, override=override)
        return AsyncLeaseScope(self, clause, wait, keep_alive, on_lost)

    def held_lease(self, clause: Concurrent, lease_id: int) -> AsyncLease:
        """``Limiter.held_lease``."""
        return AsyncLease(self, check_clause(clause), held_decision(clause, lease_id), None)

    async def _acquire(
        self, clause: Concurrent, wait: Optional[Duration], peek: bool
    ) -> AsyncLease:
        sent = monotonic()
        try:
            decision = await drive(self._commands.acquire(clause, wait, peek), self._send)
        except DurabilityError as e:
            e.reply = AsyncLease(self, clause, e.reply, sent)
            raise
        return AsyncLease(self, clause, decision, sent)

    async def _run(self, command: Generator[Any, Any, T]) -> T:
        return await drive(command, self._send)

    # -- sending --------------------------------------------------------------

    async def _send(self, send: Send) -> Any:
        client = self._client
        if not self._cluster:
            if not send.own_connection:
                return await client.execute_command(*send.argv)
            pool = client.connection_pool
            conn = await pool.get_connection()
            try:
                return await drive(exchange(conn, send, _read_held), _call)
            finally:
                await pool.release(conn)
        if send.node is not None:
            return await client.execute_command(*send.argv, target_nodes=send.node)
        # Every call goes on a connection of the node's own, ASKING included:
        # redis.asyncio sends ASKING and the call on two pooled connections
        # (so the call often meets the target without it and gets MOVED),
        # and closes every connection of the client after a few MOVEDs, under
        # calls in flight; a migrating slot sends many of both.
        retrying: Optional[Retrying] = None
        asked: Any = None  # the node an ASK named
        while True:
            try:
                # A no-op once initialized; the first call, and one after a
                # connection error, loads the slot map (and the commands
                # table, whose hint serves the client's own calls: _cluster).
                await client.initialize()
                parser = getattr(client, "commands_parser", None)
                if getattr(parser, "commands", None) is not self._hinted:
                    self._hinted = hint_key_positions(parser)
                node = asked or client.get_node_from_key(send.route)
                conn = node.acquire_connection()
                try:
                    return await drive(exchange(conn, send, _read_held, asked is not None), _call)
                finally:
                    _release(node, conn)
            except RETRY_OR_REDIRECT as e:
                if retrying is None:
                    retrying = self._retrying(send)
                pause, reload = retrying.after(e)
                asked = asked_node(client, e)
                if isinstance(e, MovedError):
                    moved = patch_slot_map(client, e)
                    if inspect.isawaitable(moved):
                        await moved
                elif reload or (asked is None and isinstance(e, AskError)):
                    await client.nodes_manager.initialize()
                if pause:
                    await asyncio.sleep(pause)


def _release(node: Any, conn: Any) -> None:
    """Gives ``conn`` back to its node (redis.asyncio 5 has no release())."""
    release = getattr(node, "release", None)
    if callable(release):
        release(conn)
    else:
        node._free.append(conn)


def _read_held(conn: Any, timeout: float) -> Callable[[], Awaitable[Any]]:
    """A held reply's read: it may take ``timeout`` seconds."""
    return functools.partial(conn.read_response, timeout=timeout)
