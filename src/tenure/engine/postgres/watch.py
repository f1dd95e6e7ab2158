"""Wake-ups across processes on PostgreSQL: ``LISTEN tenure_jobs`` (and the cancel channel) on a
dedicated connection that reconnects by itself; the waiter lock (:meth:`LeadingWatcher.lead`) is a
session advisory lock on that same connection, and a worker's cancel requests are heard on it too
(:meth:`PostgresWatcher.cancel_listener`)."""

from __future__ import annotations

import math
import os
import select
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.pq import ConnStatus, ExecStatus

from ..base import Watcher
from ..waiter import LeadingWatcher, lead_digest
from . import queries as Q
from .deadline import Watchdog
from .deadline import current as current_deadline

#: The waiter lock of one key: a session advisory lock in the two-int4 key space (tenure's other
#: advisory locks take one bigint key, a space of its own), so it dies with the connection.
TRY_LEAD = "SELECT pg_try_advisory_lock(%s::int, %s::int)"
UNLEAD = "SELECT pg_advisory_unlock(%s::int, %s::int)"
UNLISTEN = "UNLISTEN tenure_jobs"
LISTEN_CANCEL = f"LISTEN {Q.CANCEL_CHANNEL}"
UNLISTEN_CANCEL = f"UNLISTEN {Q.CANCEL_CHANNEL}"


class PostgresWatcher(LeadingWatcher):
    """``LISTEN tenure_jobs`` on a dedicated connection (never a pooled one: a pooled connection
    would carry the LISTEN to other users, and must not sit blocked).

    ``wait`` polls the connection's socket and a private pipe (so ``close`` from another
    thread ends a wait at once), then drains every pending notification. If the connection is
    lost it reconnects by itself with a capped exponential backoff, and answers True once it is
    back: notifications sent while it was away are lost, so the caller must poll once.

    The watcher of ``tenure_jobs`` can also hear cancel requests for another thread
    (:meth:`cancel_listener`): ``LISTEN tenure_cancel`` on the same connection, so that a worker
    running jobs has one listening server process, not two (every ``NOTIFY`` wakes every listening
    backend of the database, whatever its channel, and each runs a transaction to read it: one
    commit per enqueue per listener, docs/performance.md). The thread calling :meth:`wait` (the
    worker's watch thread) applies the ``LISTEN`` and hands the cancel notifications over.
    """

    BACKOFF_MIN = 0.05
    BACKOFF_MAX = 2.0

    def __init__(self, conninfo: str, schema: str | None, connect_kwargs: dict[str, Any],
                 channel: str = Q.CHANNEL, watchdog: Watchdog | None = None,
                 call_s: float | None = None) -> None:
        #: The channel listened to: ``tenure_jobs`` (new work), or ``tenure_cancel`` (a cancel
        #: request, whose payload is "<schema> <job id>").
        self._channel = channel
        self._conninfo = conninfo
        self._schema = schema
        self._kwargs = connect_kwargs
        #: Cuts a statement of :meth:`lead`, :meth:`follow` or the (re)connect's set-up that
        #: outlives its deadline (the thread's, else ``call_s``): on a silent network it would
        #: block the watch thread, and a stopping worker waiting for it, for good.
        self._watchdog, self._call_s = watchdog, call_s
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._woken = False  # a notification psycopg received while running a command
        self._backoff = 0.0
        self._next_attempt = 0.0
        #: How many times the watcher re-established its LISTEN connection (a test signal).
        self.reconnects = 0
        self._listen = True  # LISTEN on (re)connect: False while another watcher is the waiter
        self._lead_conn: psycopg.Connection | None = None  # the connection holding the waiter lock
        self._lead_keys: tuple[int, int] | None = None
        #: The cancel side (:meth:`cancel_listener`): its handle while wanted, and whether
        #: ``LISTEN tenure_cancel`` is in effect on the current connection.
        self._cancel: _CancelSide | None = None
        self._cancel_on = False
        #: A ``LISTEN`` (True) or ``UNLISTEN`` (False) of the cancel channel sent and not yet
        #: answered, or None (:meth:`_apply_cancel`).
        self._cancel_sent: bool | None = None
        self._pipe_lock = threading.Lock()  # no nudge is written to a pipe being closed
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        try:
            self._connect()
        except psycopg.Error:
            self._conn = None  # the first wait retries (and answers True when it gets through)

    def _connect(self) -> None:
        conn = psycopg.connect(self._conninfo, autocommit=True, **self._kwargs)
        try:
            conn.add_notify_handler(self._on_notify)
            with self._bounded(conn):
                if self._schema is None:
                    # A SELECT without FROM answers exactly one row.
                    self._schema = conn.execute(Q.CURRENT_SCHEMA).fetchone()[0]  # type: ignore[index]
                if self._channel != Q.CHANNEL:
                    conn.execute(f"LISTEN {self._channel}")
                elif self._listen:
                    conn.execute(Q.LISTEN)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._cancel_on, self._cancel_sent = False, None
        try:
            self._apply_cancel(conn)
        except psycopg.Error:
            pass  # the next wait's turn sends it again, or finds the connection broken and drops it

    def _apply_cancel(self, conn: psycopg.Connection) -> None:
        """Bring ``LISTEN tenure_cancel`` on ``conn`` in line with the cancel side's wish, without
        ever waiting for the server: the statement is sent, and its answer collected by a later
        turn (the thread calling :meth:`wait` must never block on a silent server: a worker's
        ``stop`` joins it). A cancel side that starts hearing is told (its ``wait`` answers True)
        once the ``LISTEN`` is in effect, so that it reads the requests made before. Raises
        ``psycopg.Error`` when the connection is unusable (the caller drops it)."""
        pgconn = conn.pgconn
        if self._cancel_sent is not None:
            pgconn.flush()
            pgconn.consume_input()
            while not pgconn.is_busy():
                res = pgconn.get_result()
                if res is None:  # the statement's answer is complete
                    self._cancel_on, self._cancel_sent = self._cancel_sent, None
                    side = self._cancel
                    if self._cancel_on and side is not None and not side.closed:
                        side.heard.set()
                    break
                if res.status != ExecStatus.COMMAND_OK:
                    raise psycopg.OperationalError(f"{UNLISTEN_CANCEL if self._cancel_on else LISTEN_CANCEL}: "
                                                   f"{(res.error_message or b'').decode(errors='replace')}")
            if self._cancel_sent is not None:
                return  # still on its way
        side = self._cancel
        want = side is not None and not side.closed
        if want != self._cancel_on:
            pgconn.send_query((LISTEN_CANCEL if want else UNLISTEN_CANCEL).encode())
            self._cancel_sent = want
            pgconn.flush()

    def _finish_cancel(self, conn: psycopg.Connection) -> None:
        """Wait for the answer of a ``LISTEN``/``UNLISTEN tenure_cancel`` still on its way, before
        another statement uses ``conn`` (:meth:`lead`, :meth:`follow`: they wait for the server
        anyway). ``close`` ends the wait (``psycopg.OperationalError``)."""
        while self._cancel_sent is not None:
            self._apply_cancel(conn)
            if self._cancel_sent is None:
                return
            if self._closed or self._rfd in _poll([conn.pgconn.socket, self._rfd], 1.0):
                if self._closed:
                    raise psycopg.OperationalError("the watcher is closing")
                self._read_pipe()
    def _on_notify(self, n: psycopg.Notify) -> None:
        if n.channel == self._channel and self._ours(n.payload):
            self._woken = True
        elif n.channel == Q.CANCEL_CHANNEL and self._ours(n.payload):
            self._cancel_heard()

    def _cancel_heard(self) -> None:
        side = self._cancel
        if side is not None:
            side.heard.set()

    def _ours(self, payload: str) -> bool:
        return payload in ("", self._schema) or payload.startswith(f"{self._schema} ")

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._cancel_on, self._cancel_sent = False, None
        self._lead_conn = None  # the server drops the waiter lock with the session
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - it is already broken
                pass

    def _drain(self) -> bool:
        """Consume every notification already received; True if one was for this store."""
        conn = self._conn
        assert conn is not None
        pgconn = conn.pgconn
        while (n := pgconn.notifies()) is not None:
            channel = n.relname.decode()
            if channel == self._channel and self._ours(n.extra.decode()):
                self._woken = True
            elif channel == Q.CANCEL_CHANNEL and self._ours(n.extra.decode()):
                self._cancel_heard()
        woken, self._woken = self._woken, False
        return woken

    def _reconnect(self, deadline: float) -> bool:
        """One reconnect attempt once the backoff allows (waiting for it at most until
        ``deadline``); True when connected."""
        delay = self._next_attempt - time.monotonic()
        if delay > 0:
            budget = min(delay, deadline - time.monotonic())
            if budget > 0 and _poll([self._rfd], budget):
                self._read_pipe()
                return False  # closing, or a nudge (the caller looks again)
            if time.monotonic() < self._next_attempt:
                return False
        try:
            self._connect()
        except psycopg.Error:
            self._backoff = min(max(self._backoff * 2, self.BACKOFF_MIN), self.BACKOFF_MAX)
            self._next_attempt = time.monotonic() + self._backoff
            return False
        self._backoff = 0.0
        self.reconnects += 1
        return True

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + max(float(timeout), 0.0)
        with self._lock:
            while not self._closed:
                conn = self._conn
                if conn is None or conn.closed or conn.pgconn.status != ConnStatus.OK:
                    self._drop()
                    if self._reconnect(deadline):
                        return True
                    if time.monotonic() >= deadline:
                        return False
                    continue
                try:
                    self._apply_cancel(conn)
                except psycopg.Error:
                    self._drop()  # lost: reconnect on the next turn
                    continue
                if self._drain():
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                try:
                    ready = _poll([conn.pgconn.socket, self._rfd], remaining)
                except (OSError, ValueError, psycopg.OperationalError):
                    self._drop()
                    continue
                if self._rfd in ready:
                    self._read_pipe()
                    continue  # closing (the loop ends), or a nudge from the cancel side
                if ready:
                    try:
                        conn.pgconn.consume_input()
                    except psycopg.OperationalError:
                        self._drop()  # lost: reconnect on the next turn
                        continue
            return False

    @contextmanager
    def _bounded(self, conn: psycopg.Connection) -> Iterator[None]:
        """The statements of the block on ``conn`` answer within the calling thread's deadline
        (:func:`~.deadline.call_deadline`, which also names the group a stopping worker cuts),
        else within ``call_s``; past it the watchdog shuts the socket down and the statement
        raises a psycopg error (the callers drop the connection and reconnect later)."""
        spec = current_deadline()
        seconds = spec.seconds if spec is not None else self._call_s
        if self._watchdog is None or seconds is None or math.isinf(seconds):
            yield
            return
        with self._watchdog.watch(conn.pgconn.socket, seconds, None if spec is None else spec.group):
            yield

    def lead(self, key: str) -> bool:
        with self._lock:
            conn = self._conn
            if self._closed or conn is None or conn.closed or conn.pgconn.status != ConnStatus.OK:
                self._listen = False  # reconnect without LISTEN: ``wait`` answers True once back
                return False
            if self._lead_conn is conn:
                return True
            digest = lead_digest(f"{self._schema}\n{key}")
            keys = (int.from_bytes(digest[:4], "big", signed=True), int.from_bytes(digest[4:], "big", signed=True))
            try:
                with self._bounded(conn):
                    self._finish_cancel(conn)
                    got = bool(conn.execute(TRY_LEAD, keys).fetchone()[0])  # type: ignore[index]
                    if got:
                        self._lead_conn, self._lead_keys = conn, keys
                    if got != self._listen:  # the waiter hears every change; the others nothing
                        conn.execute(Q.LISTEN if got else UNLISTEN)
                        self._listen = got
            except psycopg.Error:
                self._drop()  # reconnects on the next wait
                return False
            return got

    def follow(self) -> None:
        with self._lock:
            conn = self._conn
            if conn is None or conn.closed:
                self._listen = False
                return
            try:
                with self._bounded(conn):
                    self._finish_cancel(conn)
                    if self._lead_conn is conn and self._lead_keys is not None:
                        conn.execute(UNLEAD, self._lead_keys)
                    if self._listen:
                        conn.execute(UNLISTEN)
            except psycopg.Error:
                self._drop()
            self._lead_conn = None
            self._listen = False

    def cancel_listener(self) -> _CancelSide | None:
        """A watcher woken by cancel requests for this store, heard on this watcher's own
        connection (``LISTEN tenure_cancel`` while it is open), or None for a watcher of another
        channel or a closed one. Its ``wait`` answers True once the ``LISTEN`` is in effect
        (also after a reconnect: requests made meanwhile were not heard), and on each request.
        It hears only while some thread calls this watcher's :meth:`wait`; its ``close`` stops
        the listening. One at a time: a second call answers the same handle while it is open."""
        if self._channel != Q.CHANNEL or self._closed:
            return None
        side = self._cancel
        if side is None or side.closed:
            side = self._cancel = _CancelSide(self)
            if self._cancel_on:
                side.heard.set()  # already listening: it may read the requests made before now
        self._nudge()
        return side

    def _nudge(self) -> None:
        """Interrupt a wait in progress so that it applies the cancel side's wish now."""
        with self._pipe_lock:
            if self._closed:
                return  # its pipe may be closed, and the numbers reused by other files
            try:
                os.write(self._wfd, b"n")
            except OSError:
                pass  # the pipe full of nudges already

    def _read_pipe(self) -> None:
        try:
            os.read(self._rfd, 4096)
        except OSError:
            pass

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            os.write(self._wfd, b"x")
        except OSError:
            pass
        with self._lock, self._pipe_lock:
            self._drop()
            for fd in (self._rfd, self._wfd):
                try:
                    os.close(fd)
                except OSError:
                    pass


def _poll(fds: list[int], timeout: float) -> set[int]:
    """The fds readable (or hung up) within ``timeout`` seconds. poll(), not select(): a process
    with more than 1024 open files still works."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP)
    return {fd for fd, _ in poller.poll(max(math.ceil(timeout * 1000), 0))}


class _CancelSide(Watcher):
    """The cancel requests heard on a :class:`PostgresWatcher`'s connection
    (:meth:`PostgresWatcher.cancel_listener`)."""

    def __init__(self, owner: PostgresWatcher) -> None:
        self._owner = owner
        self.heard = threading.Event()
        self.closed = False

    def wait(self, timeout: float) -> bool:
        if self.heard.wait(max(float(timeout), 0.0)):
            self.heard.clear()
            return True
        return False

    def close(self) -> None:
        """Stop listening (the owner's next wait turn runs ``UNLISTEN tenure_cancel``)."""
        if not self.closed:
            self.closed = True
            self._owner._nudge()
