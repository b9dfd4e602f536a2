"""The engine's Redis exchanges, run by a blocking client (Guard: Django,
Flask, any WSGI app) or an asyncio one (AsyncGuard: ASGI). Both take the
same steps, in the same order; only the sends and the timeout differ.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, List, Mapping, Optional, Sequence, Tuple, Union

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
) -> Union[redis.Redis, redis.RedisCluster]:
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
) -> Union[redis.asyncio.Redis, redis.asyncio.RedisCluster]:
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


class Guard:
    """The contract over a blocking redis-py client (``redis.Redis`` or
    ``redis.RedisCluster``). Without ``client``, one is made from ``url``
    or ``cluster_nodes``, else from $REDIS_URL or $REDIS_CLUSTER_NODES."""

    def __init__(
        self,
        config: ConfigSource,
        client: Optional[Union[redis.Redis, redis.RedisCluster]] = None,
        *,
        url: Optional[str] = None,
        cluster_nodes: Optional[str] = None,
        on_decision: Optional[Hook] = None,
    ) -> None:
        self.config = load(config)
        self.engine = Engine(self.config, on_decision)
        if client is None:
            client = connect(self.config, *_from_env(url, cluster_nodes))
        self.limiter = Limiter(client)

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
        passed, headers, refusal = engine.decided(plan, verdict)
        return Admission(refusal, headers, plan, verdict if passed else None)

    def finish(self, admission: Admission, status: int) -> None:
        """After the handler: the `count: failed`/`succeeded` refunds."""
        plan, verdict = admission.plan, admission.verdict
        if plan is None or verdict is None or not self.engine.has_refunds(plan.checks):
            return
        try:
            self._run(self.engine.refunds(plan.checks, verdict, status))
        except Exception as e:
            log.warning("librl: a refund after the response failed: %s", e)

    def _run(self, steps: Union[Exchange, Refunds]) -> Any:
        try:
            clauses, peek = next(steps)
            while True:
                clauses, peek = steps.send(self.limiter.all(*clauses, peek=peek))
        except StopIteration as done:
            return done.value


class AsyncGuard:
    """Guard over redis.asyncio (``Redis`` or ``RedisCluster``); the whole
    exchange of a request has the configuration's ``timeout``."""

    def __init__(
        self,
        config: ConfigSource,
        client: Optional[Union[redis.asyncio.Redis, redis.asyncio.RedisCluster]] = None,
        *,
        url: Optional[str] = None,
        cluster_nodes: Optional[str] = None,
        on_decision: Optional[Hook] = None,
    ) -> None:
        self.config = load(config)
        self.engine = Engine(self.config, on_decision)
        if client is None:
            client = connect_async(self.config, *_from_env(url, cluster_nodes))
        self.limiter = AsyncLimiter(client)

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
        passed, headers, refusal = engine.decided(plan, verdict)
        return Admission(refusal, headers, plan, verdict if passed else None)

    async def finish(self, admission: Admission, status: int) -> None:
        """Guard.finish, awaited."""
        plan, verdict = admission.plan, admission.verdict
        if plan is None or verdict is None or not self.engine.has_refunds(plan.checks):
            return
        try:
            await asyncio.wait_for(
                self._run(self.engine.refunds(plan.checks, verdict, status)),
                self.config.timeout_ms / 1000,
            )
        except Exception as e:
            log.warning("librl: a refund after the response failed: %s", e)

    async def _run(self, steps: Union[Exchange, Refunds]) -> Any:
        try:
            clauses, peek = next(steps)
            while True:
                clauses, peek = steps.send(await self.limiter.all(*clauses, peek=peek))
        except StopIteration as done:
            return done.value
