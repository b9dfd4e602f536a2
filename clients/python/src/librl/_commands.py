"""The commands without I/O: what Limiter and AsyncLimiter both run.

Each command is a generator. It checks its arguments, builds the command
line, yields a ``Send`` for every round trip it needs, gets the raw reply
sent back in, and returns the parsed result; the denial cache, cluster slot
checks, grouping by slot and the durability check live here, once. The
public methods' signatures and docstrings are written here too: both
limiters expose each command as it is (_limiting.Method). A driver
(``_sync.drive`` or ``_async.drive``) only performs the sends: with
redis-py's blocking client or with redis.asyncio. An error of a send is
thrown into the generator, so its ``finally`` clauses run as in plain code.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import replace
from time import monotonic
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Generator,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

from redis.exceptions import ResponseError

from . import _args
from ._args import Arg, Clause, Concurrent, Duration, Fixed, Sliding, Token
from ._cache import DenialCache
from ._cluster import one_slot, slot_moving
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

if TYPE_CHECKING:
    from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
    from redis.cluster import ClusterNode

T = TypeVar("T")
R = TypeVar("R", Decision, AllDecision)


class Send:
    """One round trip: ``argv`` to the server owning ``route`` (standalone:
    the server), or to ``node`` when given. With ``wait`` (numreplicas,
    timeout ms), ``WAIT`` follows on the same connection and the reply sent
    back is ``(reply, replicas acknowledged)``. ``hold``: the seconds the
    server may hold the reply (a WAIT option), on a connection of the
    call's own whose read waits that long more. ``split``: see below."""

    __slots__ = ("argv", "hold", "node", "route", "split", "wait")

    def __init__(
        self,
        route: Optional[KeyT],
        argv: List[Arg],
        node: Any = None,
        wait: Optional[Tuple[int, int]] = None,
        hold: Optional[float] = None,
        split: bool = False,
    ) -> None:
        self.route = route
        self.argv = argv
        self.node = node
        self.wait = wait
        self.hold = hold
        #: A TRYAGAIN is raised into the command at once, which splits the
        #: call (Commands._write) rather than waiting out the migration.
        self.split = split

    @property
    def own_connection(self) -> bool:
        """The send needs a connection of its own: WAIT follows it, or the
        server may hold its reply."""
        return self.wait is not None or self.hold is not None


#: A command: yields sends, receives their replies, returns the result.
Command = Generator[Send, Any, T]


class Done:
    """What ``step`` returns once the generator has returned ``value``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def step(
    steps: Generator[Any, Any, Any], reply: Any = None, error: Optional[BaseException] = None
) -> Any:
    """Resumes a generator of operations (a command's sends, or a
    connection's calls) with the last operation's ``reply`` or ``error``
    (neither: its start); returns its next operation, or ``Done``. The
    drivers' loops, sync and async, are this plus their I/O."""
    try:
        return steps.send(reply) if error is None else steps.throw(error)
    except StopIteration as done:
        return Done(done.value)


#: How long the calls of a slot that answered TRYAGAIN are split at once,
#: sparing each the try that would meet it again.
SPLIT_AT_ONCE_S = 1.0

#: How long past its hold a held reply may take when the connection has
#: no socket timeout of its own.
HOLD_GRACE_S = 5.0


def exchange(
    conn: Any,
    send: Send,
    read_held: Callable[[Any, float], Callable[[], Any]],
    asking: bool = False,
) -> Generator[Callable[[], Any], Any, Any]:
    """``send`` on a connection of its own, in one round trip: ASKING first
    when an ASK named this node, then the call, then ``WAIT`` when the send
    has one (WAIT counts the replicas that have this connection's writes).
    Each operation is one call of the connection, made (and, by
    redis.asyncio, awaited) by the driver; ``read_held(conn, timeout)`` is
    the driver's read of a held reply. The result is the call's reply, or
    ``(reply, replicas)`` with WAIT."""
    commands: List[Any] = [send.argv]
    if asking:
        commands.insert(0, ("ASKING",))
    if send.wait is not None:
        commands.append(("WAIT", *send.wait))
    try:
        yield lambda: conn.send_packed_command(conn.pack_commands(commands))
        if asking:
            # OK; were it an error, the call's own reply says where to go.
            with contextlib.suppress(ResponseError):
                yield conn.read_response
        try:
            if send.hold is None:
                reply = yield conn.read_response
            else:
                grace = getattr(conn, "socket_timeout", None) or HOLD_GRACE_S
                reply = yield read_held(conn, send.hold + grace)
        except ResponseError:
            if send.wait is not None:
                yield conn.read_response  # WAIT's reply, so the connection stays in step
            raise
        if send.wait is None:
            return reply
        return reply, (yield conn.read_response)
    except BaseException as e:
        if not isinstance(e, (ResponseError, GeneratorExit)):
            yield conn.disconnect  # a half-read connection goes back empty
        raise


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

    __slots__ = ("cache", "client", "cluster", "durable", "moving")

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
        #: slot -> until when (monotonic s) its calls are split at once: a
        #: slot that answered TRYAGAIN is half-moved, most likely for a
        #: while yet, and each call's first try would meet it again.
        self.moving: Dict[int, float] = {}

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
    ) -> Command[Decision]:
        """``RL.FIXED``: a fixed window of ``limit`` units per ``window``.
        ``cost=0`` reads the limiter without counting."""
        clause = Fixed(
            key, limit, window, aligned=aligned, cost=cost, refund=refund, block=block,
            override=override,
        )  # fmt: skip
        return self._one(clause, peek)

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
    ) -> Command[Decision]:
        """``RL.SLIDING``: an exact sliding log, or the weighted two-window
        counter with ``approx=True``."""
        clause = Sliding(
            key, limit, window, approx=approx, cost=cost, refund=refund, block=block,
            override=override,
        )  # fmt: skip
        return self._one(clause, peek)

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
    ) -> Command[Decision]:
        """``RL.TOKEN``: a bucket of ``burst`` tokens (default ``rate``)
        refilled at ``rate`` per ``window``. With ``wait``, the server holds
        the reply until the reserved time: give the client a socket timeout
        longer than ``wait``."""
        clause = Token(
            key, rate, window, burst=burst, cost=cost, refund=refund, reserve=reserve,
            wait=wait, block=block, override=override,
        )  # fmt: skip
        return self._one(clause, peek)

    def all(self, *clauses: Clause, peek: bool = False) -> Command[AllDecision]:
        """``RL.ALL``: every clause admits the call, and records it, or none does.

        In a cluster all keys and override keys must hash to one slot (use a
        hash tag); otherwise RedisClusterException is raised before sending.
        """
        argv = _args.all_args(clauses, peek)
        keys = [k for clause in clauses for k in clause.keys()]
        if self.cluster:
            one_slot(self.client, "RL.ALL", keys)
        refund = any(clause.refund for clause in clauses)
        reads = peek or all(clause.reads for clause in clauses)
        holds = [clause.hold for clause in clauses if clause.hold is not None]
        hold = max(holds) if holds else None
        leases = tuple(isinstance(clause, Concurrent) for clause in clauses)
        split = self._one_by_one(clauses, peek)
        if not any(leases):
            return (
                yield from self._decide(
                    argv, clauses[0].key, keys, refund, reads, parse_all, hold, split
                )
            )
        # A concurrency limit's denial ends at any release: never cached.
        parse = functools.partial(parse_all, leases=leases)
        return (yield from self._write(clauses[0].key, argv, parse, reads, hold, split))

    # -- a call split while its slot is half-moved (_write) -------------------

    def _half_moved(self, route: KeyT) -> bool:
        """The route's slot answered TRYAGAIN within SPLIT_AT_ONCE_S."""
        slot = self.client.keyslot(route)
        until = self.moving.get(slot)
        if until is None:
            return False
        if monotonic() < until:
            return True
        self.moving.pop(slot, None)
        return False

    def _alone(
        self,
        clause: Clause,
        argv: List[Arg],
        parse: Callable[[Any], T],
        read: bool,
        hold: Optional[float],
    ) -> Optional[Callable[[], Command[T]]]:
        """A single limiter's (or RL.CONCURRENT's) split with ``OVERRIDE
        okey``: the override read (RL.OVERRIDE GET), then the call without
        OVERRIDE, the override's values in place of its own
        (docs/contributing.md, While a slot moves: the override is read a
        moment before the call rather than in the same step)."""
        okey = clause.override
        if okey is None:
            return None

        def alone() -> Command[T]:
            override = parse_override((yield Send(okey, ["RL.OVERRIDE", "GET", okey])))
            single = _args.without_override(argv, override)
            return (yield from self._write(clause.key, single, parse, read, hold))

        return alone

    def _one_by_one(
        self, clauses: Tuple[Clause, ...], peek: bool
    ) -> Optional[Callable[[], Command[AllDecision]]]:
        """RL.ALL's split: each clause as its own limiter call, in order (its
        override read first); once one denies, the rest are asked with PEEK
        and the clauses already admitted are given back (REFUND their cost,
        RELEASE their lease), and the RL.ALL reply is built from the
        clauses' replies. All-or-nothing then holds by compensation rather
        than atomically: another client may see a clause's count for an
        instant. Not for a call whose clauses cannot be given back as
        simply (a REFUND, a RESERVE or WAIT), nor a durable one: those wait
        for the slot to move."""
        if self.durable is not None or any(
            clause.refund or clause.hold is not None or "RESERVE" in clause.args()
            for clause in clauses
        ):
            return None
        return functools.partial(self._clause_by_clause, clauses, peek)

    def _clause_by_clause(self, clauses: Tuple[Clause, ...], peek: bool) -> Command[AllDecision]:
        decisions: List[Decision] = []
        taken: List[Tuple[Clause, List[Arg], Decision]] = []  # to give back if denied
        try:
            for clause in clauses:
                asks = peek or any(not d.allowed for d in decisions)
                argv: List[Arg] = [f"RL.{clause.name}", *clause.args()[1:]]
                if asks:
                    argv.append("PEEK")
                if clause.override is not None:
                    o = clause.override
                    override = parse_override((yield Send(o, ["RL.OVERRIDE", "GET", o])))
                    argv = _args.without_override(argv, override)
                lease = isinstance(clause, Concurrent)
                decision = parse_decision((yield Send(clause.key, argv)), "RL.ALL", lease)
                decisions.append(decision)
                if decision.allowed and not asks and not clause.reads:
                    taken.append((clause, argv, decision))
        except BaseException:
            yield from self._give_back(taken)
            raise
        if all(d.allowed for d in decisions):
            return AllDecision(True, 0, tuple(decisions))
        yield from self._give_back(taken)
        waits = [d.retry_after_ms for d in decisions if not d.allowed]
        return AllDecision(
            False,
            -1 if min(waits) < 0 else max(waits),
            tuple(replace(d, lease_id=0) if d.lease_id else d for d in decisions),
        )

    def _give_back(self, taken: List[Tuple[Clause, List[Arg], Decision]]) -> Command[None]:
        """Undoes what the admitted clauses of a denied split RL.ALL
        recorded; the first error, if any, is raised after trying them all."""
        failed: Optional[BaseException] = None
        for clause, argv, decision in taken:
            if isinstance(clause, Concurrent):
                undo = _args.without_override(
                    clause.lease_words("RELEASE", decision.lease_id, False), None
                )
            else:
                undo = _args.refund_words(argv)
            try:
                yield Send(clause.key, undo)
            except Exception as e:
                failed = failed or e
        if failed is not None:
            raise failed

    # -- concurrency limits ---------------------------------------------------

    def acquire(
        self, clause: Concurrent, wait: Optional[Duration], peek: bool
    ) -> Command[Decision]:
        """``RL.CONCURRENT key limit lease [COST n] [WAIT d] [OVERRIDE okey]
        [PEEK]``: the clause's slots as one lease. With ``wait``, the server
        holds a refused call until the slots are free or ``wait`` is over:
        it goes on a connection of its own (Send.hold). Never cached: a
        concurrency limit's denial ends at any release."""
        argv: List[Arg] = ["RL.CONCURRENT", *clause.args()[1:]]
        hold = None
        if wait is not None:
            held = _args.duration("wait", wait, zero=True)
            argv += ("WAIT", held)
            hold = _args.held_s(held)
        if peek:
            argv.append("PEEK")
        if clause.override is not None and self.cluster:
            one_slot(self.client, "RL.CONCURRENT", clause.keys())
        split = self._alone(clause, argv, _lease_decision, peek or clause.reads, hold)
        return (
            yield from self._write(
                clause.key, argv, _lease_decision, peek or clause.reads, hold, split
            )
        )

    def lease_call(
        self, clause: Concurrent, verb: str, lease_id: int, peek: bool = False
    ) -> Command[Decision]:
        """``RELEASE`` or ``RENEW`` of the lease ``lease_id`` that ``clause``
        names."""
        argv = clause.lease_words(verb, lease_id, peek)
        if clause.override is not None and self.cluster:
            one_slot(self.client, "RL.CONCURRENT", clause.keys())
        split = self._alone(clause, argv, _lease_decision, peek, None)
        return (yield from self._write(clause.key, argv, _lease_decision, peek, None, split))

    def _one(self, clause: Clause, peek: bool) -> Command[Decision]:
        """A single limiter: its clause's words after the command's name."""
        command = f"RL.{clause.name}"
        argv: List[Arg] = [command, *clause.args()[1:]]
        if peek:
            argv.append("PEEK")
        keys = clause.keys()
        if clause.override is not None and self.cluster:
            one_slot(self.client, command, keys)
        reads = peek or clause.reads
        split = self._alone(clause, argv, parse_decision, reads, clause.hold)
        return self._decide(
            argv, clause.key, keys, clause.refund, reads, parse_decision, clause.hold, split
        )

    def _decide(
        self,
        argv: List[Arg],
        route: KeyT,
        keys: Sequence[KeyT],
        refund: bool,
        reads: bool,
        parse: Callable[[Any], R],
        hold: Optional[float] = None,
        split: Optional[Callable[[], Command[R]]] = None,
    ) -> Command[R]:
        cache = self.cache
        if cache is None:
            return (yield from self._write(route, argv, parse, reads, hold, split))
        if refund:
            reply = yield from self._write(route, argv, parse, reads, hold, split)
            cache.forget_keys(keys)
            return reply
        cached_argv = tuple(argv)
        hit = cache.get(cached_argv)
        if hit is not None:
            return hit  # type: ignore[return-value]
        generation = cache.generation
        sent_at = monotonic()
        reply = yield from self._write(route, argv, parse, reads, hold, split)
        if not reply.allowed and reply.retry_after_ms > 0:
            cache.put(cached_argv, keys, reply, sent_at, monotonic(), generation)
        return reply

    def _write(
        self,
        route: KeyT,
        argv: List[Arg],
        parse: Callable[[Any], T],
        read: bool = False,
        hold: Optional[float] = None,
        split: Optional[Callable[[], Command[T]]] = None,
    ) -> Command[T]:
        """A call that may write: followed by WAIT when the limiter is durable
        (a read, PEEK, COST 0 or a GET, has nothing to wait for). ``hold``:
        the server may hold the reply that long (a WAIT option).

        ``split``: in a cluster, the call names several keys, and while its
        slot is half-moved it gets TRYAGAIN until the whole slot has moved
        if any of them is absent (an override never set, an RL.ALL clause
        whose key expired: docs/operations.md, While a slot moves). On its
        first TRYAGAIN (which ran nothing) ``split()`` makes it as calls of
        one key each, which a half-moved slot serves at once (_split)."""
        wait = None if self.durable is None or read else self.durable
        splits = split is not None and self.cluster
        if splits and self.moving and self._half_moved(route):
            assert split is not None
            return (yield from split())
        try:
            reply = yield Send(route, argv, wait=wait, hold=hold, split=splits)
        except ResponseError as e:
            if not splits or not slot_moving(e):
                raise
            assert split is not None
            self.moving[self.client.keyslot(route)] = monotonic() + SPLIT_AT_ONCE_S
            return (yield from split())
        if wait is None:
            return parse(reply)
        reply, acked = reply
        result = parse(reply)
        if int(acked) < wait[0]:
            raise DurabilityError(result, int(acked), *wait)
        return result

    # -- overrides ------------------------------------------------------------

    def override_set(
        self,
        okey: KeyT,
        limit: int,
        window: Duration,
        *,
        burst: Optional[int] = None,
        ttl: Optional[Duration] = None,
    ) -> Command[None]:
        """``RL.OVERRIDE SET``: store an override at ``okey`` (replacing any)."""
        argv = _args.override_set_args(okey, limit, window, burst, ttl)
        return self._clearing(self._write(argv[2], argv, _ignore))  # type: ignore[arg-type]

    def override_get(self, okey: KeyT) -> Command[Optional[Override]]:
        """``RL.OVERRIDE GET``: the override at ``okey``, or None."""
        checked = _args.check_key("okey", okey)
        return parse_override((yield Send(checked, ["RL.OVERRIDE", "GET", checked])))

    def override_delete(self, *okeys: KeyT) -> Command[int]:
        """``RL.OVERRIDE DEL``: delete overrides, return how many existed.

        In a cluster the keys are grouped by slot, one command per slot (each
        group all-or-nothing on WRONGTYPE, as the command is).
        """
        if not okeys:
            raise ValueError("override_delete() needs at least one okey")
        checked = [_args.check_key("okey", k) for k in okeys]
        groups = self._by_slot(checked) if self.cluster else [checked]
        return self._clearing(self._delete(groups))

    def _delete(self, groups: List[List[KeyT]]) -> Command[int]:
        deleted = 0
        for group in groups:
            # Split, a group is deleted key by key (a slot half-moved
            # answers TRYAGAIN when some of them are on each side).
            split = (
                None if len(group) == 1 else functools.partial(self._delete, [[k] for k in group])
            )
            argv: List[Arg] = ["RL.OVERRIDE", "DEL", *group]
            deleted += yield from self._write(group[0], argv, int, split=split)
        return deleted

    def _clearing(self, command: Command[T]) -> Command[T]:
        """``command``, then the denial cache cleared, whatever it raised:
        a denial cached under the old override must not outlive it."""
        try:
            return (yield from command)
        finally:
            self.clear_cache()

    def override_list(
        self,
        cursor: int = 0,
        *,
        match: Optional[KeyT] = None,
        count: Optional[int] = None,
        node: Optional[Union[ClusterNode, AsyncClusterNode]] = None,
    ) -> Command[Tuple[int, List[OverrideEntry]]]:
        """``RL.OVERRIDE LIST``: one step of SCAN over one server's overrides.

        With a RedisCluster, pass the ``node`` to list (one of
        ``client.get_primaries()``): cursors belong to a node. To list every
        override of a cluster, use ``override_scan_iter()``.
        """
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


def _lease_decision(reply: Any) -> Decision:
    return parse_decision(reply, "RL.CONCURRENT", lease=True)
