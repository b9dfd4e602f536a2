"""The engine's Redis exchanges, run by a blocking client (Guard: Django,
Flask, any WSGI app) or an asyncio one (AsyncGuard: ASGI). Both take the
same steps, in the same order; only the sends and the timeout differ.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from dataclasses import dataclass, field
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
    TypeVar,
    Union,
)

import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.retry import Retry

from .._async import AsyncLimiter
from .._sync import Limiter
from ._configuration import Config, load
from ._decide import Call, Exchange, Release, Step, Verdict
from ._engine import Engine
from ._fail import reason
from ._hook import Hook
from ._plan import Plan
from ._refusals import Reply
from ._request import Request

log = logging.getLogger("librl.http")

#: What a configuration may be given as: a Config, a dict, or a file path.
ConfigSource = Union[Config, Mapping[str, Any], str, "os.PathLike[str]"]

#: The redis-py clients Guard and AsyncGuard send through.
Client = Union[redis.Redis, redis.RedisCluster]
AsyncClient = Union[redis.asyncio.Redis, redis.asyncio.RedisCluster]

ClientT = TypeVar("ClientT")
LimiterT = TypeVar("LimiterT")


@dataclass
class Admission:
    """A request's check: send ``reply`` instead of calling the handler, or
    call it and add ``headers`` to its response; then ``finish`` (before
    the response goes out), and ``release`` once it is finished."""

    reply: Optional[Reply] = None
    headers: List[Tuple[str, str]] = field(default_factory=list)
    plan: Optional[Plan] = None
    verdict: Optional[Verdict] = None
    #: The slots the request holds (docs/http.md, Concurrency limits).
    leases: List[Release] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def holds_slots(self) -> bool:
        return bool(self.leases)

    def take_leases(self) -> List[Release]:
        """The slots to release, once: every later call gets none, so a
        request's slots are released exactly once however its response
        ends (sent, disconnected, failed), from any thread."""
        with self._lock:
            leases, self.leases = self.leases, []
        return leases


def _client_options(timeout_s: float) -> dict[str, Any]:
    # No retries of redis-py's own: the configuration's timeout is the whole
    # budget, then the fail mode decides.
    return {
        "socket_timeout": timeout_s,
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
    """connect(), with redis.asyncio."""
    options = _client_options(config.timeout_ms / 1000)
    if cluster_nodes:
        return redis.asyncio.RedisCluster(
            startup_nodes=_nodes(cluster_nodes, redis.asyncio.cluster.ClusterNode), **options
        )
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
    ) -> None:
        self.config = load(config)
        self.engine = Engine(self.config, on_decision)
        if client is None:
            client = self._connect(*_from_env(url, cluster_nodes))
        self.limiter = self._limiter(client)

    def _connect(self, url: Optional[str], cluster_nodes: Optional[str]) -> ClientT:
        raise NotImplementedError

    def _limiter(self, client: ClientT) -> LimiterT:
        raise NotImplementedError

    def _admission(self, plan: Plan, verdict: Verdict) -> Admission:
        """A check's outcome once Redis has answered."""
        passed, headers, refusal = self.engine.decided(plan, verdict)
        if not passed:
            return Admission(refusal, headers, plan)
        return Admission(refusal, headers, plan, verdict, verdict.leases)

    def _failed(self, plan: Plan, exchange: Exchange, error: Exception) -> Admission:
        """Redis failed: fail open serves the request, which holds the slots
        Redis gave (released when its response is finished)."""
        reply = self.engine.failed(plan, error)
        return Admission(reply=reply, plan=plan, leases=exchange.held() if reply is None else [])

    def _settlement(self, admission: Admission, status: int) -> List[Call]:
        """The refunds to send after the handler answered ``status``."""
        plan, verdict = admission.plan, admission.verdict
        if plan is None or verdict is None or not self.engine.has_refunds(plan.checks):
            return []
        return self.engine.settlement(plan.checks, verdict, status)

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
        plan = engine.plan(request, names)
        if plan is None:
            return Admission()
        if isinstance(plan, Plan) and plan.needs_body:
            length = body_length(self.config.max_body_bytes)
            plan = engine.costs(plan, self.config.max_body_bytes + 1 if length is None else length)
        if isinstance(plan, Reply):
            return Admission(reply=plan)
        exchange = Exchange(plan.checks)
        try:
            self._run(exchange, time.monotonic() + self._timeout_s())
        except Exception as e:
            if engine.fail.refuses:
                self._give_back(exchange.failure_refunds(), "a refund")
            return self._failed(plan, exchange, e)
        return self._admission(plan, exchange.verdict())

    def finish(self, admission: Admission, status: int) -> None:
        """After the handler: the `count: failed`/`succeeded` refunds."""
        self._give_back(self._settlement(admission, status), "a refund")

    def release(self, admission: Admission) -> None:
        """Once the response is finished (sent, or the client gone, or the
        handler failed): the request's concurrency slots back, once; a
        release that fails is logged (the lease ends by itself)."""
        if admission.leases:
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
        return self.limiter.all(*step[0], peek=step[1])

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
        plan = engine.plan(request, names)
        if plan is None:
            return Admission()
        if isinstance(plan, Plan) and plan.needs_body:
            length = await body_length(self.config.max_body_bytes)
            plan = engine.costs(plan, self.config.max_body_bytes + 1 if length is None else length)
        if isinstance(plan, Reply):
            return Admission(reply=plan)
        exchange = Exchange(plan.checks)
        try:
            await asyncio.wait_for(self._run(exchange), self._timeout_s())
        except Exception as e:
            if engine.fail.refuses:
                await self._give_back(exchange.failure_refunds(), "a refund")
            return self._failed(plan, exchange, e)
        return self._admission(plan, exchange.verdict())

    async def finish(self, admission: Admission, status: int) -> None:
        """Guard.finish, awaited."""
        await self._give_back(self._settlement(admission, status), "a refund")

    async def release(self, admission: Admission) -> None:
        """Guard.release, awaited."""
        if admission.leases:
            await self._give_back(admission.take_leases(), "a release")

    async def _run(self, exchange: Exchange) -> None:
        while (step := exchange.next_call()) is not None:
            exchange.answer(await self._send(step))

    async def _send(self, step: Step) -> Any:
        if isinstance(step, Release):
            return await self.limiter.held_lease(step.clause, step.lease_id).release()
        return await self.limiter.all(*step[0], peek=step[1])

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
