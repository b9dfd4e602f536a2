"""Limiter: librl over redis-py's Redis and RedisCluster."""

from __future__ import annotations

from time import monotonic
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

from redis.client import Pipeline, Redis
from redis.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.exceptions import SlotNotCoveredError

from . import _args
from ._args import Arg, Clause, Duration
from ._cache import DenialCache
from ._cluster import RETRY_ERRORS, hint_key_positions, one_slot, retries
from ._types import (
    AllDecision,
    Decision,
    KeyT,
    Override,
    OverrideEntry,
    parse_all,
    parse_decision,
    parse_list,
    parse_override,
)

R = TypeVar("R", Decision, AllDecision)


def _is_async(client: object) -> bool:
    module = type(client).__module__
    return module.startswith("redis.asyncio")


class Limiter:
    """librl's commands over a redis-py ``Redis`` or ``RedisCluster``.

    In a cluster every call goes straight to the primary owning its key (no
    COMMAND GETKEYS, no MOVED in steady state); see the package README.

    ``denial_cache=True``: after a denial with retry_after_ms > 0, the same
    call is answered locally until that time has passed (see the README for
    when that is exact). ``denial_cache_size`` bounds the entries kept.
    """

    def __init__(
        self,
        client: Union[Redis, RedisCluster],
        *,
        denial_cache: bool = False,
        denial_cache_size: int = 10_000,
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
        self._cache = DenialCache(denial_cache_size) if denial_cache else None
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
        """``RL.FIXED``: a fixed window of ``limit`` units per ``window``."""
        argv = _args.fixed_args(key, limit, window, aligned, cost, refund, block, override)
        return self._one("RL.FIXED", argv, override, refund is not None, peek)

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
        argv = _args.sliding_args(key, limit, window, approx, cost, refund, block, override)
        return self._one("RL.SLIDING", argv, override, refund is not None, peek)

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
        argv = _args.token_args(
            key, rate, window, burst, cost, refund, reserve, wait, block, override
        )
        return self._one("RL.TOKEN", argv, override, refund is not None, peek)

    def all(self, *clauses: Clause, peek: bool = False) -> AllDecision:
        """``RL.ALL``: every clause admits the call, and records it, or none does.

        In a cluster all keys and override keys must hash to one slot (use a
        hash tag); otherwise RedisClusterException is raised before sending.
        """
        argv = _args.all_args(clauses, peek)
        keys = [k for clause in clauses for k in clause.keys()]
        if self._cluster:
            one_slot(self._client, "RL.ALL", keys)
        refund = any(clause.refund for clause in clauses)
        return self._decide(argv, clauses[0].key, keys, refund, parse_all)

    def _one(
        self, command: str, argv: List[Arg], override: Optional[KeyT], refund: bool, peek: bool
    ) -> Decision:
        key: KeyT = argv[0]  # type: ignore[assignment]
        argv.insert(0, command)
        if peek:
            argv.append("PEEK")
        keys: Sequence[KeyT] = (key,) if override is None else (key, override)
        if self._cache is None:  # the hot path, kept short
            if not self._cluster:
                return parse_decision(self._client.execute_command(*argv))
            if override is not None:
                one_slot(self._client, command, keys)
            return parse_decision(self._send(key, argv))
        if override is not None and self._cluster:
            one_slot(self._client, command, keys)
        return self._decide(argv, key, keys, refund, parse_decision)

    def _decide(
        self,
        argv: List[Arg],
        route: KeyT,
        keys: Sequence[KeyT],
        refund: bool,
        parse: Callable[[Any], R],
    ) -> R:
        cache = self._cache
        if cache is None:
            return parse(self._send(route, argv))
        if refund:
            reply = parse(self._send(route, argv))
            cache.forget_keys(keys)
            return reply
        cached_argv = tuple(argv)
        hit = cache.get(cached_argv)
        if hit is not None:
            return hit  # type: ignore[return-value]
        generation = cache.generation
        sent_at = monotonic()
        reply = parse(self._send(route, argv))
        if not reply.allowed and reply.retry_after_ms > 0:
            cache.put(cached_argv, keys, reply, sent_at, monotonic(), generation)
        return reply

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
        argv = _args.override_set_args(okey, limit, window, burst, ttl)
        self._send(okey, argv)
        if self._cache is not None:
            self._cache.clear()

    def override_get(self, okey: KeyT) -> Optional[Override]:
        """``RL.OVERRIDE GET``: the override at ``okey``, or None."""
        okey = _args.check_key("okey", okey)
        return parse_override(self._send(okey, ["RL.OVERRIDE", "GET", okey]))

    def override_delete(self, *okeys: KeyT) -> int:
        """``RL.OVERRIDE DEL``: delete overrides, return how many existed.

        In a cluster the keys are grouped by slot, one command per slot (each
        group all-or-nothing on WRONGTYPE, as the command is).
        """
        if not okeys:
            raise ValueError("override_delete() needs at least one okey")
        checked = [_args.check_key("okey", k) for k in okeys]
        try:
            if not self._cluster:
                return int(self._send(checked[0], ["RL.OVERRIDE", "DEL", *checked]))
            deleted = 0
            for group in _by_slot(self._client, checked):
                deleted += int(self._send(group[0], ["RL.OVERRIDE", "DEL", *group]))
            return deleted
        finally:
            if self._cache is not None:
                self._cache.clear()

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
        argv = _args.override_list_args(cursor, match, count)
        if self._cluster:
            if node is None:
                raise ValueError(
                    "override_list() on a RedisCluster needs node= (one of "
                    "client.get_primaries()): each node has its own cursor. "
                    "override_scan_iter() lists every primary."
                )
            return parse_list(self._client.execute_command(*argv, target_nodes=node))
        if node is not None:
            raise ValueError("node= is for RedisCluster clients only")
        return parse_list(self._client.execute_command(*argv))

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
        if self._cache is not None:
            self._cache.clear()

    # -- sending --------------------------------------------------------------

    def _send(self, route: KeyT, argv: List[Arg]) -> Any:
        client = self._client
        if not self._cluster:
            return client.execute_command(*argv)
        parser = getattr(client, "commands_parser", None)
        if getattr(parser, "commands", None) is not self._hinted:
            self._hinted = hint_key_positions(parser)
        attempt = 0
        while True:
            try:
                node = client.get_node_from_key(route)
                return client.execute_command(*argv, target_nodes=node)
            except RETRY_ERRORS as e:
                attempt += 1
                if attempt > self._retries:
                    raise
                # redis-py refreshes its slot map itself on a connection error
                # or CLUSTERDOWN; a slot missing from the map means it is stale.
                if isinstance(e, SlotNotCoveredError):
                    client.nodes_manager.initialize()


def _by_slot(client: Any, keys: List[KeyT]) -> List[List[KeyT]]:
    groups: dict[int, List[KeyT]] = {}
    for key in keys:
        groups.setdefault(client.keyslot(key), []).append(key)
    return list(groups.values())
