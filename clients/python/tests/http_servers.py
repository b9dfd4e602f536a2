"""Real HTTP servers for the integrations' tests, in a thread of the test
process on a free loopback port: uvicorn for ASGI apps, waitress for WSGI
apps (Django, Flask). Each app is one of examples/python's conformance
apps, as scripts/serve-example serves them."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import threading
import time
from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Union

import serve
import uvicorn
import waitress.server
import waitress.wasyncore

from servers import free_port

#: framework -> make_app(config, url=..., cluster_nodes=...)
Factory = Callable[..., Any]


def factories() -> Dict[str, Factory]:
    """Every conformance app examples/python/serve.py serves, by name."""
    return {name: serve.load(name)[0].make_app for name in serve.SERVERS}


class Running:
    """A server in a thread; ``port`` answers until ``stop()``."""

    def __init__(self, app: Any, asgi: bool) -> None:
        self.port = free_port()
        self._uvicorn: Optional[uvicorn.Server] = None
        self._stopping = False
        self._waitress: Any = None
        if asgi:
            config = uvicorn.Config(
                app,
                host="127.0.0.1",
                port=self.port,
                log_level="error",
                lifespan="off",
                access_log=False,
                # librl reads X-Forwarded-For itself, from trusted proxies only.
                proxy_headers=False,
            )
            self._uvicorn = uvicorn.Server(config)
            self._thread = threading.Thread(target=self._run_uvicorn, daemon=True)
        else:
            self._waitress = waitress.server.create_server(
                app,
                host="127.0.0.1",
                port=self.port,
                threads=4,  # a parallel step's requests, and one more
                clear_untrusted_proxy_headers=False,
            )
            self._thread = threading.Thread(target=self._run_waitress, daemon=True)
        self._thread.start()
        self._wait()

    def _run_uvicorn(self) -> None:
        assert self._uvicorn is not None
        asyncio.run(self._uvicorn.serve())

    def _run_waitress(self) -> None:
        # waitress's own run() loops until its sockets are closed, and closing
        # them from another thread breaks its select(): loop here instead, one
        # short poll at a time, and close everything in this thread.
        server = self._waitress
        while not self._stopping:
            waitress.wasyncore.loop(timeout=0.05, map=server._map, use_poll=True, count=1)
        server.task_dispatcher.shutdown()
        waitress.wasyncore.close_all(server._map)

    def _wait(self) -> None:
        deadline = time.monotonic() + 10
        if self._uvicorn is not None:
            while not self._uvicorn.started:
                if time.monotonic() > deadline or not self._thread.is_alive():
                    raise RuntimeError("uvicorn did not start")
                time.sleep(0.005)
        # waitress listens from create_server on.

    def stop(self) -> None:
        self._stopping = True
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        self._thread.join(timeout=5)


@contextlib.contextmanager
def serving(framework: str, app: Any) -> Iterator[Running]:
    server = Running(app, asgi=serve.SERVERS[framework] == "uvicorn")
    try:
        yield server
    finally:
        server.stop()


def get(
    port: int, path: str, headers: Optional[Dict[str, Union[str, bytes]]] = None
) -> Tuple[int, Dict[str, str], bytes]:
    """A GET of ``path``: the status, the headers by lower-case name, the body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return (
            response.status,
            {k.lower(): v for k, v in response.getheaders()},
            response.read(),
        )
    finally:
        conn.close()
