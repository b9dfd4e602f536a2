"""Limiter: librl over redis-py's Redis and RedisCluster.

The commands are _commands.Commands; this file performs their sends with
the blocking client.
"""

from __future__ import annotations

from typing import Any, Iterator, List, Optional, Tuple, Union

from redis.client import Pipeline, Redis
from redis.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.exceptions import ResponseError, SlotNotCoveredError

from ._args import Arg, Clause, Duration
from ._cache import DenialCache
from ._cluster import RETRY_ERRORS, hint_key_positions, retries
from ._commands import Command, Commands, Send, T, check_durable
from ._types import AllDecision, Decision, KeyT, Override, OverrideEntry


def _is_async(client: object) -> bool:
    module = type(client).__module__
    return module.startswith("redis.asyncio")


#: What a cluster send retries: RedisCluster's own retries, and a MOVED or
#: ASK read off WAIT's raw connection.
RETRY_OR_REDIRECT: Tuple[type[Exception], ...] = (*RETRY_ERRORS, ResponseError)


def redirected(e: ResponseError) -> bool:
    """A MOVED or ASK reply read off a raw connection (WAIT's path)."""
    return str(e).startswith(("MOVED ", "ASK "))


class Limiter:
    """librl's commands over a redis-py ``Redis`` or ``RedisCluster``.

    In a cluster every call goes straight to the primary owning its key (no
    COMMAND GETKEYS, no MOVED in steady state); see the package README.

    ``denial_cache=True``: after a denial with retry_after_ms > 0, the same
    call is answered locally until that time has passed (see the README for
    when that is exact). ``denial_cache_size`` bounds the entries kept.

    ``durable=(numreplicas, timeout_ms)``: every call that may write (not
    PEEK, not COST 0, not a GET or LIST) is followed by ``WAIT numreplicas
    timeout_ms`` on the same connection, so that a failover cannot forget
    it; when fewer replicas acknowledge it in time,
    ``librl.DurabilityError`` is raised with the call's result attached.
    """

    def __init__(
        self,
        client: Union[Redis, RedisCluster],
        *,
        denial_cache: bool = False,
        denial_cache_size: int = 10_000,
        durable: Optional[Tuple[int, int]] = None,
    ) -> None:
        if _is_async(client):
            raise TypeError("this is an asyncio client: use librl.AsyncLimiter")
        if not isinstance(client, (Redis, RedisCluster)) or isinstance(
            client, (Pipeline, ClusterPipeline)
        ):
            raise TypeError(
                f"Limiter needs a redis.Redis or redis.RedisCluster, not {type(client).__name__}"
                " (pipelines are not supported: RL.ALL checks several limits in one call)"
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

    def fixed(
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
        """``RL.FIXED``: a fixed window of ``limit`` units per ``window``.
        ``cost=0`` reads the limiter without counting."""
        return self._run(
            self._commands.fixed(key, limit, window, aligned, cost, refund, block, override, peek)
        )

    def sliding(
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
        """``RL.SLIDING``: an exact sliding log, or the weighted two-window
        counter with ``approx=True``."""
        return self._run(
            self._commands.sliding(key, limit, window, approx, cost, refund, block, override, peek)
        )

    def token(
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
        """``RL.TOKEN``: a bucket of ``burst`` tokens (default ``rate``)
        refilled at ``rate`` per ``window``. With ``wait``, the server holds
        the reply until the reserved time: give the client a socket timeout
        longer than ``wait``."""
        return self._run(
            self._commands.token(
                key, rate, window, burst, cost, refund, reserve, wait, block, override, peek
            )
        )

    def all(self, *clauses: Clause, peek: bool = False) -> AllDecision:
        """``RL.ALL``: every clause admits the call, and records it, or none does.

        In a cluster all keys and override keys must hash to one slot (use a
        hash tag); otherwise RedisClusterException is raised before sending.
        """
        return self._run(self._commands.all(clauses, peek))

    # -- overrides ------------------------------------------------------------

    def override_set(
        self,
        okey: KeyT,
        limit: int,
        window: Duration,
        *,
        burst: Optional[int] = None,
        ttl: Optional[Duration] = None,
    ) -> None:
        """``RL.OVERRIDE SET``: store an override at ``okey`` (replacing any)."""
        self._run(self._commands.override_set(okey, limit, window, burst, ttl))

    def override_get(self, okey: KeyT) -> Optional[Override]:
        """``RL.OVERRIDE GET``: the override at ``okey``, or None."""
        return self._run(self._commands.override_get(okey))

    def override_delete(self, *okeys: KeyT) -> int:
        """``RL.OVERRIDE DEL``: delete overrides, return how many existed.

        In a cluster the keys are grouped by slot, one command per slot (each
        group all-or-nothing on WRONGTYPE, as the command is).
        """
        return self._run(self._commands.override_delete(okeys))

    def override_list(
        self,
        cursor: int = 0,
        *,
        match: Optional[KeyT] = None,
        count: Optional[int] = None,
        node: Optional[ClusterNode] = None,
    ) -> Tuple[int, List[OverrideEntry]]:
        """``RL.OVERRIDE LIST``: one step of SCAN over one server's overrides.

        With a RedisCluster, pass the ``node`` to list (one of
        ``client.get_primaries()``): cursors belong to a node. To list every
        override of a cluster, use ``override_scan_iter()``.
        """
        return self._run(self._commands.override_list(cursor, match, count, node))

    def override_scan_iter(
        self, *, match: Optional[KeyT] = None, count: Optional[int] = None
    ) -> Iterator[OverrideEntry]:
        """Every override of the server, or of every primary of a cluster
        (SCAN's contract: an override present the whole time is listed at
        least once)."""
        nodes: List[Any] = self._client.get_primaries() if self._cluster else [None]
        for node in nodes:
            cursor = 0
            while True:
                cursor, entries = self.override_list(cursor, match=match, count=count, node=node)
                yield from entries
                if cursor == 0:
                    break

    def clear_denial_cache(self) -> None:
        """Forget every cached denial (no-op without the denial cache)."""
        self._commands.clear_cache()

    # -- sending --------------------------------------------------------------

    def _run(self, command: Command[T]) -> T:
        """Performs a command's sends until it returns."""
        try:
            send = next(command)
            while True:
                try:
                    reply = self._send(send)
                except Exception as e:
                    send = command.throw(e)
                else:
                    send = command.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _send(self, send: Send) -> Any:
        client = self._client
        if not self._cluster:
            if send.wait is None:
                return client.execute_command(*send.argv)
            return _with_wait(client.connection_pool, send.argv, send.wait)
        if send.node is not None:
            return client.execute_command(*send.argv, target_nodes=send.node)
        parser = getattr(client, "commands_parser", None)
        if getattr(parser, "commands", None) is not self._hinted:
            self._hinted = hint_key_positions(parser)
        attempt = 0
        while True:
            try:
                node = client.get_node_from_key(send.route)
                if send.wait is None:
                    return client.execute_command(*send.argv, target_nodes=node)
                return _with_wait(node.redis_connection.connection_pool, send.argv, send.wait)
            except RETRY_OR_REDIRECT as e:
                if isinstance(e, ResponseError) and not redirected(e):
                    raise
                attempt += 1
                if attempt > self._retries:
                    raise
                # redis-py refreshes its slot map itself on a connection error
                # or CLUSTERDOWN; a slot missing from the map (or, on WAIT's
                # raw connection, a redirection) means it is stale.
                if isinstance(e, (SlotNotCoveredError, ResponseError)):
                    client.nodes_manager.initialize()


def _with_wait(pool: Any, argv: List[Arg], wait: Tuple[int, int]) -> Tuple[Any, Any]:
    """``argv`` then ``WAIT`` on one connection of ``pool`` (WAIT counts the
    replicas that have this connection's writes), in one round trip."""
    conn = pool.get_connection()
    try:
        conn.send_packed_command(conn.pack_commands([argv, ("WAIT", *wait)]))
        try:
            reply = conn.read_response()
        except ResponseError:
            conn.read_response()  # WAIT's reply, so the connection stays in step
            raise
        return reply, conn.read_response()
    except BaseException as e:
        if not isinstance(e, ResponseError):
            conn.disconnect()  # a half-read connection goes back empty
        raise
    finally:
        pool.release(conn)
