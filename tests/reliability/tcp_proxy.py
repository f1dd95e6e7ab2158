"""A small threaded TCP forwarder that tests put between tenure and PostgreSQL to fake the network.

It forwards bytes both ways, and on demand:

* :meth:`TcpProxy.silence` — a partition: every open connection stops answering (bytes in both
  directions are read and dropped) WITHOUT being closed, so a client blocked on a read waits
  forever unless it has a deadline of its own; new connections are accepted and silenced too.
  :meth:`TcpProxy.restore` heals it: the silenced connections are closed (as a NAT that lost their
  state would) and new connections forward again.
* :meth:`TcpProxy.lose_answer_containing` — a lost answer: once a server->client chunk has
  contained a marker (a job id), the first chunk in which the server says its transaction is over
  (ReadyForQuery, idle: committed) is dropped, the client side of that connection is closed, and
  the server side is drained for a moment before it is closed, so the server never sees a broken
  connection before its commit. The client sees the connection break mid-call with its statement
  committed: "the claim committed, the worker never saw the answer".

Only for tests; one thread per direction per connection.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from urllib.parse import urlsplit, urlunsplit

_CHUNK = 65536
#: The protocol's ReadyForQuery message with status "idle": the server's transaction is over
#: (committed), whatever the client does next.
_READY_IDLE = b"Z\x00\x00\x00\x05I"


class _Link:
    """One proxied connection: the client's socket and the server's."""

    def __init__(self, proxy: TcpProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.silenced = proxy.silenced
        self.marked = False  # the marked answer arrived: the transaction's end is lost
        self.losing = False  # an answer is being lost: the server side is drained, not closed
        self.closed = threading.Event()

    def start(self) -> None:
        for src, dst, upstream in ((self.client, self.server, True), (self.server, self.client, False)):
            threading.Thread(
                target=self._pump, args=(src, dst, upstream), daemon=True, name="tcp-proxy-pump"
            ).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upstream: bool) -> None:
        try:
            while not self.closed.is_set():
                ready, _, _ = select.select([src], [], [], 0.05)
                if not ready:
                    continue
                data = src.recv(_CHUNK)
                if not data:
                    break
                if self.silenced:
                    continue  # dropped on the floor: the other side hears nothing
                if not upstream and (self.marked or self.proxy._take_marker(data)):
                    # From the marked answer on, the exchange goes on until the server reports its
                    # transaction over (ReadyForQuery, idle: committed); that last answer is lost.
                    self.marked = True
                    if _READY_IDLE in data:
                        self._lose_answer()
                        return
                dst.sendall(data)
        except OSError:
            pass
        if not self.losing:
            self.close()

    def _lose_answer(self) -> None:
        """Close the client side now; drain the server side briefly (it finishes its work and its
        writes succeed), then close it."""
        self.losing = True
        with contextlib.suppress(OSError):
            self.client.shutdown(socket.SHUT_RDWR)
        self.client.close()
        deadline = time.monotonic() + 0.5
        with contextlib.suppress(OSError):
            while time.monotonic() < deadline:
                ready, _, _ = select.select([self.server], [], [], 0.05)
                if ready and not self.server.recv(_CHUNK):
                    break
        self.close()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        self.proxy._forget(self)


class TcpProxy:
    """``with TcpProxy("127.0.0.1", 5432) as proxy:`` then connect to ``proxy.url(pg_url)``."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.silenced = False
        self._marker: bytes | None = None
        self._marker_left = 0
        self.answers_lost = 0
        self._links: set[_Link] = set()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="tcp-proxy-accept")

    @classmethod
    def for_url(cls, url: str) -> TcpProxy:
        parts = urlsplit(url)
        return cls(parts.hostname or "127.0.0.1", parts.port or 5432)

    def url(self, url: str) -> str:
        """``url`` with its host and port replaced by the proxy's."""
        parts = urlsplit(url)
        auth = parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@127.0.0.1:{self.port}" if auth else f"127.0.0.1:{self.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> TcpProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        for link in self.links():
            link.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._listener], [], [], 0.05)
            if not ready:
                continue
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            link = _Link(self, client, server)
            with self._lock:
                self._links.add(link)
            link.start()

    def _forget(self, link: _Link) -> None:
        with self._lock:
            self._links.discard(link)

    def links(self) -> list[_Link]:
        with self._lock:
            return list(self._links)

    # -- faults -----------------------------------------------------------------------------------
    def silence(self) -> None:
        """Every connection, open or new, goes silent (nothing is closed)."""
        self.silenced = True
        for link in self.links():
            link.silenced = True

    def restore(self) -> None:
        """The network is back: silenced connections are closed, new ones forward again."""
        self.silenced = False
        for link in self.links():
            if link.silenced:
                link.close()

    def lose_answer_containing(self, marker: bytes, times: int = 1) -> None:
        """Arm: the next ``times`` server answers that contain ``marker`` are lost (see the module
        docstring)."""
        with self._lock:
            self._marker = marker
            self._marker_left = times

    def _take_marker(self, data: bytes) -> bool:
        with self._lock:
            if self._marker is None or self._marker not in data:
                return False
            self._marker_left -= 1
            if self._marker_left <= 0:
                self._marker = None
            self.answers_lost += 1
            return True
