"""A Redis that hangs (conformance/README.md, A case: `redis: hang`): a
listener on a free loopback port that accepts every connection and never
answers, holding what each client sends, until told to forward: then
each connection, its held bytes first, is joined to the real server, so
a client whose commands timed out meets no reply out of order."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import List

from servers import free_port


class HangingRedis:
    def __init__(self, real_port: int) -> None:
        self.real_port = real_port
        self.port = free_port()
        self._forward = threading.Event()
        self._lock = threading.Lock()
        self._sockets: List[socket.socket] = []
        self._closed = False
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def set_hanging(self, hanging: bool) -> None:
        """Hang (hold every byte, answer nothing) or forward to the real server."""
        if hanging:
            self._forward.clear()
        else:
            self._forward.set()

    def close(self) -> None:
        self._closed = True
        self._forward.set()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in [self._listener, *sockets]:
            with contextlib.suppress(OSError):
                s.close()

    def _track(self, s: socket.socket) -> None:
        with self._lock:
            self._sockets.append(s)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._track(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        held = bytearray()
        client.settimeout(0.05)
        # Hanging: read and hold (so the client's writes never block), answer nothing.
        while not self._forward.is_set():
            try:
                data = client.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not data:
                return
            held += data
        if self._closed:
            return
        client.settimeout(None)
        try:
            server = socket.create_connection(("127.0.0.1", self.real_port))
        except OSError:
            return
        self._track(server)
        try:
            server.sendall(bytes(held))
        except OSError:
            return
        threading.Thread(target=_pump, args=(server, client), daemon=True).start()
        _pump(client, server)


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copies src to dst until either end closes, then closes both."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
