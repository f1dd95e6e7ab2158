"""PostgreSQL: a worker listens for cancel requests only while it has attempts in flight (and for
``LISTEN_IDLE_S`` after). Every NOTIFY wakes every listening backend of the database whatever its
channel, each running a transaction to read the queue, so an idle worker's ``LISTEN tenure_cancel``
cost the server a wake-up and a commit on every enqueue. A request still reaches the holder of a
running job at once, the first after an idle spell included."""

from __future__ import annotations

import threading

import psycopg

import tenure
from tenure.worker import cancel_watch
from tests.conftest import PG_URL, empty_pg, require_pg

from ._wk import wait_for


def _cancel_listeners(store) -> int:
    """The store's connections with ``LISTEN tenure_cancel`` in effect: a cancel watcher of its
    own, or the worker's watcher of new jobs hearing cancel requests too."""
    return sum(1 for w in list(store.engine._watchers)
               if not w._closed and w._conn is not None
               and (w._channel == "tenure_cancel" or getattr(w, "_cancel_on", False)))


def test_an_idle_worker_stops_listening_and_a_running_job_is_still_cancelled_at_once(monkeypatch):
    require_pg()
    empty_pg()
    monkeypatch.setattr(cancel_watch, "LISTEN_IDLE_S", 0.2)
    # No backstop poll within the test: each cancel below is heard through the listener.
    monkeypatch.setattr(cancel_watch, "POLL_NOTIFIED_S", 3600.0)
    store = tenure.connect(PG_URL)
    started = threading.Event()

    def handler(payload, ctx):
        started.set()
        ctx.cancelled.wait(30)

    worker = store.jobs.create_worker({"k": handler}, poll_interval=0.05)
    try:
        worker.start()
        for _ in range(2):  # the second after an idle spell with no listener
            started.clear()
            job = store.jobs.enqueue("k")
            assert started.wait(10)
            wait_for(lambda: _cancel_listeners(store) == 1, what="the worker listening while its attempt runs")
            assert store.jobs.request_cancel(job) == "requested"
            wait_for(lambda job=job: store.jobs.get(job).state == "cancelled", what="the job cancelled")
            wait_for(lambda: _cancel_listeners(store) == 0, what="the idle worker to stop listening")
        assert worker.stats()["cancellations"] == 2
    finally:
        worker.stop(grace=2)
        store.close()


def _open_listeners(store) -> int:
    """The dedicated (never pooled) LISTEN connections this store has open."""
    return sum(1 for w in list(store.engine._watchers) if not w._closed and w._conn is not None)


def test_a_busy_worker_hears_new_jobs_and_cancel_requests_on_one_connection(monkeypatch):
    """One listening server process per worker, not two: a worker running jobs heard cancel
    requests on a connection of its own beside its watcher of new jobs, and every NOTIFY (each
    enqueue's) woke both server processes, a transaction each (docs/performance.md, 2026-12-04
    evening). The request still reaches the running job through the notification."""
    require_pg()
    empty_pg()
    monkeypatch.setattr(cancel_watch, "POLL_NOTIFIED_S", 3600.0)  # heard, never polled
    store = tenure.connect(PG_URL)
    started = threading.Event()

    def handler(payload, ctx):
        started.set()
        ctx.cancelled.wait(30)

    worker = store.jobs.create_worker({"k": handler}, poll_interval=3600)
    try:
        worker.start()
        wait_for(lambda: worker._leading, what="the worker to become the waiter")
        job = store.jobs.enqueue("k")
        assert started.wait(10)
        wait_for(lambda: _cancel_listeners(store) == 1, what="the worker listening while its attempt runs")
        assert _open_listeners(store) == 1
        assert store.jobs.request_cancel(job) == "requested"
        wait_for(lambda: store.jobs.get(job).state == "cancelled", what="the job cancelled")
        started.clear()
        second = store.jobs.enqueue("k")  # new jobs are still heard on that connection
        assert started.wait(10)
        assert _open_listeners(store) == 1
        assert store.jobs.request_cancel(second) == "requested"
        wait_for(lambda: store.jobs.get(second).state == "cancelled", what="the second job cancelled")
    finally:
        worker.stop(grace=2)
        store.close()


def test_cancel_requests_are_heard_again_after_the_shared_connection_is_lost(monkeypatch):
    """The watcher's reconnect listens for cancel requests again (and the running jobs' flags are
    read once: a request made while it was away was not heard)."""
    require_pg()
    empty_pg()
    monkeypatch.setattr(cancel_watch, "POLL_NOTIFIED_S", 3600.0)
    store = tenure.connect(PG_URL)
    started = threading.Event()

    def handler(payload, ctx):
        started.set()
        ctx.cancelled.wait(30)

    worker = store.jobs.create_worker({"k": handler}, poll_interval=3600)
    try:
        worker.start()
        job = store.jobs.enqueue("k")
        assert started.wait(10)
        wait_for(lambda: _cancel_listeners(store) == 1, what="the worker listening while its attempt runs")
        watcher = worker._watcher
        before = watcher.reconnects
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (watcher._conn.info.backend_pid,))
            wait_for(lambda: watcher.reconnects > before, what="the watcher to reconnect")
        assert store.jobs.request_cancel(job) == "requested"
        wait_for(lambda: store.jobs.get(job).state == "cancelled", what="the job cancelled")
        assert _open_listeners(store) == 1
    finally:
        worker.stop(grace=2)
        store.close()
