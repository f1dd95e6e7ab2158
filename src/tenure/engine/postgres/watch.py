"""Wake-ups across processes on PostgreSQL: ``LISTEN tenure_jobs`` (and the cancel channel) on a
dedicated connection that reconnects by itself; the waiter lock (:meth:`LeadingWatcher.lead`) is a
session advisory lock on that same connection."""

from __future__ import annotations

import math
import os
import select
import threading
import time
from typing import Any

import psycopg
from psycopg.pq import ConnStatus

from ..waiter import LeadingWatcher, lead_digest
from . import queries as Q

#: The waiter lock of one key: a session advisory lock in the two-int4 key space (tenure's other
#: advisory locks take one bigint key, a space of its own), so it dies with the connection.
TRY_LEAD = "SELECT pg_try_advisory_lock(%s::int, %s::int)"
UNLEAD = "SELECT pg_advisory_unlock(%s::int, %s::int)"
UNLISTEN = "UNLISTEN tenure_jobs"


class PostgresWatcher(LeadingWatcher):
    """``LISTEN tenure_jobs`` on a dedicated connection (never a pooled one: a pooled connection
    would carry the LISTEN to other users, and must not sit blocked).

    ``wait`` polls the connection's socket and a private pipe (so ``close`` from another
    thread ends a wait at once), then drains every pending notification. If the connection is
    lost it reconnects by itself with a capped exponential backoff, and answers True once it is
    back: notifications sent while it was away are lost, so the caller must poll once.
    """

    BACKOFF_MIN = 0.05
    BACKOFF_MAX = 2.0

    def __init__(self, conninfo: str, schema: str | None, connect_kwargs: dict[str, Any],
                 channel: str = Q.CHANNEL) -> None:
        #: The channel listened to: ``tenure_jobs`` (new work), or ``tenure_cancel`` (a cancel
        #: request, whose payload is "<schema> <job id>").
        self._channel = channel
        self._conninfo = conninfo
        self._schema = schema
        self._kwargs = connect_kwargs
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

    def _on_notify(self, n: psycopg.Notify) -> None:
        if n.channel == self._channel and self._ours(n.payload):
            self._woken = True

    def _ours(self, payload: str) -> bool:
        return payload in ("", self._schema) or payload.startswith(f"{self._schema} ")

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
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
            if n.relname.decode() == self._channel and self._ours(n.extra.decode()):
                self._woken = True
        woken, self._woken = self._woken, False
        return woken

    def _reconnect(self, deadline: float) -> bool:
        """One reconnect attempt once the backoff allows (waiting for it at most until
        ``deadline``); True when connected."""
        delay = self._next_attempt - time.monotonic()
        if delay > 0:
            budget = min(delay, deadline - time.monotonic())
            if budget > 0 and _poll([self._rfd], budget):
                return False  # closing
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
                    return False  # closing
                if ready:
                    try:
                        conn.pgconn.consume_input()
                    except psycopg.OperationalError:
                        self._drop()  # lost: reconnect on the next turn
                        continue
            return False

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
                if self._lead_conn is conn and self._lead_keys is not None:
                    conn.execute(UNLEAD, self._lead_keys)
                if self._listen:
                    conn.execute(UNLISTEN)
            except psycopg.Error:
                self._drop()
            self._lead_conn = None
            self._listen = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            os.write(self._wfd, b"x")
        except OSError:
            pass
        with self._lock:
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
