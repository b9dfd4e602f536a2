"""Concurrency policies in the Python integrations beyond the conformance
cases (docs/http.md, Concurrency limits; docs/http/python.md, Concurrency
limits): a streamed response holds its slot until its last chunk, each
slot is released exactly once however the response ends, a release that
fails is logged and leaves the response alone, and FastAPI's dependency
holds a route's slots too. Real servers, real HTTP, a real Redis with the
module."""

from __future__ import annotations

import http.client
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, AsyncIterator, Callable, Dict, Tuple
from typing import Iterator as Iter

import django_app
import flask
import pytest
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpResponse, StreamingHttpResponse
from django.urls import path as django_path
from fastapi import Depends, FastAPI
from fastapi.responses import PlainTextResponse, StreamingResponse

from http_servers import factories, serving
from librl.http.fastapi import RateLimit as FastAPIRateLimit
from librl.http.flask import RateLimit as FlaskRateLimit
from servers import Server

FRAMEWORKS = ["fastapi", "django", "flask"]
KEY = "rl:{ip:127.0.0.1}:slots"
#: One slot per client; a lease far longer than any test, so a slot that is
#: not released shows as a 429 rather than passing after it expires.
CONFIG: Dict[str, Any] = {
    "exempt_loopback": False,
    "timeout": "2s",
    "policies": [{"name": "slots", "algorithm": "concurrency", "limit": 1, "lease": "30s"}],
}
#: The gap between a streamed response's two chunks.
GAP_S = 0.6


def get(port: int, path: str = "/", headers: Dict[str, str] | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def releases(server: Server) -> int:
    """RL.CONCURRENT calls since the test began: the integrations send it
    only to release (a slot is taken in RL.ALL)."""
    with server.client() as r:
        stats = r.info("commandstats").get("cmdstat_RL.CONCURRENT", {})
    return int(stats.get("calls", 0))


def key_exists(server: Server) -> bool:
    with server.client() as r:
        return bool(r.exists(KEY))


# -- a streamed response, in each framework ----------------------------------------


def two_chunks() -> Iter[bytes]:
    yield b"first "
    time.sleep(GAP_S)
    yield b"second"


async def two_chunks_async() -> AsyncIterator[bytes]:
    import asyncio

    yield b"first "
    await asyncio.sleep(GAP_S)
    yield b"second"


def fastapi_streaming(url: str) -> FastAPI:
    app = FastAPI()
    FastAPIRateLimit(CONFIG, url=url).install(app)

    @app.get("/stream")
    async def stream() -> StreamingResponse:
        return StreamingResponse(two_chunks_async(), media_type="text/plain")

    @app.get("/")
    async def ok() -> PlainTextResponse:
        return PlainTextResponse("ok")

    return app


def flask_streaming(url: str) -> flask.Flask:
    app = flask.Flask(__name__)
    FlaskRateLimit(app, config=CONFIG, url=url)

    @app.get("/stream")
    def stream() -> flask.Response:
        return flask.Response(two_chunks(), mimetype="text/plain")

    @app.get("/")
    def ok() -> str:
        return "ok"

    return app


urlpatterns = [
    django_path("stream", lambda request: StreamingHttpResponse(two_chunks())),
    django_path("", lambda request: HttpResponse("ok")),
]


def django_streaming(url: str) -> WSGIHandler:
    django_app.make_app(CONFIG, url=url)  # configures Django once per process
    settings.ROOT_URLCONF = __name__
    return WSGIHandler()


STREAMING: Dict[str, Callable[[str], Any]] = {
    "fastapi": fastapi_streaming,
    "django": django_streaming,
    "flask": flask_streaming,
}


@pytest.fixture
def restore_django_urls() -> Iterator[None]:
    django_app.make_app(CONFIG)
    saved = settings.ROOT_URLCONF
    yield
    settings.ROOT_URLCONF = saved


def read_first_chunk(port: int) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/stream")
    response = conn.getresponse()
    assert response.status == 200
    assert response.read1(6) == b"first "
    return conn, response


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_streamed_response_holds_its_slot_until_its_last_chunk(
    framework: str, url: str, redis_server: Server, restore_django_urls: None
) -> None:
    with serving(framework, STREAMING[framework](url)) as running:
        conn, response = read_first_chunk(running.port)
        try:
            assert get(running.port) == 429  # the stream holds the one slot
            assert response.read() == b"second"
        finally:
            conn.close()
        time.sleep(0.1)
        assert get(running.port) == 200
        time.sleep(0.1)
    assert not key_exists(redis_server)
    assert releases(redis_server) == 2


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_stream_whose_client_leaves_frees_its_slot(
    framework: str, url: str, redis_server: Server, restore_django_urls: None
) -> None:
    """ASGI: the server tells the app at once (a StreamingResponse listens
    for it), before the stream's next chunk; WSGI: writing the next chunk
    fails, and the server closes the response."""
    with serving(framework, STREAMING[framework](url)) as running:
        conn, _ = read_first_chunk(running.port)
        conn.close()
        time.sleep(GAP_S / 2 if framework == "fastapi" else GAP_S + 0.3)
        assert get(running.port) == 200
        time.sleep(0.1)
    assert not key_exists(redis_server)
    assert releases(redis_server) == 2


# -- exactly once, however the response ends -----------------------------------------


def disconnect_after(port: int, seconds: float, headers: Dict[str, str]) -> None:
    """Sends a GET and closes the socket ``seconds`` later, unread."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n{lines}\r\n".encode())
        time.sleep(seconds)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_slot_is_released_once_however_the_response_ends(
    framework: str, url: str, redis_server: Server
) -> None:
    app = factories()[framework](CONFIG, url=url)
    with serving(framework, app) as running:
        assert get(running.port) == 200  # sent
        time.sleep(0.1)
        assert get(running.port, headers={"X-Conformance-Fail": "1"}) == 500  # raised
        time.sleep(0.1)
        disconnect_after(running.port, 0.1, {"X-Conformance-Delay-Ms": "300"})  # client left
        time.sleep(0.5)
        assert get(running.port) == 200
        time.sleep(0.1)
    assert not key_exists(redis_server)
    assert releases(redis_server) == 4


# -- a release that fails --------------------------------------------------------------


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_failed_release_is_logged_and_the_response_sent(
    framework: str, url: str, redis_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """While the handler runs, the slot's key becomes a string: RELEASE
    answers WRONGTYPE, which is logged; the client gets its 200."""
    app = factories()[framework](CONFIG, url=url)
    statuses = []
    with caplog.at_level(logging.WARNING, logger="librl.http"), serving(framework, app) as running:
        slow = threading.Thread(
            target=lambda: statuses.append(
                get(running.port, headers={"X-Conformance-Delay-Ms": "400"})
            )
        )
        slow.start()
        time.sleep(0.2)
        with redis_server.client() as r:
            r.delete(KEY)
            r.set(KEY, "not a limiter")
        slow.join()
        time.sleep(0.1)
    assert statuses == [200]
    assert "librl: a release failed" in caplog.text
    assert "WRONGTYPE" in caplog.text


# -- FastAPI's dependency ----------------------------------------------------------


def test_a_fastapi_dependency_holds_the_routes_slot(url: str, redis_server: Server) -> None:
    import asyncio

    limits = FastAPIRateLimit(CONFIG, url=url)
    app = FastAPI()
    limits.install(app, middleware=False)  # only the dependency checks

    @app.get("/slow", dependencies=[Depends(limits.policies("slots"))])
    async def slow() -> str:
        await asyncio.sleep(0.4)
        return "ok"

    statuses = []
    with serving("fastapi", app) as running:
        first = threading.Thread(target=lambda: statuses.append(get(running.port, "/slow")))
        first.start()
        time.sleep(0.2)
        assert get(running.port, "/slow") == 429
        first.join()
        time.sleep(0.1)
        assert get(running.port, "/slow") == 200
        time.sleep(0.1)
    assert statuses == [200]
    assert not key_exists(redis_server)
    assert releases(redis_server) == 2
