"""The SQLite cross-process wake (engine/sqlite/watch.py): a loud commit pokes the waiter's socket,
named in its waiter file; the waiter's ``data_version`` poll backs off while pokes announce the
changes, but never beyond its bound, so a commit that poked nobody (an outbox ``conn=``, a lost
poke, a closed socket, a stale waiter file) is still seen. SQLite only: PostgreSQL has LISTEN."""

from __future__ import annotations

import errno
import os
import select
import socket
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import tenure
from tenure.engine.sqlite import watch
from tenure.engine.waiter import lead_digest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pokes need Linux's abstract sockets")

KEY = "tenure.waiter\nnoop\n*"


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path}/wake.db"


def _waiter_file(store) -> str:
    return f"{store.engine.path}-waiter-{lead_digest(KEY).hex()}"


@contextmanager
def _leading(url: str, **engine: float) -> Iterator[tuple]:
    """Two stores ``a`` and ``b`` on one database and a watcher of ``a``'s (its engine set with
    ``engine`` first: ``watch_interval``...) leading :data:`KEY` with its socket bound: yields
    ``(a, b, watcher)``; the watcher is closed after the block."""
    with tenure.connect(url) as a, tenure.connect(url) as b:
        a.jobs.counts()
        for name, value in engine.items():
            setattr(a.engine, name, value)
        w = a.engine.watcher()
        try:
            assert w.lead(KEY) and w._sock is not None
            yield a, b, w
        finally:
            w.close()


def _back_off(w, seconds: float) -> None:
    """Let the waiter poll an unchanged database for ``seconds`` (its gap grows)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert not w.wait(0.05)


def test_an_enqueue_elsewhere_pokes_the_waiter_socket_named_in_its_file(url):
    with _leading(url) as (a, b, w):
        with open(_waiter_file(a), "rb") as f:
            record = f.read()
        assert record.startswith(watch.MAGIC)
        assert bytes.fromhex(record[len(watch.MAGIC):-1].decode()) == w._sock.getsockname()
        assert not w.wait(0.01)
        b.jobs.enqueue("noop")
        # The poke itself, read off the socket: not the poll seeing data_version move.
        assert select.select([w._sock], [], [], 10)[0]
        assert w.wait(10) and w.pokes >= 1


def test_a_commit_that_pokes_nobody_is_seen_within_the_bound(url):
    """Fails without the bound: a gap that kept doubling from 20 ms would be 1.28 s after 1.5 s of
    quiet, so the outbox commit (no poke) would go unseen for the half second waited here."""
    with _leading(url, watch_interval=0.02, watch_idle_bound=0.04) as (a, b, w):
        _back_off(w, 1.5)
        assert w._gap <= 0.04
        raw = sqlite3.connect(a.engine.path)
        try:
            b.jobs.enqueue("noop", conn=raw)  # the outbox: the application commits, nobody pokes
            raw.commit()
        finally:
            raw.close()
        assert w.wait(0.5)
        assert w.pokes == 0


def test_a_poke_for_a_commit_the_poll_already_woke_for_wakes_nobody(url):
    """The writer pokes just after it commits, so the poll can see the commit first and wake for
    it; the poke that arrives then is old news. It woke the waiter a second time, for an empty
    claim (test_light_claims saw one under load)."""
    with _leading(url, watch_interval=0.02, watch_idle_bound=0.04) as (a, b, w):
        raw = sqlite3.connect(a.engine.path)
        try:
            b.jobs.enqueue("noop", conn=raw)  # committed, not poked (yet)
            raw.commit()
        finally:
            raw.close()
        assert w.wait(10) and w.pokes == 0  # the poll saw it
        late = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            late.sendto(b"!", w._sock.getsockname())  # the writer's poke, arriving now
        finally:
            late.close()
        assert not w.wait(0.3)
        assert w.pokes == 1  # read, and judged old news
        b.jobs.enqueue("noop")  # a new commit and its poke still wake it
        assert w.wait(10)


def test_a_lost_poke_is_made_up_by_the_poll(url):
    with _leading(url) as (_, b, w):
        _back_off(w, 0.3)
        b.jobs.enqueue("noop")
        assert select.select([w._sock], [], [], 10)[0]
        w._sock.recv(64)  # the poke is lost
        assert w.wait(10) and w.pokes == 0


def test_a_closed_socket_falls_back_to_the_fast_poll(url):
    with _leading(url) as (a, b, w):
        _back_off(w, 0.3)
        w._sock.close()  # gone under the waiter
        b.jobs.enqueue("noop")  # the poke fails: the enqueue does not
        assert w.wait(10)
        assert w._sock is None and w._gap == w._interval
        with open(_waiter_file(a), "rb") as f:
            assert f.read() == b""  # no stale address left for the pokers


def test_stale_and_torn_waiter_files_never_fail_an_enqueue(url, tmp_path):
    with tenure.connect(url) as a, tenure.connect(url) as b:
        a.jobs.counts()
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        dead.bind(b"\0tenure-wake-test-" + os.urandom(4).hex().encode())
        address = dead.getsockname()
        dead.close()  # a waiter killed with SIGKILL leaves its address behind
        path = a.engine.path
        with open(f"{path}-waiter-{'0' * 16}", "wb") as f:
            f.write(watch.MAGIC + address.hex().encode() + b"\n")
        with open(f"{path}-waiter-{'1' * 16}", "wb") as f:
            f.write(watch.MAGIC + b"zz")  # torn
        w = a.engine.watcher()
        try:
            assert w.lead(KEY)
            assert not w.wait(0.01)
            for _ in range(3):
                b.jobs.enqueue("noop")
            assert select.select([w._sock], [], [], 10)[0]  # the live waiter is still poked
            assert w.wait(10)
            assert b.jobs.counts().get("pending") == 3
        finally:
            w.close()


def test_the_waiter_file_names_a_socket_only_while_its_watcher_leads(url):
    with tenure.connect(url) as a, tenure.connect(url) as b:
        a.jobs.counts()
        w1, w2 = a.engine.watcher(), b.engine.watcher()
        try:
            assert w1.lead(KEY) and not w2.lead(KEY)
            first = w1._sock.getsockname()
            w1.follow()
            with open(_waiter_file(a), "rb") as f:
                assert f.read() == b""
            assert w1._sock is None
            assert w2.lead(KEY)
            with open(_waiter_file(a), "rb") as f:
                record = f.read()
            assert bytes.fromhex(record[len(watch.MAGIC):-1].decode()) == w2._sock.getsockname() != first
            w2.close()  # closing the waiter empties its file too
            with open(_waiter_file(a), "rb") as f:
                assert f.read() == b""
        finally:
            w1.close()
            w2.close()


def test_a_watcher_that_cannot_listen_keeps_the_fast_poll(url, monkeypatch):
    monkeypatch.setattr(watch, "_wake_socket", lambda: None)
    with tenure.connect(url) as a:
        a.jobs.counts()
        w = a.engine.watcher()
        try:
            assert w.lead(KEY) and w._sock is None
            _back_off(w, 0.2)
            assert w._gap == w._interval
        finally:
            w.close()


def test_pokes_follow_a_new_waiter_of_the_same_file(url, monkeypatch):
    """A poke that fails (the waiter stepped down) makes the poker re-read the waiter files it
    knows (no directory listing) on its next commit: the new waiter is poked."""
    monkeypatch.setattr(watch, "RETRY_S", 0.0)
    with tenure.connect(url) as a, tenure.connect(url) as b:
        a.jobs.counts()
        w1, w2 = a.engine.watcher(), a.engine.watcher()
        try:
            assert w1.lead(KEY) and not w2.lead(KEY)
            b.jobs.enqueue("noop")  # the poker reads w1's address
            assert select.select([w1._sock], [], [], 10)[0]
            w1.follow()
            assert w2.lead(KEY)
            b.jobs.enqueue("noop")  # to w1's closed socket: refused, read again
            b.jobs.enqueue("noop")
            assert select.select([w2._sock], [], [], 10)[0]
            assert b.engine._poker is not None and b.engine._poker._addresses == (w2._sock.getsockname(),)
        finally:
            w1.close()
            w2.close()


def test_a_lock_try_that_fails_for_another_reason_than_contention_is_retried_on_a_new_descriptor(
        url, monkeypatch):
    """A waiter file descriptor gone dead (EBADF) was taken for "held by another watcher" on every
    later try: the watcher never led again, whoever else stepped down."""
    with tenure.connect(url) as a, tenure.connect(url) as b:
        a.jobs.counts()
        w1, w2 = a.engine.watcher(), b.engine.watcher()
        real_flock = watch.fcntl.flock
        dead = -1
        try:
            assert w1.lead(KEY) and not w2.lead(KEY)
            dead = w2._lead_fd

            def flock(fd, op):
                if fd == dead:
                    raise OSError(errno.EBADF, "Bad file descriptor")
                return real_flock(fd, op)

            monkeypatch.setattr(watch.fcntl, "flock", flock)
            assert not w2.lead(KEY)  # a waits still
            w1.follow()
            assert w2.lead(KEY) and w2._lead_fd != dead
            assert not w1.lead(KEY)
        finally:
            monkeypatch.undo()
            if dead >= 0 and w2._lead_fd != dead:
                os.close(dead)  # really open (only its lock calls failed), and no longer w2's
            w1.close()
            w2.close()
