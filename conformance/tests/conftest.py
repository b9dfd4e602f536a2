"""The Redis servers the black-box runner's cases share, per pytest run:
one standalone server with the module, and a 3-primary cluster started
the first time a `cluster` case needs it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from servers import Server, start_server

from blackbox import Clusters
from examples import stop_all


@pytest.fixture(scope="session")
def standalone() -> Iterator[Server]:
    server = start_server("redis")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def clusters() -> Iterator[Clusters]:
    holder = Clusters()
    yield holder
    if holder.cluster is not None:
        holder.cluster.stop()
    stop_all()
