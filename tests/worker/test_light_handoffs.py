"""At a light pace on SQLite a job crosses two worker threads, not four (docs/performance.md,
"2026-12-04 evening: SQLite drain and light load"): the watch thread that hears a change claims
for it itself instead of waking the dispatcher (``Producer._heard``), and the slot thread that
ran a lone attempt settles it itself instead of waking the settler (``Completer._to_settle``).
Counted by the worker's milestones (``watch_claims``, ``inline_settles``, ``settle_batches``,
``turns``), never timed. Jobs come from a second store on the same file, so the worker's own
store never wakes it: every claim below was heard by its watcher. Every worker polls once an
hour, and each test checks that none polled."""

from __future__ import annotations

import threading

import tenure

from ..conftest import sqlite_url
from ._wk import Outcomes, wait_for

HOUR = 3600.0


def _pair(tmp_path):
    url = sqlite_url(tmp_path)
    return tenure.connect(url), tenure.connect(url)


def test_a_heard_job_is_claimed_by_the_watch_thread_and_settled_by_its_slot(tmp_path):
    """Ten jobs, one at a time: each is claimed on the watch thread (the dispatcher takes no turn
    for it; before, each took one or more) and settled by the slot thread that ran it (the
    settler thread settles none). The dispatcher's own start-up turns (its first claim, and the
    new waiter's catch-up claim) may land after the snapshot: at most two."""
    store, other = _pair(tmp_path)
    ran: list[str] = []
    w = store.jobs.create_worker({"noop": lambda payload, ctx: ran.append(threading.current_thread().name)},
                                 concurrency=4, poll_interval=HOUR)
    n = 10
    try:
        w.start()
        wait_for(lambda: w._leading, timeout=10, what="the worker's watcher leading")
        ev = w.events
        assert ev.wait("idle", 1, timeout=10)
        turns = ev.count("turns")
        for i in range(n):
            job = other.jobs.enqueue("noop", i)
            wait_for(lambda job=job: other.jobs.get(job).state == "done", timeout=10, what=f"job {i} done")
            wait_for(lambda i=i: w.stats()["completions"] == i + 1, timeout=10, what="its completion counted")
        assert ev.count("turns") - turns <= 2  # the dispatcher was not handed the claims
        assert ev.count("watch_claims") >= n - 2
        assert ev.count("inline_settles") == n
        assert ev.count("settle_batches") == n  # each of them, none by the settler thread
        assert all(name.startswith("tenure-slot") for name in ran)
        assert w.stats()["polls"] == 0 and w.stats()["claims"] == n
    finally:
        w.stop(grace=2)
        store.close()
        other.close()


def test_attempts_running_together_still_settle_through_the_settler(tmp_path):
    """Two attempts in flight: the first to finish is not alone, so it goes to the settler thread
    (which batches); only a lone attempt is settled by its own slot thread."""
    store, other = _pair(tmp_path)
    gate = threading.Event()
    started = threading.Semaphore(0)

    def held(payload, ctx):
        started.release()
        if payload == "first":
            assert gate.wait(10)
        else:
            gate.set()  # the first finishes only once this one is running

    w = store.jobs.create_worker({"held": held}, concurrency=2, poll_interval=HOUR)
    try:
        w.start()
        wait_for(lambda: w._leading, timeout=10, what="the worker's watcher leading")
        first = other.jobs.enqueue("held", "first")
        assert started.acquire(timeout=10)
        second = other.jobs.enqueue("held", "second")
        wait_for(lambda: all(other.jobs.get(j).state == "done" for j in (first, second)), timeout=10,
                 what="both done")
        wait_for(lambda: w.stats()["completions"] == 2, timeout=10, what="both counted")
        assert w.events.count("settle_batches") - w.events.count("inline_settles") >= 1  # on the settler
        assert w.events.count("settle_batches") <= 2
        assert w.stats()["polls"] == 0
    finally:
        w.stop(grace=2)
        store.close()
        other.close()


def test_an_observer_keeps_settlements_on_the_settler(tmp_path):
    """An ``on_outcome`` observer may stop its own worker from the settling thread (stop() knows
    the settler threads): a lone attempt then still goes to the settler, and stop() from inside
    the observer returns."""
    store, other = _pair(tmp_path)
    seen = Outcomes()
    stopped: list[object] = []

    def observer(event):
        seen({**event, "thread": threading.current_thread().name})
        stopped.append(w.stop(grace=0))

    w = store.jobs.create_worker({"noop": lambda payload, ctx: None}, concurrency=2, poll_interval=HOUR,
                                 on_outcome=observer)
    try:
        w.start()
        wait_for(lambda: w._leading, timeout=10, what="the worker's watcher leading")
        other.jobs.enqueue("noop", 1)
        (event,) = seen.wait(1)
        assert event["thread"].startswith("tenure-settle")
        assert w.events.count("inline_settles") == 0
        wait_for(lambda: stopped, timeout=10, what="stop() from the observer returned")
    finally:
        w.stop(grace=2)
        store.close()
        other.close()


def test_stop_after_lone_settlements_leaves_nothing_running(tmp_path):
    """stop() takes the settle token after the settler ends: once it returns, a slot thread that
    settled a lone attempt has let go of it, and a restarted worker settles lone attempts again
    with a fresh token."""
    store, other = _pair(tmp_path)
    w = store.jobs.create_worker({"noop": lambda payload, ctx: None}, concurrency=2, poll_interval=HOUR)
    try:
        for run in range(2):
            w.start()
            wait_for(lambda: w._leading, timeout=10, what="the worker's watcher leading")
            job = other.jobs.enqueue("noop", run)
            wait_for(lambda job=job: other.jobs.get(job).state == "done", timeout=10, what="done")
            wait_for(lambda run=run: w.stats()["completions"] == run + 1, timeout=10, what="counted")
            assert w.stop(grace=2).drained
            assert not w._settle_token.acquire(blocking=False)  # held by stop() for good
        assert w.events.count("inline_settles") == 2
    finally:
        w.stop(grace=2)
        store.close()
        other.close()
