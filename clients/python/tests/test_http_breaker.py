"""The breaker (docs/http.md, Fail modes): after a failure on the way or a
timeout, requests apply the fail mode at once, one probe at a time, for a
back-off of 1 s doubled to 30 s. Its states with a clock of the test's
own; then each framework against a listener that accepts connections and
never answers, over real HTTP."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from typing import Iterator, List, Tuple

import pytest
import redis

from http_servers import factories, serving
from librl.http._fail import Breaker, unavailable_error


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_breaker_opens_probes_once_backs_off_and_closes() -> None:
    clock = Clock()
    breaker = Breaker(clock)
    assert breaker.asks()
    breaker.failed()
    assert not breaker.asks()  # 1 s of the fail mode
    clock.now += 1.0
    assert breaker.asks()  # the probe
    assert not breaker.asks()  # one at a time
    breaker.failed()
    clock.now += 1.5
    assert not breaker.asks()  # 2 s now
    clock.now += 0.5
    assert breaker.asks()
    breaker.answered()
    assert breaker.asks()  # closed: every request asks
    assert breaker.asks()


def test_the_back_off_is_capped_at_30_s() -> None:
    clock = Clock()
    breaker = Breaker(clock)
    breaker.failed()
    waits: List[float] = []
    for _ in range(8):
        start = clock.now
        while not breaker.asks():
            clock.now += 0.5
        waits.append(clock.now - start)
        breaker.failed()
    assert waits == [1, 2, 4, 8, 16, 30, 30, 30]


def test_a_failure_from_before_it_opened_does_not_extend_it() -> None:
    clock = Clock()
    breaker = Breaker(clock)
    breaker.failed()
    clock.now += 0.9
    breaker.failed()  # a request sent before the breaker opened
    clock.now += 0.1
    assert breaker.asks()


def test_what_opens_it() -> None:
    assert unavailable_error(redis.exceptions.ConnectionError("refused"))
    assert unavailable_error(TimeoutError())
    assert unavailable_error(redis.exceptions.BusyLoadingError("LOADING"))
    assert unavailable_error(redis.exceptions.ResponseError("MASTERDOWN Link down"))
    # Redis answered: the call was wrong, not the server.
    assert not unavailable_error(redis.exceptions.ResponseError("WRONGTYPE Operation"))
    assert not unavailable_error(redis.exceptions.ResponseError("ERR syntax error"))


@contextlib.contextmanager
def hanging_listener() -> Iterator[Tuple[int, List[socket.socket]]]:
    """A port whose connections are accepted and never answered, and the
    connections it accepted (one per attempt on Redis: a connection that
    timed out is dropped)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: List[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], held
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


@pytest.mark.parametrize("framework", ["fastapi", "django", "flask"])
def test_a_hanging_redis_costs_one_timeout_per_back_off(framework: str) -> None:
    config = {
        "timeout": "250ms",
        "fail": "open",
        "policies": [{"name": "p", "algorithm": "fixed", "limit": 5, "window": "60s"}],
    }
    with hanging_listener() as (port, attempts):
        app = factories()[framework](config, url=f"redis://127.0.0.1:{port}")
        with serving(framework, app) as running:
            waits = []
            for _ in range(20):
                start = time.monotonic()
                conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=10)
                conn.request("GET", "/")
                response = conn.getresponse()
                response.read()
                conn.close()
                assert response.status == 200  # fail: open serves it
                waits.append(time.monotonic() - start)
    # Without the breaker every request waits the 250 ms timeout on a
    # connection of its own. With it: the first request, and a probe after
    # each back-off (1 s, then 2 s), however slow the machine.
    assert 1 <= len(attempts) <= 3, (len(attempts), waits)
    assert sum(waits) < 20 * 0.25, waits
