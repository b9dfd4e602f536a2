"""Limiter: librl over redis-py's Redis and RedisCluster.

The commands and the public methods are _commands and _limiting's; this
file performs their sends with the blocking client.
"""

from __future__ import annotations

import functools
import time
from time import monotonic
from typing import Any, Callable, Generator, Iterator, Optional, Union

from redis.client import Pipeline, Redis
from redis.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import AskError, MovedError, TimeoutError

from ._args import Concurrent, Duration
from ._cluster import (
    RETRY_OR_REDIRECT,
    Retrying,
    asked_node,
    hint_key_positions,
    patch_slot_map,
)
from ._commands import Done, Send, T, exchange, step
from ._leases import Lease, LeaseScope, OnLost, check_clause, held_decision
from ._limiting import CommandFunction, Limiting, P
from ._types import DurabilityError, KeyT, OverrideEntry


def _is_async(client: object) -> bool:
    module = type(client).__module__
    return module.startswith("redis.asyncio")


def drive(steps: Generator[Any, Any, T], perform: Callable[[Any], Any]) -> T:
    """Runs a generator of operations (see _commands.step) to its result,
    each operation performed by ``perform``."""
    op = step(steps)
    while not isinstance(op, Done):
        try:
            reply = perform(op)
        except BaseException as e:
            op = step(steps, error=e)
        else:
            op = step(steps, reply)
    return op.value  # type: ignore[no-any-return]


def _call(op: Callable[[], Any]) -> Any:
    return op()


class Limiter(Limiting[Union[Redis, RedisCluster]]):
    """librl's commands over a redis-py ``Redis`` or ``RedisCluster``.

    In a cluster every call goes straight to the primary owning its key (no
    COMMAND GETKEYS, no MOVED in steady state); see the package README.

    ``denial_cache=True``: after a denial with retry_after_ms > 0, the same
    call is answered locally until that time has passed, or
    ``denial_cache_max_age`` (1 s) has, whichever is sooner: the bound on
    how long a change made elsewhere (a DEL, an override) takes to apply;
    ``forget_denials(*keys)`` and ``clear_denial_cache()`` apply one at once
    (see the README). ``denial_cache_size`` bounds the entries kept.

    ``try_again_wait`` (5 s): in a cluster, how long a call whose slot is
    migrating keeps retrying TRYAGAIN (see the README); 0 turns it off.

    Concurrency limits: ``acquire`` returns a Lease, ``concurrent`` is the
    ``with`` scope that holds one, ``held_lease`` names one taken elsewhere.

    ``durable=(numreplicas, timeout_ms)``: every call that may write (not
    PEEK, not COST 0, not a GET or LIST) is followed by ``WAIT numreplicas
    timeout_ms`` on the same connection, so that a failover cannot forget
    it; when fewer replicas acknowledge it in time,
    ``librl.DurabilityError`` is raised with the call's result attached.
    """

    _cluster_client = RedisCluster

    @staticmethod
    def _method(command: CommandFunction[P, T]) -> Callable[..., Any]:
        @functools.wraps(command)
        def method(self: Limiter, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return drive(command(self._commands, *args, **kwargs), self._send)

        method.__qualname__ = f"Limiter.{command.__name__}"
        return method

    def _check_client(self, client: object) -> None:
        if _is_async(client):
            raise TypeError("this is an asyncio client: use librl.AsyncLimiter")
        if not isinstance(client, (Redis, RedisCluster)) or isinstance(
            client, (Pipeline, ClusterPipeline)
        ):
            raise TypeError(
                f"Limiter needs a redis.Redis or redis.RedisCluster, not {type(client).__name__}"
                " (pipelines are not supported: RL.ALL checks several limits in one call)"
            )

    def override_scan_iter(
        self, *, match: Optional[KeyT] = None, count: Optional[int] = None
    ) -> Iterator[OverrideEntry]:
        """Every override of the server, or of every primary of a cluster
        (SCAN's contract: an override present the whole time is listed at
        least once)."""
        for node in self._primaries():
            cursor = 0
            while True:
                cursor, entries = self.override_list(cursor, match=match, count=count, node=node)
                yield from entries
                if cursor == 0:
                    break

    # -- concurrency limits -----------------------------------------------------

    def acquire(
        self,
        key: KeyT,
        limit: int,
        lease: Duration,
        *,
        cost: int = 1,
        wait: Optional[Duration] = None,
        override: Optional[KeyT] = None,
        peek: bool = False,
    ) -> Lease:
        """``RL.CONCURRENT``: takes ``cost`` slots of ``limit`` as one lease
        that ends by itself ``lease`` after it was taken, unless renewed.
        Returns the Lease, held or refused (``bool(lease)``; a refusal is not
        an error): release it when the work is done, or use
        ``concurrent()``, which does. ``wait``: a refused call waits for a
        slot up to that long, on a connection of its own. ``override``: the
        override's limit and window replace ``limit`` and ``lease``. With
        ``durable=``, a DurabilityError's ``reply`` is the Lease, held on
        the primary."""
        clause = Concurrent(key, limit, lease, cost=cost, override=override)
        return self._acquire(clause, wait, peek)

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
    ) -> LeaseScope:
        """``with limiter.concurrent(key, limit, lease) as lease:`` runs the
        block holding ``cost`` slots, released when it ends, however it
        ends. Refused (the limit is full, and stayed full for ``wait``):
        raises ``librl.LeaseRefused``, whose ``decision`` says when to retry.
        ``keep_alive=True`` renews the lease in the background every third
        of its length, for work that may outlast it (``lease.keep_alive``);
        ``on_lost`` is told if it is lost. The arguments are acquire's."""
        clause = Concurrent(key, limit, lease, cost=cost, override=override)
        return LeaseScope(self, clause, wait, keep_alive, on_lost)

    def held_lease(self, clause: Concurrent, lease_id: int) -> Lease:
        """The lease ``lease_id`` of the concurrency limit ``clause`` names,
        taken elsewhere: by a ``librl.Concurrent`` clause of ``all()``
        (``decision.decisions[i].lease_id``), or by another thread or
        process that handed the id over. Nothing is sent: release, renew or
        keep_alive it as an acquired one (keep_alive renews it at once)."""
        return Lease(self, check_clause(clause), held_decision(clause, lease_id), None)

    def _acquire(self, clause: Concurrent, wait: Optional[Duration], peek: bool) -> Lease:
        sent = monotonic()
        try:
            decision = drive(self._commands.acquire(clause, wait, peek), self._send)
        except DurabilityError as e:
            e.reply = Lease(self, clause, e.reply, sent)
            raise
        return Lease(self, clause, decision, sent)

    def _run(self, command: Generator[Any, Any, T]) -> T:
        return drive(command, self._send)

    # -- sending --------------------------------------------------------------

    def _send(self, send: Send) -> Any:
        client = self._client
        if not self._cluster:
            if not send.own_connection:
                return client.execute_command(*send.argv)
            return _exchange(client.connection_pool, send)
        if send.node is not None:
            return client.execute_command(*send.argv, target_nodes=send.node)
        parser = getattr(client, "commands_parser", None)
        if getattr(parser, "commands", None) is not self._hinted:
            self._hinted = hint_key_positions(parser)
        # Every call goes on a connection of the node's own, ASKING included,
        # as AsyncLimiter's do: redis-py's own redirect loop resends a call
        # that met TRYAGAIN after an ASK to the target without ASKING (MOVED
        # back), and reloads the whole slot map every few MOVEDs.
        retrying: Optional[Retrying] = None
        asked: Any = None  # the node an ASK named
        while True:
            try:
                node = asked or client.get_node_from_key(send.route)
                pool = (node.redis_connection or client.get_redis_connection(node)).connection_pool
                return _exchange(pool, send, asked is not None)
            except RETRY_OR_REDIRECT as e:
                if retrying is None:
                    retrying = self._retrying(send)
                pause, reload = retrying.after(e)
                asked = asked_node(client, e)
                if isinstance(e, MovedError):
                    patch_slot_map(client, e)
                elif reload or (asked is None and isinstance(e, AskError)):
                    client.nodes_manager.initialize()
                if pause:
                    time.sleep(pause)


def _read_held(conn: Any, timeout: float) -> Callable[[], Any]:
    """A held reply's read: the reply may take ``timeout`` seconds to start
    (can_read, as every redis-py since 5 has it), the rest comes at once."""

    def read() -> Any:
        if not conn.can_read(timeout=timeout):
            raise TimeoutError(
                f"librl: no reply within {timeout:.3f} s (the call's wait and grace)"
            )
        return conn.read_response()

    return read


def _exchange(pool: Any, send: Send, asking: bool = False) -> Any:
    """``send`` on a connection of its own from ``pool`` (_commands.exchange)."""
    conn = pool.get_connection()
    try:
        return drive(exchange(conn, send, _read_held, asking), _call)
    finally:
        pool.release(conn)
