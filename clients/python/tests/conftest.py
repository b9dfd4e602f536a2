"""Session-wide real servers: standalone Redis 7.0 and Valkey 9.1, and a
3-primary cluster of each, all with librl loaded (servers.py starts them and
kills every one of them at exit); and the HTTP integrations' Redis 7.0."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
import redis.asyncio
from redis.cluster import RedisCluster

import librl
from servers import FLAVORS, Cluster, Server, start_cluster, start_server


@pytest.fixture(scope="session", params=FLAVORS)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    s = start_server(request.param)
    yield s
    s.stop()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(server: Server, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    client = server.client(protocol=request.param)
    yield client
    client.close()


@pytest.fixture
def limiter(r: redis.Redis) -> librl.Limiter:
    return librl.Limiter(r)


@pytest.fixture
async def ar(server: Server) -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
    yield client
    await client.aclose()


@pytest.fixture(scope="session", params=FLAVORS)
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    c = start_cluster(request.param)
    yield c
    c.stop()


@pytest.fixture
def rc(cluster: Cluster) -> Iterator[RedisCluster]:
    client = RedisCluster(host="127.0.0.1", port=cluster.port)
    yield client
    client.close()


@pytest.fixture
async def arc(cluster: Cluster) -> AsyncIterator[redis.asyncio.RedisCluster]:
    client = redis.asyncio.RedisCluster(host="127.0.0.1", port=cluster.port)
    yield client
    await client.aclose()


@pytest.fixture
def key() -> str:
    """A key no other test uses."""
    return f"t:{uuid.uuid4().hex[:16]}"


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Server]:
    """The Redis the HTTP integrations' tests serve their apps against."""
    s = start_server("redis")
    yield s
    s.stop()


@pytest.fixture
def url(redis_server: Server) -> str:
    """redis_server's URL, flushed, its command statistics reset."""
    with redis_server.client() as client:
        client.flushall()
        client.config_resetstat()
    return f"redis://127.0.0.1:{redis_server.port}"
