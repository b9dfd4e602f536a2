"""The engine's Redis exchanges, run by a blocking client (Guard: Django,
Flask, any WSGI app) or an asyncio one (AsyncGuard: ASGI). Both take the
same steps, in the same order; only the sends and the timeout differ.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from typing import (
    Any,
    Awaitable,
    Callable,
    Generic,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypedDict,
    TypeVar,
    Union,
)

import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.exceptions import InvalidResponse
from redis.retry import Retry

from .._args import Concurrent, all_args
from .._async import AsyncLimiter
from .._sync import Limiter
from .._types import Decision, parse_all, parse_decision
from ._configuration import Config, load
from ._decide import Call, Exchange, Release, Step, Verdict, turn_ms
from ._engine import Engine
from ._fail import Breaker, BreakerOpen, decide_locally, reason
from ._headers import served_headers
from ._hook import Hook
from ._local import LocalLimiter
from ._plan import Check, Plan, Quick
from ._refusals import Reply
from ._request import Request
from ._resolvers import Resolvers, ResolversSource, resolve, resolve_async, resolvers_of

log = logging.getLogger("librl.http")

#: asyncio.timeout (Python 3.11): one timer around an exchange, where
#: wait_for also makes a task per request.
_timeout: Optional[Callable[[float], Any]] = getattr(asyncio, "timeout", None)

#: What a configuration may be given as: a Config, a dict, or a file path.
ConfigSource = Union[Config, Mapping[str, Any], str, "os.PathLike[str]"]

#: The redis-py clients Guard and AsyncGuard send through.
Client = Union[redis.Redis, redis.RedisCluster]
AsyncClient = Union[redis.asyncio.Redis, redis.asyncio.RedisCluster]

_CLUSTERS = (redis.RedisCluster, redis.asyncio.RedisCluster)

ClientT = TypeVar("ClientT")
LimiterT = TypeVar("LimiterT")


#: Guards the hand-over of a request's slots: the rare requests that hold
#: any share it, rather than every request making a lock of its own.
_LEASES_LOCK = threading.Lock()


class Admission:
    """A request's check: send ``reply`` instead of calling the handler, or
    call it and add ``headers`` to its response; then ``finish`` (before
    the response goes out), and ``release`` once it is finished."""

    __slots__ = ("checks", "headers", "leases", "local", "reply", "settling", "verdict")

    def __init__(
        self,
        reply: Optional[Reply] = None,
        headers: Optional[List[Tuple[str, str]]] = None,
        plan: Optional[Plan] = None,
        verdict: Optional[Verdict] = None,
        leases: Optional[List[Release]] = None,
        local: Optional[LocalLimiter] = None,
    ) -> None:
        self.reply = reply
        self.headers: List[Tuple[str, str]] = headers if headers is not None else []
        # What finish() needs of the plan, not the plan: its request holds
        # the framework's request, which often holds the admission (Flask's
        # environ, Django's HttpRequest), a cycle only the garbage
        # collector would free, with every object of the request in it.
        self.checks: List[Check] = plan.checks if plan is not None else []
        #: A policy counts after the response (`count: failed`/`succeeded`).
        self.settling = plan is not None and plan.settles
        self.verdict = verdict
        #: The slots the request holds (docs/http.md, Concurrency limits).
        self.leases: List[Release] = leases if leases is not None else []
        #: Decided in the process (fail: local): its limiter holds the slots.
        self.local = local

    @property
    def holds_slots(self) -> bool:
        return bool(self.leases)

    @property
    def settles(self) -> bool:
        """Whether ``finish`` may send anything: a policy counts after the
        response (docs/http.md, Counting after the response)."""
        return self.settling and self.verdict is not None

    def take_leases(self) -> List[Release]:
        """The slots to release, once: every later call gets none, so a
        request's slots are released exactly once however its response
        ends (sent, disconnected, failed), from any thread."""
        with _LEASES_LOCK:
            leases, self.leases = self.leases, []
        return leases


def release_locally(admission: Admission) -> None:
    """A request decided in the process gives its slots back there."""
    local = admission.local
    if local is not None:
        for held in admission.take_leases():
            local.release(held.clause, held.lease_id)


def quick_reply(reply: Any) -> Tuple[bool, Decision]:
    """parse_all of the reply to a one-clause RL.ALL, without the
    AllDecision: whether it admitted, and the clause's decision."""
    if type(reply) is list and len(reply) == 3 and type(reply[1]) is int:
        return bool(reply[0]), parse_decision(reply[2], "RL.ALL")
    parsed = parse_all(reply)
    if not parsed.decisions:
        raise InvalidResponse(f"librl: unexpected reply to RL.ALL: {reply!r}")
    return parsed.allowed, parsed.decisions[0]


def leases_of(clauses: Sequence[Any]) -> Tuple[bool, ...]:
    """Which clauses of an RL.ALL are CONCURRENT ones (their replies carry
    a lease id); () when none is."""
    for clause in clauses:
        if isinstance(clause, Concurrent):
            return tuple(isinstance(c, Concurrent) for c in clauses)
    return ()


def _client_options(timeout_s: float, socket_timeout: bool = True) -> dict[str, Any]:
    # No retries of redis-py's own: the configuration's timeout is the whole
    # budget, then the fail mode decides.
    return {
        "socket_timeout": timeout_s if socket_timeout else None,
        "socket_connect_timeout": timeout_s,
        "retry": Retry(NoBackoff(), 0),
    }


def connect(
    config: Config, url: Optional[str] = None, cluster_nodes: Optional[str] = None
) -> Client:
    """A blocking client for ``url`` (redis://...) or ``cluster_nodes``
    (host:port,host:port); nothing is sent until the first request."""
    options = _client_options(config.timeout_ms / 1000)
    if cluster_nodes:
        return redis.RedisCluster(
            startup_nodes=_nodes(cluster_nodes, redis.cluster.ClusterNode), **options
        )
    return redis.Redis.from_url(url or "redis://127.0.0.1:6379", **options)


def connect_async(
    config: Config, url: Optional[str] = None, cluster_nodes: Optional[str] = None
) -> AsyncClient:
    """connect(), with redis.asyncio. No socket timeout: AsyncGuard bounds
    each exchange with one timer of its own, where redis.asyncio with a
    socket timeout would start a timer (and a task) for every send and
    every read; a connection abandoned mid-reply is closed by redis-py."""
    if cluster_nodes:
        return redis.asyncio.RedisCluster(
            startup_nodes=_nodes(cluster_nodes, redis.asyncio.cluster.ClusterNode),
            **_client_options(config.timeout_ms / 1000),
        )
    options = _client_options(config.timeout_ms / 1000, socket_timeout=False)
    return redis.asyncio.Redis.from_url(url or "redis://127.0.0.1:6379", **options)


def _nodes(spec: str, node: Any) -> List[Any]:
    out = []
    for item in spec.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"cluster nodes: {item!r} is not host:port")
        out.append(node(host, int(port)))
    return out


def _from_env(
    url: Optional[str], cluster_nodes: Optional[str]
) -> Tuple[Optional[str], Optional[str]]:
    if url is None and cluster_nodes is None:
        return os.environ.get("REDIS_URL"), os.environ.get("REDIS_CLUSTER_NODES")
    return url, cluster_nodes


class GuardOptions(TypedDict, total=False):
    """What the integrations hand their guard besides the configuration
    and a client: where the Redis is, the decision hook, the resolvers."""

    url: Optional[str]
    cluster_nodes: Optional[str]
    on_decision: Optional[Hook]
    resolvers: ResolversSource


class _Guarding(Generic[ClientT, LimiterT]):
    """What Guard and AsyncGuard share: the configuration, its engine and
    the limiter (over ``client``, else one made from ``url`` or
    ``cluster_nodes``, else from $REDIS_URL or $REDIS_CLUSTER_NODES), and
    the steps of a check around its Redis exchange."""

    def __init__(
        self,
        config: ConfigSource,
        client: Optional[ClientT] = None,
        *,
        url: Optional[str] = None,
        cluster_nodes: Optional[str] = None,
        on_decision: Optional[Hook] = None,
        resolvers: ResolversSource = None,
    ) -> None:
        #: The resolvers in code (docs/http.md, Resolvers), for every reload too.
        self.resolvers: Resolvers = resolvers_of(resolvers)
        self.config = load(config, self.resolvers)
        self.engine = Engine(self.config, on_decision)
        if client is None:
            client = self._connect(*_from_env(url, cluster_nodes))
        self.limiter = self._limiter(client)
        #: Spares requests the wait on a Redis that is down or hangs; it
        #: belongs to the guard, not to a configuration.
        self.breaker = Breaker()
        #: fail: local's limiters (docs/http.md, Fail modes); its counts
        #: outlive a reload that keeps local_max_keys.
        self.local: Optional[LocalLimiter] = (
            LocalLimiter(self.config.local_max_keys) if self.config.fail == "local" else None
        )
        #: A standalone client takes each RL.ALL straight (_send): what the
        #: limiter adds to a call is for clusters (slots, TRYAGAIN).
        self._direct: Any = None if isinstance(client, _CLUSTERS) else client

    def override_key(
        self, policy: str, value: Union[str, bytes, None] = None, /, **subject: Union[str, bytes]
    ) -> str:
        """The override key the middleware uses for ``policy`` and a
        subject: ``override_key("search", user="alice")`` (the keyword is
        the policy's key: ``ip``, ``api_key``, ``user``, ``header``), or
        the subject's value alone; ``RL.OVERRIDE SET`` on it sets that
        subject's own limit (docs/http.md, Keys from code)."""
        return self.keys(policy, value, **subject)[1]

    def key(
        self, policy: str, value: Union[str, bytes, None] = None, /, **subject: Union[str, bytes]
    ) -> str:
        """The limiter key the middleware uses for ``policy`` and a subject
        (as override_key)."""
        return self.keys(policy, value, **subject)[0]

    def keys(
        self, policy: str, value: Union[str, bytes, None] = None, /, **subject: Union[str, bytes]
    ) -> Tuple[str, str]:
        """(key, override key): see override_key."""
        if subject:
            if value is not None or len(subject) != 1:
                raise TypeError(
                    "librl: give the subject once, e.g. override_key('search', user='alice')"
                )
            ((kind, value),) = subject.items()
            (found,) = self.engine.named([policy])
            kind = kind.replace("_", "-")
            if kind != found.key:
                raise ValueError(f"librl: policy {policy!r} is keyed by {found.key}, not {kind}")
        return self.engine.keys(policy, value)

    def _connect(self, url: Optional[str], cluster_nodes: Optional[str]) -> ClientT:
        raise NotImplementedError

    def _limiter(self, client: ClientT) -> LimiterT:
        raise NotImplementedError

    def reload(self, config: ConfigSource) -> Config:
        """Swaps the configuration: requests in flight finish on the one
        they started with; one that does not validate raises the start-up
        error (ConfigError) and the old one stays. The client, its
        timeouts and the breaker stay (docs/http/python.md, Reload)."""
        new = load(config, self.resolvers)
        if new.fail == "local" and (
            self.local is None or new.local_max_keys != self.config.local_max_keys
        ):
            self.local = LocalLimiter(new.local_max_keys)
        self.engine = Engine(new, self.engine.hook)
        self.config = new
        return new

    def _admission(self, engine: Engine, plan: Plan, verdict: Verdict) -> Admission:
        """A check's outcome once Redis has answered."""
        passed, headers, refusal = engine.decided(plan, verdict)
        if not passed:
            return Admission(refusal, headers, plan)
        return Admission(refusal, headers, plan, verdict, verdict.leases)

    def _quick_admission(self, quick: Quick, reply: Any) -> Admission:
        """A Quick plan's outcome once Redis has answered ``reply``: an
        admitted request's headers made from the reply's numbers as they
        came (no Decision), anything else as parse_all reads it."""
        if type(reply) is list and len(reply) == 3 and reply[0] == 1:
            clause = reply[2]
            if type(clause) is list and len(clause) == 6:
                _, count, retry, limit, remaining, reset = clause
                if (
                    type(count) is int
                    and type(retry) is int
                    and type(limit) is int
                    and type(remaining) is int
                    and type(reset) is int
                    and type(reply[1]) is int
                ):
                    headers = served_headers(self.config, quick.policy, limit, remaining, reset)
                    return Admission(None, headers)
        allowed, decision = quick_reply(reply)
        headers, refusal = self.engine.quick_decided(quick, allowed, decision)
        return Admission(refusal, headers)

    def _quick_failed(
        self, request: Request, quick: Quick, subject: str, reply: Any, error: Exception
    ) -> Tuple[Admission, List[Step]]:
        """_failed for a request on a Quick plan, with its whole plan made
        now; its ``reply``, if one came (late), is recorded as _run records
        it. Also the refunds to send, as a failed exchange sends them."""
        engine = self.engine
        plan = quick.plan(engine.config, request, subject)
        exchange = Exchange(plan.checks)
        if reply is not None:
            # A reply that does not read recorded nothing.
            with contextlib.suppress(Exception):
                exchange.answer(parse_all(reply))
        if isinstance(error, BreakerOpen):
            return self._failed(engine, plan, exchange, error), []
        self.breaker.ended(error)
        admission = self._failed(engine, plan, exchange, error)
        return admission, exchange.failure_refunds() if admission.reply is not None else []

    def _turn_s(self, plan: Plan, admission: Admission) -> float:
        """The seconds an admitted request waits for the turn its queue
        policies booked (docs/http.md, Lockouts and queues): the wait is
        the application's (a sleep), never a WAIT holding the shared
        connection; a shadow request waits for nothing."""
        verdict = admission.verdict
        if admission.reply is not None or verdict is None or plan.mode == "shadow":
            return 0.0
        return turn_ms(plan.checks, verdict.replies) / 1000

    def _failed(
        self, engine: Engine, plan: Plan, exchange: Exchange, error: Exception
    ) -> Admission:
        """Redis failed: fail open serves the request, which holds the slots
        Redis gave (released when its response is finished); fail local
        decides it in the process (its own slots, released there; no
        settlement after the response, which would refund in Redis)."""
        local = self.local
        if engine.fail.local and local is not None:
            engine.fail.failed(error)  # the warning, at most every 10 s
            verdict = decide_locally(local, plan.checks)
            _, headers, refusal = engine.decided(plan, verdict, local=True)
            return Admission(refusal, headers, plan, leases=verdict.leases, local=local)
        reply = engine.failed(plan, error)
        return Admission(reply=reply, plan=plan, leases=exchange.held() if reply is None else [])

    def _settlement(self, admission: Admission, status: int) -> List[Call]:
        """The refunds to send after the handler answered ``status``."""
        verdict = admission.verdict
        if verdict is None or not admission.settling:
            return []
        return self.engine.settlement(admission.checks, verdict, status)

    def _timeout_s(self) -> float:
        return self.config.timeout_ms / 1000


class Guard(_Guarding[Client, Limiter]):
    """The contract over a blocking redis-py client (``redis.Redis`` or
    ``redis.RedisCluster``). Without ``client``, one is made from ``url``
    or ``cluster_nodes``, else from $REDIS_URL or $REDIS_CLUSTER_NODES.
    The client's socket timeout bounds each call; the configuration's
    ``timeout`` bounds the exchange: past it, the calls stop and a reply
    that came later counts as a failure."""

    def _connect(self, url: Optional[str], cluster_nodes: Optional[str]) -> Client:
        return connect(self.config, url, cluster_nodes)

    def _limiter(self, client: Client) -> Limiter:
        # A call in a migrating slot retries within the exchange's timeout.
        return Limiter(client, try_again_wait=self._timeout_s())

    def admit(
        self,
        request: Request,
        body_length: Callable[[int], Optional[int]],
        names: Optional[Sequence[str]] = None,
    ) -> Admission:
        """Checks a request (against the policies ``names``, when a view
        names its own). ``body_length(limit)`` is called only when a
        body-bytes policy needs a body without Content-Length: it reads the
        body (keeping it for the handler) and returns its length, or None
        past ``limit`` bytes."""
        engine = self.engine
        direct = self._direct
        plan = (
            engine.quick_plan(request, names) if direct is not None else engine.plan(request, names)
        )
        if isinstance(plan, tuple):
            return self._quick(direct, request, *plan)
        if isinstance(plan, Plan) and plan.resolving:
            plan = engine.resolved(plan, resolve(plan.resolving, request.native))
        if plan is None:
            return Admission()
        if isinstance(plan, Plan) and plan.needs_body:
            limit = engine.config.max_body_bytes
            length = body_length(limit)
            plan = engine.costs(plan, limit + 1 if length is None else length)
        if isinstance(plan, Reply):
            return Admission(reply=plan)
        exchange = Exchange(plan.checks)
        breaker = self.breaker
        if not breaker.asks():
            return self._failed(engine, plan, exchange, BreakerOpen())
        try:
            self._run(exchange, time.monotonic() + engine.config.timeout_ms / 1000)
        except Exception as e:
            breaker.ended(e)
            admission = self._failed(engine, plan, exchange, e)
            if admission.reply is not None:  # refused: counted by no policy
                self._give_back(exchange.failure_refunds(), "a refund")
            return admission
        breaker.answered()
        admission = self._admission(engine, plan, exchange.verdict())
        if engine.config.queues:
            wait = self._turn_s(plan, admission)
            if wait > 0:
                time.sleep(wait)  # this request's thread, not the connection
        return admission

    def _quick(self, direct: Any, request: Request, quick: Quick, subject: str) -> Admission:
        """admit() of a request on a Quick plan: one RL.ALL of words made at
        start-up, and its reply read straight into the admission."""
        reply = None
        try:
            if not self.breaker.asks():
                raise BreakerOpen()
            deadline = time.monotonic() + self.config.timeout_ms / 1000
            reply = direct.execute_command(*quick.words(subject))
            admission = self._quick_admission(quick, reply)
            if time.monotonic() > deadline:  # _in_time, without its call
                raise TimeoutError(
                    f"Redis took longer than the {self.config.timeout_ms} ms timeout"
                )
        except Exception as e:
            admission, refunds = self._quick_failed(request, quick, subject, reply, e)
            self._give_back(refunds, "a refund")
            return admission
        self.breaker.answered()
        return admission

    def finish(self, admission: Admission, status: int) -> None:
        """After the handler: the `count: failed`/`succeeded` refunds."""
        self._give_back(self._settlement(admission, status), "a refund")

    def release(self, admission: Admission) -> None:
        """Once the response is finished (sent, or the client gone, or the
        handler failed): the request's concurrency slots back, once; a
        release that fails is logged (the lease ends by itself)."""
        if admission.leases:
            if admission.local is not None:
                release_locally(admission)
                return
            self._give_back(admission.take_leases(), "a release")

    def _run(self, exchange: Exchange, deadline: float) -> None:
        while (step := exchange.next_call()) is not None:
            self._in_time(deadline)
            # Recorded before the lateness check: a reply that came, even
            # late, says what Redis admitted, and fail closed refunds it.
            exchange.answer(self._send(step))
        self._in_time(deadline)

    def _send(self, step: Step) -> Any:
        if isinstance(step, Release):
            return self.limiter.held_lease(step.clause, step.lease_id).release()
        clauses, peek = step
        direct = self._direct
        if direct is None:
            return self.limiter.all(*clauses, peek=peek)
        return parse_all(direct.execute_command(*all_args(clauses, peek)), leases_of(clauses))

    def _in_time(self, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"Redis took longer than the {self.config.timeout_ms} ms timeout")

    def _give_back(self, steps: Sequence[Step], what: str) -> None:
        """Refunds or releases, within their own timeout; a failure is
        logged."""
        deadline = time.monotonic() + self._timeout_s()
        try:
            for step in steps:
                self._in_time(deadline)
                self._send(step)
        except Exception as e:
            log.warning("librl: %s failed: %s", what, reason(e))


class AsyncGuard(_Guarding[AsyncClient, AsyncLimiter]):
    """Guard over redis.asyncio (``Redis`` or ``RedisCluster``); the whole
    exchange of a request has the configuration's ``timeout``."""

    def _connect(self, url: Optional[str], cluster_nodes: Optional[str]) -> AsyncClient:
        return connect_async(self.config, url, cluster_nodes)

    def _limiter(self, client: AsyncClient) -> AsyncLimiter:
        return AsyncLimiter(client, try_again_wait=self._timeout_s())

    async def admit(
        self,
        request: Request,
        body_length: Callable[[int], Awaitable[Optional[int]]],
        names: Optional[Sequence[str]] = None,
    ) -> Admission:
        """Guard.admit, awaited."""
        engine = self.engine
        direct = self._direct
        plan = (
            engine.quick_plan(request, names) if direct is not None else engine.plan(request, names)
        )
        if isinstance(plan, tuple):
            return await self._quick(direct, request, *plan)
        if isinstance(plan, Plan) and plan.resolving:
            plan = engine.resolved(plan, await resolve_async(plan.resolving, request.native))
        if plan is None:
            return Admission()
        if isinstance(plan, Plan) and plan.needs_body:
            limit = engine.config.max_body_bytes
            length = await body_length(limit)
            plan = engine.costs(plan, limit + 1 if length is None else length)
        if isinstance(plan, Reply):
            return Admission(reply=plan)
        exchange = Exchange(plan.checks)
        breaker = self.breaker
        if not breaker.asks():
            return self._failed(engine, plan, exchange, BreakerOpen())
        try:
            if _timeout is not None:
                async with _timeout(engine.config.timeout_ms / 1000):
                    await self._run(exchange)
            else:
                await asyncio.wait_for(self._run(exchange), engine.config.timeout_ms / 1000)
        except Exception as e:
            breaker.ended(e)
            admission = self._failed(engine, plan, exchange, e)
            if admission.reply is not None:  # refused: counted by no policy
                await self._give_back(exchange.failure_refunds(), "a refund")
            return admission
        breaker.answered()
        admission = self._admission(engine, plan, exchange.verdict())
        if engine.config.queues:
            wait = self._turn_s(plan, admission)
            if wait > 0:
                await asyncio.sleep(wait)
        return admission

    async def _quick(self, direct: Any, request: Request, quick: Quick, subject: str) -> Admission:
        """Guard._quick, awaited, within one timer as admit's exchange."""
        reply = None
        try:
            if not self.breaker.asks():
                raise BreakerOpen()
            words = quick.words(subject)
            if _timeout is not None:
                async with _timeout(self.config.timeout_ms / 1000):
                    reply = await direct.execute_command(*words)
            else:
                reply = await asyncio.wait_for(
                    direct.execute_command(*words), self.config.timeout_ms / 1000
                )
            admission = self._quick_admission(quick, reply)
        except Exception as e:
            admission, refunds = self._quick_failed(request, quick, subject, reply, e)
            await self._give_back(refunds, "a refund")
            return admission
        self.breaker.answered()
        return admission

    async def finish(self, admission: Admission, status: int) -> None:
        """Guard.finish, awaited."""
        await self._give_back(self._settlement(admission, status), "a refund")

    async def release(self, admission: Admission) -> None:
        """Guard.release, awaited."""
        if admission.leases:
            if admission.local is not None:
                release_locally(admission)
                return
            await self._give_back(admission.take_leases(), "a release")

    async def _run(self, exchange: Exchange) -> None:
        while (step := exchange.next_call()) is not None:
            exchange.answer(await self._send(step))

    async def _send(self, step: Step) -> Any:
        if isinstance(step, Release):
            return await self.limiter.held_lease(step.clause, step.lease_id).release()
        clauses, peek = step
        direct = self._direct
        if direct is None:
            return await self.limiter.all(*clauses, peek=peek)
        reply = await direct.execute_command(*all_args(clauses, peek))
        return parse_all(reply, leases_of(clauses))

    async def _give_back(self, steps: Sequence[Step], what: str) -> None:
        """Refunds or releases, within their own timeout; a failure is
        logged."""
        if not steps:
            return
        try:
            await asyncio.wait_for(self._send_all(steps), self._timeout_s())
        except Exception as e:
            log.warning("librl: %s failed: %s", what, reason(e))

    async def _send_all(self, steps: Sequence[Step]) -> None:
        for step in steps:
            await self._send(step)
