"""AsyncLimiter: librl over redis.asyncio's Redis and RedisCluster.

The commands and the public methods are _commands and _limiting's, as
Limiter's; this file performs their sends with redis.asyncio.
"""

from __future__ import annotations

import functools
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

from ._cluster import RETRY_OR_REDIRECT, hint_key_positions, reload_or_raise
from ._commands import Done, Send, T, step, with_wait
from ._limiting import CommandFunction, Limiting, P
from ._types import KeyT, OverrideEntry


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

    # -- sending --------------------------------------------------------------

    async def _send(self, send: Send) -> Any:
        client = self._client
        if not self._cluster:
            if send.wait is None:
                return await client.execute_command(*send.argv)
            pool = client.connection_pool
            conn = await pool.get_connection()
            try:
                return await drive(with_wait(conn, send.argv, send.wait), _call)
            finally:
                await pool.release(conn)
        if send.node is not None:
            return await client.execute_command(*send.argv, target_nodes=send.node)
        attempt = 0
        while True:
            try:
                # A no-op once initialized; after a connection error or
                # CLUSTERDOWN redis-py asks for it again, and it reloads the
                # slot map (and the commands table: hint it again).
                await client.initialize()
                parser = getattr(client, "commands_parser", None)
                if getattr(parser, "commands", None) is not self._hinted:
                    self._hinted = hint_key_positions(parser)
                node = client.get_node_from_key(send.route)
                if send.wait is None:
                    return await client.execute_command(*send.argv, target_nodes=node)
                conn = node.acquire_connection()
                try:
                    return await drive(with_wait(conn, send.argv, send.wait), _call)
                finally:
                    node.release(conn)
            except RETRY_OR_REDIRECT as e:
                attempt += 1
                if reload_or_raise(e, attempt, self._retries):
                    await client.nodes_manager.initialize()
