"""The SQLite cross-process wake: a waiter elected by ``flock``, woken by a poke, with a bounded poll.

* The waiter of a key (:meth:`SQLiteWatcher.lead`) holds an ``flock`` on ``<file>-waiter-<16 hex>``
  beside the database and, while it holds it, a UNIX datagram socket in the abstract namespace
  (Linux) whose address it writes into that file.
* A tenure process that commits something a worker may claim (an enqueue, a retry, a released
  dependent: :attr:`SQLiteEngine.loud_commits`) reads the waiter files (:class:`Poker`, cached) and
  sends each waiter one byte after its commit: the waiter wakes at once, polling or not.
* Writers that do not poke (an outbox ``conn=`` committed by the application, another tool, a
  tenure on another host or network namespace) are still seen: the waiter polls ``PRAGMA
  data_version`` fast right after a change and backs off, doubling, to :data:`IDLE_BOUND_S` while
  nothing happens. A lost poke, a closed socket, a stale file: the change is seen within that bound.
* A watcher that cannot receive pokes (no socket: not Linux, a read-only URI, no writable directory)
  polls at the fast interval, as every watcher did before pokes.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import sqlite3
import sys
import threading
import time
from typing import TYPE_CHECKING

try:
    import fcntl
except ImportError:  # not on Windows: every watcher waits, as before waiters
    fcntl = None  # type: ignore[assignment]

from ..waiter import LeadingWatcher, lead_digest

if TYPE_CHECKING:
    from .engine import SQLiteEngine

#: How long the store's connection may stay busy before a watcher falls back to its private
#: connection's ``data_version`` (which every commit moves, this store's quiet ones included).
BUSY_FALLBACK_S = 0.05
#: The longest an idle waiter that receives pokes goes between two ``data_version`` polls: the
#: bound on how late it sees a commit that poked nobody (docs/operations.md, "Files beside a
#: SQLite database").
IDLE_BOUND_S = 0.05
#: How often a poking process re-reads the waiter files while every poke is delivered, and how
#: soon after a poke that failed or found a waiter file empty (a waiter stepping down, dying).
REFRESH_S = 1.0
RETRY_S = 0.05
#: The first bytes of a waiter file that names its waiter's socket (then the address, hex).
MAGIC = b"tenure-wake 1 "
_WAITER = "-waiter-"


def _wake_socket() -> tuple[socket.socket, bytes] | None:
    """A non-blocking datagram socket bound to a fresh abstract address, or None where there is no
    abstract namespace (not Linux) or it cannot be bound."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    except OSError:
        return None
    try:
        address = b"\0tenure-wake-" + os.urandom(8).hex().encode()
        sock.bind(address)
        sock.setblocking(False)
    except OSError:
        sock.close()
        return None
    return sock, address


class Poker:
    """Sends one byte to the socket of every waiter of a database file after a loud commit (see the
    module docstring). Never raises, never blocks: a poke that cannot be sent is dropped (the
    waiter's bounded poll sees the commit). The waiter files are re-read every :data:`REFRESH_S`,
    or :data:`RETRY_S` after a failure."""

    def __init__(self, path: str) -> None:
        self._dir, base = os.path.split(os.path.abspath(path))
        self._prefix = base + _WAITER
        self._addresses: tuple[bytes, ...] = ()
        self._due = 0.0  # when to re-read the waiter files (time.monotonic)
        self._listed = 0.0  # when the directory was last listed (a retry re-reads the known files)
        self._names: list[str] = []
        self._reading = threading.Lock()
        self._sock: socket.socket | None = None  # unbound: it only sends
        if sys.platform.startswith("linux") and fcntl is not None:
            try:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._sock.setblocking(False)
            except OSError:
                self._sock = None

    def poke(self) -> None:
        """Wake every waiter of the file (their claim decides whether there is work)."""
        sock = self._sock
        if sock is None:
            return
        now = time.monotonic()
        if now >= self._due and self._reading.acquire(blocking=False):
            try:
                self._read(now)
            finally:
                self._reading.release()
        for address in self._addresses:
            try:
                sock.sendto(b"!", address)
            except BlockingIOError:
                pass  # its queue is full: it has pokes to read already
            except OSError:  # no such socket (the waiter stepped down or died): read again soon
                self._due = min(self._due, now + RETRY_S)

    def _read(self, now: float) -> None:
        """Re-read the waiter files; list the directory (which may be large) at most every
        :data:`REFRESH_S`, a retry re-reads only the files already known."""
        found: list[bytes] = []
        complete = True
        if now - self._listed >= REFRESH_S or not self._listed:
            self._listed = now
            try:
                self._names = [n for n in os.listdir(self._dir or ".")
                               if n.startswith(self._prefix) and len(n) == len(self._prefix) + 16]
            except OSError:
                self._names = []
        names = self._names
        for name in names:
            try:
                with open(os.path.join(self._dir, name), "rb") as f:
                    data = f.read(128)
            except OSError:
                continue
            if data.startswith(MAGIC) and data.endswith(b"\n"):
                try:
                    found.append(bytes.fromhex(data[len(MAGIC):-1].decode("ascii")))
                    continue
                except ValueError:
                    pass
            complete = False  # no waiter (stepping down, starting) or a torn write: look again soon
        self._addresses = tuple(found)
        self._due = min(now + (REFRESH_S if complete else RETRY_S), self._listed + REFRESH_S)

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


class SQLiteWatcher(LeadingWatcher):
    """Polls ``PRAGMA data_version`` on a private connection: it changes when ANY other
    connection (another process, or this process's shared one) commits. Cheap: no table read.

    The waiter lock (:meth:`LeadingWatcher.lead`) is an ``flock`` on a small file beside the database
    (``<file>-waiter-<hex of the key>``): the kernel drops it when its holder's process dies,
    however it dies. A watcher that is not the waiter does not poll at all. The waiter also listens
    for pokes (module docstring) and then polls adaptively, at most :data:`IDLE_BOUND_S` apart."""

    def __init__(self, path: str, uri: bool, interval: float, engine: SQLiteEngine | None = None,
                 idle_bound: float = IDLE_BOUND_S) -> None:
        self._lock = threading.Lock()  # close() never races a PRAGMA on another thread (segfault)
        self._conn = sqlite3.connect(path, uri=uri, check_same_thread=False, isolation_level=None)
        self._interval = interval
        self._idle_bound = max(idle_bound, interval)
        self._gap = interval  # the current poll gap: fast after a change, doubling up to the bound
        self._next_poll = 0.0
        self._woke_at = 0.0
        self._closed = threading.Event()
        self._last = self._version()
        # The store's own connection, when given (SQLiteEngine.own_data_version): its commits
        # are seen through loud_commits, only those that may have made a job claimable.
        self._engine = engine
        self._own = None if engine is None else engine.own_data_version()
        self._loud = 0 if engine is None else engine.loud_commits
        self._busy_since: float | None = None
        self._path = None if uri else path  # a URI (read-only form) takes no part in leading
        self._lead_fd: int | None = None  # the open waiter file of the key last asked for
        self._lead_name = ""
        self._leading = False
        self._following = False
        self._sock: socket.socket | None = None  # bound while leading (pokes arrive on it)
        self.pokes = 0  # pokes received (tests, diagnostics)
        #: Whether the change the last ``wait`` reported includes a loud commit of this watcher's own
        #: store (its enqueue also wakes its workers through the store's hook).
        self.own_change = False

    def _version(self) -> int:
        with self._lock:
            if self._closed.is_set():
                raise sqlite3.ProgrammingError("watcher closed")
            return self._conn.execute("PRAGMA data_version").fetchone()[0]

    def wait(self, timeout: float) -> bool:
        if self._following:  # another watcher waits for this key: nothing to poll
            self._closed.wait(max(timeout, 0.0))
            return False
        now = time.monotonic()
        deadline = now + timeout
        self.own_change = False
        while not self._closed.is_set():
            sock = self._sock
            try:
                if sock is not None and self._drain(sock):
                    news = self._poked(sock)
                    if news is not None:
                        return news
                if now >= self._next_poll:
                    if self._changed():
                        return self._woke(poked=False)
                    if sock is not None:
                        self._gap = min(self._gap * 2, self._idle_bound)
                    self._next_poll = now + self._gap
            except sqlite3.Error:
                return False
            except (OSError, ValueError):  # the socket broke: poll fast, as without pokes
                self._deaf(sock)
                continue
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                return False
            pause = min(self._next_poll - now, remaining)
            if sock is None:
                if self._closed.wait(pause):
                    return False
            elif pause > 0:
                try:
                    select.select([sock], [], [], pause)
                except (OSError, ValueError):
                    self._deaf(sock)
            now = time.monotonic()
        return False

    def _poked(self, sock: socket.socket) -> bool | None:
        """A poke was read: ``True`` to wake, ``False`` when the watcher closed meanwhile, ``None``
        when the poke is old news. At most one wake per fast interval (the pokes of a burst are
        read together), then it catches up with the poked commit (no second wake for it). A poke
        can arrive after the poll already saw its commit and woke for it (the writer pokes just
        after committing): waking again would only make an empty claim. A busy store connection
        cannot tell: the poke wakes."""
        pause = self._woke_at + self._interval - time.monotonic()
        if pause > 0 and self._closed.wait(pause):
            return False
        self._drain(sock)
        if self._changed() is not False:
            return self._woke(poked=True)
        return None

    def _deaf(self, sock: socket.socket | None) -> None:
        """Stop listening on a broken socket: the poll goes back to the fast interval (a later
        ``lead`` after ``follow`` listens again)."""
        with self._lock:
            if sock is not None and self._sock is sock:
                self._unlisten()
        self._gap, self._next_poll = self._interval, 0.0

    def _drain(self, sock: socket.socket) -> bool:
        """Read every pending poke; whether there was one."""
        got = False
        while True:
            try:
                sock.recv(64)
            except BlockingIOError:
                return got
            got = True
            self.pokes += 1

    def _woke(self, poked: bool) -> bool:
        """A change was seen. Seen by the poll (its writer did not poke): poll fast again, more may
        follow. Announced by a poke: the poll keeps backing off, the next change will poke too."""
        now = time.monotonic()
        self._woke_at = now
        if not poked:
            self._gap = self._interval
        self._next_poll = now + self._gap
        return True

    def _changed(self) -> bool | None:
        """Whether another connection committed, or this store made a loud commit, since the last
        call; ``None`` while the store's connection is busy (it cannot tell yet). Busy for
        :data:`BUSY_FALLBACK_S`: the private connection decides (it also sees this store's quiet
        commits: at worst an empty claim)."""
        engine = self._engine
        if engine is not None:
            own = engine.own_data_version()
            if own is not None:
                self._busy_since = None
                loud = engine.loud_commits
                if own != self._own or loud != self._loud:
                    self.own_change = self.own_change or loud != self._loud
                    self._own, self._loud = own, loud
                    return True
                return False
            now = time.monotonic()
            if self._busy_since is None:
                self._busy_since = now
            if now - self._busy_since < BUSY_FALLBACK_S:
                return None
        v = self._version()
        if v != self._last:
            self._last = v
            return True
        return False

    def lead(self, key: str) -> bool:
        if self._leading:
            return True
        if self._path is None or fcntl is None:
            return True  # no lock to take: wait as every watcher did
        with self._lock:
            if self._closed.is_set():
                return False
            name = f"{self._path}{_WAITER}{lead_digest(key).hex()}"
            if name != self._lead_name:
                self._close_lead_file()
                try:
                    self._lead_fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o666)
                except OSError:
                    self._following = False
                    return True  # no file beside the database (a read-only directory): wait
                self._lead_name = name
            try:
                fcntl.flock(self._lead_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # type: ignore[arg-type]
            except BlockingIOError:
                self._following = True  # held by another watcher
                return False
            except OSError as exc:
                # Not contention: the descriptor is gone (EBADF) or cannot be locked. Taken for
                # "held", every later try hit the same dead descriptor and this watcher never led
                # again; the next try opens the file anew (a dead number is not closed: it may be
                # another file's by now).
                if exc.errno != errno.EBADF:
                    self._close_lead_file()
                self._lead_fd, self._lead_name, self._following = None, "", True
                return False
            self._leading, self._following = True, False
            self._listen()
            self._gap, self._next_poll = self._interval, 0.0  # poll at once, then fast
            return True

    def _listen(self) -> None:
        """Bind the poke socket and name it in the waiter file (called holding the lock and the
        file's flock). Without a socket the file is left empty and the poll stays fast."""
        made = _wake_socket()
        if made is None:
            return
        sock, address = made
        record = MAGIC + address.hex().encode("ascii") + b"\n"
        try:
            os.pwrite(self._lead_fd, record, 0)  # type: ignore[arg-type]
            os.ftruncate(self._lead_fd, len(record))  # type: ignore[arg-type]
        except OSError:
            sock.close()
            return
        self._sock = sock

    def _unlisten(self) -> None:
        """Empty the waiter file (while its flock is still held: a successor writes after) and close
        the socket; called holding the lock."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        if self._lead_fd is not None:
            try:
                os.ftruncate(self._lead_fd, 0)
            except OSError:
                pass
        sock.close()

    def follow(self) -> None:
        with self._lock:
            if self._leading and self._lead_fd is not None:
                self._unlisten()
                try:
                    fcntl.flock(self._lead_fd, fcntl.LOCK_UN)
                except OSError:
                    pass
            self._leading = False
            self._following = self._lead_fd is not None

    def _close_lead_file(self) -> None:
        """Close the waiter file (which drops its lock, if held); called holding ``_lock``."""
        if self._leading:
            self._unlisten()
        fd, self._lead_fd, self._lead_name = self._lead_fd, None, ""
        self._leading = False
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            self._close_lead_file()
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
