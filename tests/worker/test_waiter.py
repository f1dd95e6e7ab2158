"""Wake one worker, not all: of the workers of one store that claim the same kinds from the same
queues, only the waiter hears a job enqueued elsewhere; the others claim on their own poll. The
waiter's lock dies with its process (kill -9), and a waiter whose slots stay full steps down:
either way another worker takes over within a bounded time. Both engines, real processes.

Every worker here polls once an hour, so a job that reaches one of them within the test's
timeouts was heard through the waiter, never through a poll."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback

import pytest

import tenure
from tenure.worker.producer import TAKEOVER_S

from ._wk import wait_for

HOUR = 3600.0

CHILD = textwrap.dedent("""
    import sys, threading, time
    import tenure

    store = tenure.connect(sys.argv[1])
    worker = store.jobs.create_worker({"noop": lambda payload, ctx: None}, poll_interval=3600.0)
    worker.start()
    deadline = time.monotonic() + 60
    while not worker._leading and time.monotonic() < deadline:
        time.sleep(0.01)
    print("leading" if worker._leading else "not leading", flush=True)
    threading.Event().wait()
""")


def _worker(store, ran: list, name: str, handler=None, **kw):
    def noop(payload, ctx):
        ran.append((name, ctx.job.id))

    return store.jobs.create_worker({"noop": handler or noop}, poll_interval=HOUR, **kw)


def _state(w) -> str:
    """What a worker's waiter election looked like (for a failure message): its slot accounting
    as ``_has_room`` reads it, its watcher's lock state, and where its watch thread stands."""
    watcher_state = {}
    thread = w._watch_thread
    frame = None if thread is None else sys._current_frames().get(thread.ident)
    if frame is not None:  # the watcher object is a local of the watch thread's _watch frame
        f = frame
        while f is not None and f.f_code.co_name != "_watch":
            f = f.f_back
        watcher = None if f is None else f.f_locals.get("watcher")
        watcher_state = {k: getattr(watcher, k, None) for k in ("_leading", "_following", "_lead_fd", "_sock")}
        if f is not None:  # the watch loop's own view: its leading, since when full, next lead try
            watcher_state.update({k: f.f_locals.get(k) for k in ("leading", "full_since", "next_try", "room")})
            watcher_state["now"] = time.monotonic()
        fd = watcher_state.get("_lead_fd")
        if isinstance(fd, int):  # still the waiter file? (a raw fd closed elsewhere and reused is not)
            try:
                watcher_state["lead_file"] = os.readlink(f"/proc/self/fd/{fd}")
            except OSError as exc:
                watcher_state["lead_file"] = repr(exc)
    stack = "".join(traceback.format_stack(frame, limit=4)) if frame is not None else "no watch thread"
    return (f"claims={w._stats['claims']} has_room={w._has_room()} reserved={w._reserved} credit={w._credit} "
            f"attempts={len(w._attempts)} quarantine={w._quarantine} leading={w._leading} "
            f"lead_tries={w._lead_tries} watcher={watcher_state} "
            f"alive={thread is not None and thread.is_alive()}\n  watch thread at:\n{stack}")


def _pair(engine_url):
    return tenure.connect(engine_url), tenure.connect(engine_url), tenure.connect(engine_url)


def test_a_job_enqueued_elsewhere_wakes_the_waiter_only(engine_url):
    a, b, producer = _pair(engine_url)
    ran: list = []
    # Room to spare: a waiter whose slots stay full would hand over (the last test), by design.
    wa, wb = _worker(a, ran, "a", concurrency=8), _worker(b, ran, "b", concurrency=8)
    try:
        wa.start()
        wb.start()
        # Each watch thread has asked to wait once (the one refused stops listening then).
        wait_for(lambda: wa._lead_tries and wb._lead_tries, what="both workers' first lead")
        waiter = wait_for(lambda: (wa if wa._leading else wb if wb._leading else None), what="a waiter")
        other = wb if waiter is wa else wa
        assert waiter.events.wait("idle", 1, timeout=10) and other.events.wait("idle", 1, timeout=10)
        turns_before, wakes_before = other.events.count("turns"), other.stats()["wakes"]
        for _ in range(5):
            job = producer.jobs.enqueue("noop")
            wait_for(lambda job=job: producer.jobs.get(job).state == "done", what="the job done")
        assert {name for name, _ in ran} == {"a" if waiter is wa else "b"}, (
            ran, waiter.stats(), other.stats(), waiter._lead_tries, other._lead_tries)
        # The other worker never claimed: no wake reached it, so it made no turn at all.
        assert other.events.count("turns") == turns_before
        assert other.stats()["wakes"] == wakes_before and not other._leading
    finally:
        for w in (wa, wb):
            w.stop(grace=2)
        for s in (a, b, producer):
            s.close()


def test_workers_of_other_kinds_each_hear_their_jobs(engine_url):
    """The waiter is per kinds and queues: a worker of other kinds is never left unwoken."""
    a, b, producer = _pair(engine_url)
    ran: list = []
    wa = _worker(a, ran, "a", concurrency=8)
    wb = b.jobs.create_worker({"other": lambda payload, ctx: ran.append(("b", ctx.job.id))}, poll_interval=HOUR)
    try:
        wa.start()
        wb.start()
        wait_for(lambda: wa._leading and wb._leading, what="both workers waiting (two keys)")
        j1, j2 = producer.jobs.enqueue("noop"), producer.jobs.enqueue("other")
        wait_for(lambda: len(ran) == 2, what="both jobs run")
        assert sorted(ran) == sorted([("a", j1), ("b", j2)])
    finally:
        for w in (wa, wb):
            w.stop(grace=2)
        for s in (a, b, producer):
            s.close()


def test_a_waiter_killed_hard_is_replaced(engine_url, tmp_path):
    (tmp_path / "waiter_child.py").write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.Popen([sys.executable, str(tmp_path / "waiter_child.py"), engine_url],
                             stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    b, producer = tenure.connect(engine_url), tenure.connect(engine_url)
    ran: list = []
    wb = _worker(b, ran, "b")
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "leading"
        wb.start()
        assert wb.events.wait("idle", 1, timeout=10)
        wait_for(lambda: wb._lead_tries, what="b's first lead")
        assert not wb._leading  # the child waits
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        job = producer.jobs.enqueue("noop")
        # Heard by b once it took the waiter lock over (it polls once an hour).
        wait_for(lambda: ("b", job) in ran, timeout=30, what="the job run by the surviving worker")
        assert wb._leading
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        wb.stop(grace=2)
        b.close()
        producer.close()


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_waiter_with_full_slots_steps_down(engine_url, concurrency):
    a, b, producer = _pair(engine_url)
    ran: list = []
    release = threading.Event()

    def blocking(payload, ctx):
        ran.append(("a", ctx.job.id))
        release.wait(30)

    wa = _worker(a, ran, "a", handler=blocking, concurrency=concurrency)
    wb = _worker(b, ran, "b")
    try:
        wa.start()
        wait_for(lambda: wa._leading, what="a waiting")
        wb.start()
        assert wb.events.wait("idle", 1, timeout=10)
        wait_for(lambda: wb._lead_tries, what="b's first lead (refused: a waits)")
        for _ in range(concurrency):  # a's slots fill up
            producer.jobs.enqueue("noop")
        wait_for(lambda: len(ran) == concurrency, what="a's slots full")
        # Every job so far ran on a: had b claimed one, a would have room and rightly keep waiting.
        assert all(name == "a" for name, _ in ran), (ran, _state(wa), _state(wb))
        # a steps down; b, with room, takes the waiter lock and hears the next job.
        try:
            wait_for(lambda: wb._leading, timeout=30, what="b waiting in a's place")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\na: {_state(wa)}\nb: {_state(wb)}") from None
        job = producer.jobs.enqueue("noop")
        wait_for(lambda: ("b", job) in ran, timeout=30, what="the next job run by b")
    finally:
        release.set()
        for w in (wa, wb):
            w.stop(grace=2)
        for s in (a, b, producer):
            s.close()


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_waiter_whose_claim_is_slow_keeps_waiting(engine_url, concurrency):
    """A slot reserved for a claim in progress is not a full slot: a waiter whose claims take longer
    than TAKEOVER_S (behind another writer's lock, on a loaded server) keeps waiting and runs what it
    claims. It stepped down mid-claim, b took the waiter lock over and, woken to claim what came,
    raced a for the jobs a was claiming and took them (the premise check of
    test_a_waiter_with_full_slots_steps_down fails that way: a job of a's ran on b)."""
    a, b, producer = _pair(engine_url)
    ran: list = []
    release = threading.Event()

    def blocking(payload, ctx):
        ran.append(("a", ctx.job.id))
        release.wait(30)

    slow = threading.Event()
    claim_many = a._jobs.claim_many

    def slow_claim_many(*args, **kwargs):
        if slow.is_set():
            time.sleep(5 * TAKEOVER_S)  # the claim waits (a lock, the network) before it runs
        return claim_many(*args, **kwargs)

    a._jobs.claim_many = slow_claim_many
    wa = _worker(a, ran, "a", handler=blocking, concurrency=concurrency)
    wb = _worker(b, ran, "b")
    try:
        wa.start()
        wait_for(lambda: wa._leading, what="a waiting")
        wb.start()
        assert wb.events.wait("idle", 1, timeout=10)
        wait_for(lambda: wb._lead_tries, what="b's first lead (refused: a waits)")
        slow.set()
        for _ in range(concurrency):
            producer.jobs.enqueue("noop")
        wait_for(lambda: len(ran) == concurrency, timeout=30, what="the jobs to run")
        assert all(name == "a" for name, _ in ran), (ran, _state(wa), _state(wb))
        assert wb.stats()["claims"] == 0
    finally:
        release.set()
        for w in (wa, wb):
            w.stop(grace=2)
        for s in (a, b, producer):
            s.close()
