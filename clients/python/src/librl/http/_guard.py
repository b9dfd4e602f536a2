"""The engine's Redis exchanges, run by a blocking client (Guard: Django,
Flask, any WSGI app) or an asyncio one (AsyncGuard: ASGI). Both take the
same steps, in the same order; only the sends and the timeout differ.
"""

from __future__ import annotations

import asyncio
import os
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
from ._config import Config, load
from ._engine import Engine, Exchange, Hook, Plan, Refunds, Reply, Request, Verdict, log

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
    call it and add ``headers`` to its response; then ``finish``."""

    reply: Optional[Reply] = None
    headers: List[Tuple[str, str]] = field(default_factory=list)
    plan: Optional[Plan] = None
    verdict: Optional[Verdict] = None


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
        return Admission(refusal, headers, plan, verdict if passed else None)

    def _refunds(self, admission: Admission, status: int) -> Optional[Refunds]:
        """The refunds to send after the handler answered ``status``, if
        the request's check has any."""
        plan, verdict = admission.plan, admission.verdict
        if plan is None or verdict is None or not self.engine.has_refunds(plan.checks):
            return None
        return self.engine.refunds(plan.checks, verdict, status)


class Guard(_Guarding[Client, Limiter]):
    """The contract over a blocking redis-py client (``redis.Redis`` or
    ``redis.RedisCluster``). Without ``client``, one is made from ``url``
    or ``cluster_nodes``, else from $REDIS_URL or $REDIS_CLUSTER_NODES."""

    def _connect(self, url: Optional[str], cluster_nodes: Optional[str]) -> Client:
        return connect(self.config, url, cluster_nodes)

    def _limiter(self, client: Client) -> Limiter:
        return Limiter(client)

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
        start = time.monotonic()
        try:
            verdict = self._run(engine.exchange(plan.checks))
            if time.monotonic() - start > self.config.timeout_ms / 1000:
                raise TimeoutError(f"Redis answered after the {self.config.timeout_ms} ms timeout")
        except Exception as e:
            return Admission(reply=engine.failed(plan, e), plan=plan)
        return self._admission(plan, verdict)

    def finish(self, admission: Admission, status: int) -> None:
        """After the handler: the `count: failed`/`succeeded` refunds."""
        refunds = self._refunds(admission, status)
        if refunds is None:
            return
        try:
            self._run(refunds)
        except Exception as e:
            log.warning("librl: a refund after the response failed: %s", e)

    def _run(self, steps: Union[Exchange, Refunds]) -> Any:
        try:
            clauses, peek = next(steps)
            while True:
                clauses, peek = steps.send(self.limiter.all(*clauses, peek=peek))
        except StopIteration as done:
            return done.value


class AsyncGuard(_Guarding[AsyncClient, AsyncLimiter]):
    """Guard over redis.asyncio (``Redis`` or ``RedisCluster``); the whole
    exchange of a request has the configuration's ``timeout``."""

    def _connect(self, url: Optional[str], cluster_nodes: Optional[str]) -> AsyncClient:
        return connect_async(self.config, url, cluster_nodes)

    def _limiter(self, client: AsyncClient) -> AsyncLimiter:
        return AsyncLimiter(client)

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
        try:
            verdict = await asyncio.wait_for(
                self._run(engine.exchange(plan.checks)), self.config.timeout_ms / 1000
            )
        except Exception as e:
            return Admission(reply=engine.failed(plan, e), plan=plan)
        return self._admission(plan, verdict)

    async def finish(self, admission: Admission, status: int) -> None:
        """Guard.finish, awaited."""
        refunds = self._refunds(admission, status)
        if refunds is None:
            return
        try:
            await asyncio.wait_for(self._run(refunds), self.config.timeout_ms / 1000)
        except Exception as e:
            log.warning("librl: a refund after the response failed: %s", e)

    async def _run(self, steps: Union[Exchange, Refunds]) -> Any:
        try:
            clauses, peek = next(steps)
            while True:
                clauses, peek = steps.send(await self.limiter.all(*clauses, peek=peek))
        except StopIteration as done:
            return done.value
