"""The client-side deadline watchdog (tenure/engine/postgres/deadline.py), on plain sockets: a call
blocked on a read past its deadline is cut (its read returns at once), a call that answers in time
is left alone, a group is cut on demand, and the thread-local deadline nests."""

from __future__ import annotations

import math
import socket
import threading
import time

import pytest

pytest.importorskip("psycopg")

from tenure.engine.postgres.deadline import Watchdog, call_deadline, current


def blocked_read(sock: socket.socket, out: list) -> threading.Thread:
    def run() -> None:
        t0 = time.monotonic()
        try:
            data = sock.recv(16)
        except OSError as exc:  # pragma: no cover - some platforms raise instead of EOF
            data = exc
        out.append((data, time.monotonic() - t0))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_read_past_its_deadline_is_cut_and_one_in_time_is_not():
    dog = Watchdog()
    a, b = socket.socketpair()
    try:
        out: list = []
        with dog.watch(a.fileno(), 0.2) as call:
            reader = blocked_read(a, out)
            reader.join(5)
        assert not reader.is_alive(), "the silent read was never cut"
        data, took = out[0]
        assert data in (b"",) or isinstance(data, OSError)
        assert 0.15 <= took < 2.0 and call.fired and "within 0.2 s" in call.reason
        assert dog.fired == 1
        c, d = socket.socketpair()
        try:
            with dog.watch(c.fileno(), 0.5) as quick:
                d.sendall(b"x")
                assert c.recv(1) == b"x"
            time.sleep(0.7)  # past its deadline, but the call is over: nothing is cut
            assert not quick.fired and dog.fired == 1
            d.sendall(b"y")
            assert c.recv(1) == b"y"  # the connection still works
        finally:
            c.close()
            d.close()
    finally:
        dog.close()
        a.close()
        b.close()


def test_interrupt_cuts_only_the_calls_of_its_group_at_once():
    dog = Watchdog()
    pairs = [socket.socketpair() for _ in range(2)]
    group, other = object(), object()
    try:
        out_mine: list = []
        out_theirs: list = []
        with dog.watch(pairs[0][0].fileno(), 60, group), dog.watch(pairs[1][0].fileno(), 60, other) as theirs:
            mine = blocked_read(pairs[0][0], out_mine)
            blocked_read(pairs[1][0], out_theirs)
            time.sleep(0.05)
            t0 = time.monotonic()
            assert dog.interrupt(group) == 1
            mine.join(5)
            assert not mine.is_alive() and time.monotonic() - t0 < 1.0
            assert not theirs.fired and out_theirs == []
            assert dog.interrupt(None) == 0  # no group: nothing
            pairs[1][1].sendall(b"z")
        deadline = time.monotonic() + 5
        while not out_theirs and time.monotonic() < deadline:
            time.sleep(0.01)
        assert out_theirs[0][0] == b"z"
    finally:
        dog.close()
        for x, y in pairs:
            x.close()
            y.close()


def test_the_thread_local_deadline_nests_and_none_means_unbounded():
    assert current() is None
    with call_deadline(3, "g"):
        assert (current().seconds, current().group) == (3.0, "g")
        with call_deadline(None):
            assert current().seconds == math.inf
        assert current().seconds == 3.0
        seen = []
        t = threading.Thread(target=lambda: seen.append(current()))
        t.start()
        t.join()
        assert seen == [None]  # per thread
    assert current() is None


def test_calls_after_an_idle_spell_do_not_wake_the_thread():
    """The thread sleeps, with no call in flight, only as long as the shortest watch it has seen
    (at least IDLE_WAKE_S): a later call watched as long ends after that wake-up, so registering it
    needs no thread hop. Sleeping until told, it was woken by every first call after an idle
    spell: an idle worker's claim and its settlement, each a thread switch per job."""
    dog = Watchdog()
    notified: list[int] = []
    real_notify = dog._cond.notify

    def notify(n: int = 1) -> None:
        notified.append(n)
        real_notify(n)

    dog._cond.notify = notify  # type: ignore[method-assign]
    try:
        with dog.watch(-1, 30.0):
            pass  # starts the thread
        deadline = time.monotonic() + 5
        while dog._wake_at == 0.0 and time.monotonic() < deadline:
            time.sleep(0.001)  # the thread has looked at its calls and gone to sleep
        before = len(notified)
        for _ in range(20):
            with dog.watch(-1, 30.0):
                pass
        assert len(notified) == before  # no hop: each ends after the thread's next wake-up
        with dog.watch(-1, 0.5):
            pass  # a shorter one than the idle sleep still tells the thread
        assert len(notified) == before + 1
    finally:
        dog.close()
