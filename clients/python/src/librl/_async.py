"""AsyncLimiter: librl over redis.asyncio's Redis and RedisCluster.

The commands are _commands.Commands, as Limiter's; this file performs their
sends with redis.asyncio.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, List, Optional, Tuple, Union

from redis.asyncio.client import Pipeline, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import ResponseError, SlotNotCoveredError

from ._args import Arg, Clause, Duration
from ._cache import DenialCache
from ._cluster import hint_key_positions, retries
from ._commands import Command, Commands, Send, T, check_durable
from ._sync import RETRY_OR_REDIRECT, redirected
from ._types import AllDecision, Decision, KeyT, Override, OverrideEntry


class AsyncLimiter:
    """librl's commands over a ``redis.asyncio`` ``Redis`` or ``RedisCluster``:
    the same methods and options as Limiter (see its docstring), awaited;
    ``override_scan_iter`` is an async iterator.
    """

    def __init__(
        self,
        client: Union[Redis, RedisCluster],
        *,
        denial_cache: bool = False,
        denial_cache_size: int = 10_000,
        durable: Optional[Tuple[int, int]] = None,
    ) -> None:
        if not isinstance(client, (Redis, RedisCluster)) or isinstance(client, Pipeline):
            raise TypeError(
                "AsyncLimiter needs a redis.asyncio.Redis or redis.asyncio.RedisCluster, not "
                f"{type(client).__module__}.{type(client).__name__} (librl.Limiter takes "
                "synchronous clients; pipelines are not supported: RL.ALL checks several "
                "limits in one call)"
            )
        self._client: Any = client
        self._cluster = isinstance(client, RedisCluster)
        cache = DenialCache(denial_cache_size) if denial_cache else None
        self._commands = Commands(client, self._cluster, cache, check_durable(durable))
        self._hinted: Any = None
        self._retries = retries(client) if self._cluster else 0

    @property
    def client(self) -> Union[Redis, RedisCluster]:
        """The redis-py client this limiter sends through."""
        return self._client  # type: ignore[no-any-return]

    # -- the limiters ---------------------------------------------------------

    async def fixed(
        self,
        key: KeyT,
        limit: int,
        window: Duration,
        *,
        aligned: bool = False,
        cost: int = 1,
        refund: Optional[int] = None,
        block: Optional[Duration] = None,
        override: Optional[KeyT] = None,
        peek: bool = False,
    ) -> Decision:
        """``Limiter.fixed``, awaited."""
        return await self._run(
            self._commands.fixed(key, limit, window, aligned, cost, refund, block, override, peek)
        )

    async def sliding(
        self,
        key: KeyT,
        limit: int,
        window: Duration,
        *,
        approx: bool = False,
        cost: int = 1,
        refund: Optional[int] = None,
        block: Optional[Duration] = None,
        override: Optional[KeyT] = None,
        peek: bool = False,
    ) -> Decision:
        """``Limiter.sliding``, awaited."""
        return await self._run(
            self._commands.sliding(key, limit, window, approx, cost, refund, block, override, peek)
        )

    async def token(
        self,
        key: KeyT,
        rate: int,
        window: Duration,
        *,
        burst: Optional[int] = None,
        cost: int = 1,
        refund: Optional[int] = None,
        reserve: Optional[Duration] = None,
        wait: Optional[Duration] = None,
        block: Optional[Duration] = None,
        override: Optional[KeyT] = None,
        peek: bool = False,
    ) -> Decision:
        """``Limiter.token``, awaited."""
        return await self._run(
            self._commands.token(
                key, rate, window, burst, cost, refund, reserve, wait, block, override, peek
            )
        )

    async def all(self, *clauses: Clause, peek: bool = False) -> AllDecision:
        """``Limiter.all``, awaited."""
        return await self._run(self._commands.all(clauses, peek))

    # -- overrides ------------------------------------------------------------

    async def override_set(
        self,
        okey: KeyT,
        limit: int,
        window: Duration,
        *,
        burst: Optional[int] = None,
        ttl: Optional[Duration] = None,
    ) -> None:
        """``Limiter.override_set``, awaited."""
        await self._run(self._commands.override_set(okey, limit, window, burst, ttl))

    async def override_get(self, okey: KeyT) -> Optional[Override]:
        """``Limiter.override_get``, awaited."""
        return await self._run(self._commands.override_get(okey))

    async def override_delete(self, *okeys: KeyT) -> int:
        """``Limiter.override_delete``, awaited."""
        return await self._run(self._commands.override_delete(okeys))

    async def override_list(
        self,
        cursor: int = 0,
        *,
        match: Optional[KeyT] = None,
        count: Optional[int] = None,
        node: Optional[ClusterNode] = None,
    ) -> Tuple[int, List[OverrideEntry]]:
        """``Limiter.override_list``, awaited."""
        return await self._run(self._commands.override_list(cursor, match, count, node))

    async def override_scan_iter(
        self, *, match: Optional[KeyT] = None, count: Optional[int] = None
    ) -> AsyncIterator[OverrideEntry]:
        """``Limiter.override_scan_iter``, as an async iterator."""
        if self._cluster:
            await self._client.initialize()
        nodes: List[Any] = self._client.get_primaries() if self._cluster else [None]
        for node in nodes:
            cursor = 0
            while True:
                cursor, entries = await self.override_list(
                    cursor, match=match, count=count, node=node
                )
                for entry in entries:
                    yield entry
                if cursor == 0:
                    break

    def clear_denial_cache(self) -> None:
        """Forget every cached denial (no-op without the denial cache)."""
        self._commands.clear_cache()

    # -- sending --------------------------------------------------------------

    async def _run(self, command: Command[T]) -> T:
        """Performs a command's sends until it returns."""
        try:
            send = next(command)
            while True:
                try:
                    reply = await self._send(send)
                except Exception as e:
                    send = command.throw(e)
                else:
                    send = command.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _send(self, send: Send) -> Any:
        client = self._client
        if not self._cluster:
            if send.wait is None:
                return await client.execute_command(*send.argv)
            pool = client.connection_pool
            conn = await pool.get_connection()
            try:
                return await _with_wait(conn, send.argv, send.wait)
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
                    return await _with_wait(conn, send.argv, send.wait)
                finally:
                    node.release(conn)
            except RETRY_OR_REDIRECT as e:
                if isinstance(e, ResponseError) and not redirected(e):
                    raise
                attempt += 1
                if attempt > self._retries:
                    raise
                # A slot missing from the map (or, on WAIT's raw connection,
                # a redirection) means the map is stale.
                if isinstance(e, (SlotNotCoveredError, ResponseError)):
                    await client.nodes_manager.initialize()


async def _with_wait(conn: Any, argv: List[Arg], wait: Tuple[int, int]) -> Tuple[Any, Any]:
    """``argv`` then ``WAIT`` on one connection (WAIT counts the replicas
    that have this connection's writes), in one round trip."""
    try:
        await conn.send_packed_command(conn.pack_commands([argv, ("WAIT", *wait)]))
        try:
            reply = await conn.read_response()
        except ResponseError:
            await conn.read_response()  # WAIT's reply, so the connection stays in step
            raise
        return reply, await conn.read_response()
    except BaseException as e:
        if not isinstance(e, ResponseError):
            await conn.disconnect()  # a half-read connection goes back empty
        raise
