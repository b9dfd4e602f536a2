"""The commands without I/O: what Limiter and AsyncLimiter both run.

Each command is a generator. It checks its arguments, builds the command
line, yields a ``Send`` for every round trip it needs, gets the raw reply
sent back in, and returns the parsed result; the denial cache, cluster slot
checks, grouping by slot and the durability check live here, once. A driver
(``Limiter._run`` or ``AsyncLimiter._run``) only performs the sends: with
redis-py's blocking client or with redis.asyncio. An error of a send is
thrown into the generator, so its ``finally`` clauses run as in plain code.
"""

from __future__ import annotations

from time import monotonic
from typing import Any, Callable, Dict, Generator, List, Optional, Sequence, Tuple, TypeVar

from . import _args
from ._args import Arg, Clause
from ._cache import DenialCache
from ._cluster import one_slot
from ._types import (
    AllDecision,
    Decision,
    DurabilityError,
    KeyT,
    Override,
    OverrideEntry,
    parse_all,
    parse_decision,
    parse_list,
    parse_override,
)

T = TypeVar("T")
R = TypeVar("R", Decision, AllDecision)


class Send:
    """One round trip: ``argv`` to the server owning ``route`` (standalone:
    the server), or to ``node`` when given. With ``wait`` (numreplicas,
    timeout ms), ``WAIT`` follows on the same connection and the reply sent
    back is ``(reply, replicas acknowledged)``."""

    __slots__ = ("argv", "node", "route", "wait")

    def __init__(
        self,
        route: Optional[KeyT],
        argv: List[Arg],
        node: Any = None,
        wait: Optional[Tuple[int, int]] = None,
    ) -> None:
        self.route = route
        self.argv = argv
        self.node = node
        self.wait = wait


#: A command: yields sends, receives their replies, returns the result.
Command = Generator[Send, Any, T]


def check_durable(durable: object) -> Optional[Tuple[int, int]]:
    """``durable=(numreplicas, timeout_ms)`` as WAIT takes them."""
    if durable is None:
        return None
    if not isinstance(durable, tuple) or len(durable) != 2:
        raise TypeError(
            "durable must be (numreplicas, timeout_ms), e.g. (1, 100): WAIT 1 100 after "
            f"every call that writes, not {durable!r}"
        )
    replicas = _args.check_int("durable numreplicas", durable[0])
    timeout = _args.check_int("durable timeout_ms", durable[1])
    if replicas < 1:
        raise ValueError(f"durable numreplicas must be at least 1, not {replicas}")
    if timeout < 0:
        raise ValueError(f"durable timeout_ms must be >= 0 (0: wait forever), not {timeout}")
    return replicas, timeout


class Commands:
    """Every librl command as a generator (see the module docstring).

    ``client`` is only asked for ``keyslot`` (a cluster's slot checks);
    the driver owns the connection."""

    __slots__ = ("cache", "client", "cluster", "durable")

    def __init__(
        self,
        client: Any,
        cluster: bool,
        cache: Optional[DenialCache],
        durable: Optional[Tuple[int, int]],
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.cache = cache
        self.durable = durable

    # -- the limiters ---------------------------------------------------------

    def fixed(
        self,
        key: object,
        limit: object,
        window: object,
        aligned: object,
        cost: object,
        refund: object,
        block: object,
        override: object,
        peek: bool,
    ) -> Command[Decision]:
        argv = _args.fixed_args(key, limit, window, aligned, cost, refund, block, override)
        return self._one("RL.FIXED", argv, override, refund is not None, peek)

    def sliding(
        self,
        key: object,
        limit: object,
        window: object,
        approx: object,
        cost: object,
        refund: object,
        block: object,
        override: object,
        peek: bool,
    ) -> Command[Decision]:
        argv = _args.sliding_args(key, limit, window, approx, cost, refund, block, override)
        return self._one("RL.SLIDING", argv, override, refund is not None, peek)

    def token(
        self,
        key: object,
        rate: object,
        window: object,
        burst: object,
        cost: object,
        refund: object,
        reserve: object,
        wait: object,
        block: object,
        override: object,
        peek: bool,
    ) -> Command[Decision]:
        argv = _args.token_args(
            key, rate, window, burst, cost, refund, reserve, wait, block, override
        )
        return self._one("RL.TOKEN", argv, override, refund is not None, peek)

    def all(self, clauses: Tuple[Clause, ...], peek: bool) -> Command[AllDecision]:
        argv = _args.all_args(clauses, peek)
        keys = [k for clause in clauses for k in clause.keys()]
        if self.cluster:
            one_slot(self.client, "RL.ALL", keys)
        refund = any(clause.refund for clause in clauses)
        reads = peek or all(clause.reads for clause in clauses)
        return self._decide(argv, clauses[0].key, keys, refund, reads, parse_all)

    def _one(
        self, command: str, argv: List[Arg], override: object, refund: bool, peek: bool
    ) -> Command[Decision]:
        key: KeyT = argv[0]  # type: ignore[assignment]
        argv.insert(0, command)
        if peek:
            argv.append("PEEK")
        keys: Sequence[KeyT] = (key,) if override is None else (key, override)  # type: ignore[assignment]
        if override is not None and self.cluster:
            one_slot(self.client, command, keys)
        reads = peek or _args.reads_only(argv, 4)  # after the command's name
        return self._decide(argv, key, keys, refund, reads, parse_decision)

    def _decide(
        self,
        argv: List[Arg],
        route: KeyT,
        keys: Sequence[KeyT],
        refund: bool,
        reads: bool,
        parse: Callable[[Any], R],
    ) -> Command[R]:
        cache = self.cache
        if cache is None:
            return (yield from self._write(route, argv, parse, read=reads))
        if refund:
            reply = yield from self._write(route, argv, parse, read=reads)
            cache.forget_keys(keys)
            return reply
        cached_argv = tuple(argv)
        hit = cache.get(cached_argv)
        if hit is not None:
            return hit  # type: ignore[return-value]
        generation = cache.generation
        sent_at = monotonic()
        reply = yield from self._write(route, argv, parse, read=reads)
        if not reply.allowed and reply.retry_after_ms > 0:
            cache.put(cached_argv, keys, reply, sent_at, monotonic(), generation)
        return reply

    def _write(
        self, route: KeyT, argv: List[Arg], parse: Callable[[Any], T], read: bool = False
    ) -> Command[T]:
        """A call that may write: followed by WAIT when the limiter is durable
        (a read, PEEK, COST 0 or a GET, has nothing to wait for)."""
        if self.durable is None or read:
            return parse((yield Send(route, argv)))
        reply, acked = yield Send(route, argv, wait=self.durable)
        result = parse(reply)
        if int(acked) < self.durable[0]:
            raise DurabilityError(result, int(acked), *self.durable)
        return result

    # -- overrides ------------------------------------------------------------

    def override_set(
        self, okey: object, limit: object, window: object, burst: object, ttl: object
    ) -> Command[None]:
        argv = _args.override_set_args(okey, limit, window, burst, ttl)
        try:
            yield from self._write(argv[2], argv, _ignore)  # type: ignore[arg-type]
        finally:
            if self.cache is not None:
                self.cache.clear()

    def override_get(self, okey: object) -> Command[Optional[Override]]:
        checked = _args.check_key("okey", okey)
        return parse_override((yield Send(checked, ["RL.OVERRIDE", "GET", checked])))

    def override_delete(self, okeys: Tuple[object, ...]) -> Command[int]:
        """In a cluster the keys are grouped by slot, one command per slot."""
        if not okeys:
            raise ValueError("override_delete() needs at least one okey")
        checked = [_args.check_key("okey", k) for k in okeys]
        groups = self._by_slot(checked) if self.cluster else [checked]
        deleted = 0
        try:
            for group in groups:
                deleted += yield from self._write(group[0], ["RL.OVERRIDE", "DEL", *group], int)
            return deleted
        finally:
            if self.cache is not None:
                self.cache.clear()

    def override_list(
        self, cursor: object, match: object, count: object, node: Any
    ) -> Command[Tuple[int, List[OverrideEntry]]]:
        argv = _args.override_list_args(cursor, match, count)
        if self.cluster and node is None:
            raise ValueError(
                "override_list() on a RedisCluster needs node= (one of "
                "client.get_primaries()): each node has its own cursor. "
                "override_scan_iter() lists every primary."
            )
        if not self.cluster and node is not None:
            raise ValueError("node= is for RedisCluster clients only")
        return parse_list((yield Send(None, argv, node=node)))

    def clear_cache(self) -> None:
        if self.cache is not None:
            self.cache.clear()

    def _by_slot(self, keys: List[KeyT]) -> List[List[KeyT]]:
        groups: Dict[int, List[KeyT]] = {}
        for key in keys:
            groups.setdefault(self.client.keyslot(key), []).append(key)
        return list(groups.values())


def _ignore(reply: Any) -> None:
    return None
