"""A TCP proxy on 127.0.0.1 in front of the local S3 server (tests/object_store.py) that a
test can pause: paused, it accepts connections and reads what clients send, but never
answers (as a store that stops answering, not one that is gone). It is switched by a
threading.Event, set by the test or by the proxy itself when a request it is told to
watch for arrives (at once, or after part of the answer went back), so that no test
depends on timing."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

CHUNK = 64 * 1024


@dataclass
class Watch:
    """Pause the proxy when a request holding `request` comes (the first `skip` such
    requests relayed), once `answered` bytes of the server's answer on that connection
    went back to the client."""

    request: bytes
    answered: int = 0
    skip: int = 0


@dataclass
class _Connection:
    """One client's connection and the server connection it is relayed to."""

    client: socket.socket
    server: socket.socket
    pause_after: int | None = None
    """Bytes of the server's answer still to relay before pausing (a watched request)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


class PausableStore:
    """The proxy: `endpoint` is its URL; `paused` stops every answer while set; `watch`
    pauses it at a request (cleared once it fired)."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self._upstream = (host, int(port))
        self.paused = threading.Event()
        self.watch: Watch | None = None
        self.swallowed = threading.Event()
        """Set once a request was read and left unanswered."""
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._sockets: list[socket.socket] = [self._listener]
        self._lock = threading.Lock()
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        """The URL clients use instead of the server's."""
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def close(self) -> None:
        """Stop accepting and close every connection."""
        self._closed.set()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._upstream)
            with self._lock:
                self._sockets += [client, server]
            connection = _Connection(client, server)
            threading.Thread(target=self._requests, args=(connection,), daemon=True).start()
            threading.Thread(target=self._answers, args=(connection,), daemon=True).start()

    def _requests(self, connection: _Connection) -> None:
        """Relay what the client sends, unless paused (then read and dropped)."""
        for data in _received(connection.client):
            watch = self.watch
            if watch is not None and watch.request in data and watch.skip:
                watch.skip -= 1
            elif watch is not None and watch.request in data:
                self.watch = None
                if watch.answered:
                    with connection.lock:
                        connection.pause_after = watch.answered
                else:
                    self.paused.set()
            if self.paused.is_set():
                self.swallowed.set()
                continue
            with contextlib.suppress(OSError):
                connection.server.sendall(data)
        with contextlib.suppress(OSError):
            connection.server.shutdown(socket.SHUT_WR)

    def _answers(self, connection: _Connection) -> None:
        """Relay what the server answers, unless paused (then dropped)."""
        for data in _received(connection.server):
            with connection.lock:
                if connection.pause_after is not None:
                    data = data[: connection.pause_after]
                    connection.pause_after -= len(data)
                    if not connection.pause_after:
                        connection.pause_after = None
                        self.paused.set()
                    self._send(connection.client, data)
                    continue
            if not self.paused.is_set():
                self._send(connection.client, data)
        if not self.paused.is_set():
            with contextlib.suppress(OSError):
                connection.client.shutdown(socket.SHUT_WR)

    @staticmethod
    def _send(sock: socket.socket, data: bytes) -> None:
        with contextlib.suppress(OSError):
            sock.sendall(data)


def _received(sock: socket.socket) -> Iterator[bytes]:
    """What arrives on `sock`, chunk by chunk, until it is closed."""
    while True:
        try:
            data = sock.recv(CHUNK)
        except OSError:
            return
        if not data:
            return
        yield data
