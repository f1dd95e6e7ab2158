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


def _cancel_listeners() -> int:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND query = 'LISTEN tenure_cancel'").fetchone()
    return int(row[0]) if row else 0


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
            wait_for(lambda: _cancel_listeners() == 1, what="the worker listening while its attempt runs")
            assert store.jobs.request_cancel(job) == "requested"
            wait_for(lambda job=job: store.jobs.get(job).state == "cancelled", what="the job cancelled")
            wait_for(lambda: _cancel_listeners() == 0, what="the idle worker to stop listening")
        assert worker.stats()["cancellations"] == 2
    finally:
        worker.stop(grace=2)
        store.close()
