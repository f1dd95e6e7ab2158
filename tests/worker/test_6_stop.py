"""spec §6: stopping — grace, hostile handlers, detached attempts, quiescence,
withdrawn claims, closing the store, refused claims (rows 6.9, 6.21, 6.25, 6.26, 6.28-6.30)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

import tenure

from ._wk import Outcomes, wait_for


def _hostile(started: threading.Event, release: threading.Event):
    """A handler that ignores its cancellation until ``release`` is set."""
    def handler(payload, ctx):
        started.set()
        release.wait(30)
        return "late"
    return handler


def _snapshot(store):
    """Every job row, ordered (to show that nothing was written)."""
    rows, after = [], None
    while True:
        page = store.jobs.page(after=after, limit=1000)
        rows.extend(page.items)
        if page.next_after is None:
            return rows
        after = page.next_after


def _data_version(path: str):
    """A reader on the file: ``PRAGMA data_version`` moves when any other connection commits."""
    conn = sqlite3.connect(path, isolation_level=None)
    return conn, (lambda: conn.execute("PRAGMA data_version").fetchone()[0])


@pytest.mark.parametrize("how", ["explicit", "default"])
def test_6_9_stop_returns_within_grace_with_a_hostile_handler(any_store, make_worker, how):
    """spec 6.9: stop(grace) cancels handlers and returns {drained, in_flight} when
    the grace runs out (default stop_grace); it never raises: a hostile handler → drained=False,
    in_flight=1 after ≈ grace."""
    started, release = threading.Event(), threading.Event()
    polite_done = threading.Event()

    def polite(payload, ctx):
        ctx.cancelled.wait(30)
        polite_done.set()

    any_store.jobs.enqueue("hostile")
    any_store.jobs.enqueue("polite")
    w = make_worker(any_store, {"hostile": _hostile(started, release), "polite": polite}, concurrency=2,
                    stop_grace=0.3 if how == "default" else 30)
    w.start()
    try:
        assert started.wait(10)
        wait_for(lambda: w.stats()["in_flight"] == 2, what="both attempts")
        t0 = time.monotonic()
        result = w.stop() if how == "default" else w.stop(0.3)
        took = time.monotonic() - t0
    finally:
        release.set()
    assert (result.drained, result.in_flight) == (False, 1)
    assert 0.25 <= took < 2.0, took
    assert polite_done.is_set()
    assert w.stop().drained  # a second stop answers at once
    counts = any_store.jobs.counts()
    assert counts["leased"] == 1  # the hostile one stays leased until its lease ends


@pytest.mark.parametrize("grace", [0.2, None])
def test_6_25_close_with_a_hostile_handler_reports_handlers_left_running(engine_url, clock, grace):
    """spec 6.25: store.close(grace) stops workers like stop does, closes the
    connection either way, then reports handlers left running (TN2062); later calls get TN2063."""
    store = tenure.connect(engine_url, clock=clock)
    started, release = threading.Event(), threading.Event()
    store.jobs.enqueue("k")
    w = store.jobs.create_worker({"k": _hostile(started, release)}, stop_grace=0.2)
    w.start()
    try:
        assert started.wait(10)
        t0 = time.monotonic()
        with pytest.raises(tenure.errors.HandlersLeftRunning) as ei:
            store.close(grace)
        assert ei.value.code == "TN2062"
        assert time.monotonic() - t0 < 2.0
        assert not w.running
        for call in (lambda: store.jobs.enqueue("k"), lambda: store.jobs.counts(), w.start):
            with pytest.raises(tenure.errors.StoreClosed) as closed:
                call()
            assert closed.value.code == "TN2063"
        store.close()  # a second close is a no-op
    finally:
        release.set()


def test_6_26_a_detached_handler_returning_late_writes_nothing(any_store, make_worker):
    """spec 6.26: when a handler the grace could not drain returns late, nothing is
    written, nothing is claimed and no timer is rearmed: the row and stats() are unchanged; its
    ctx.checkpoints and ctx.transaction() refuse."""
    started, release, returned = threading.Event(), threading.Event(), threading.Event()
    late = {}

    def handler(payload, ctx):
        started.set()
        release.wait(30)
        for name, call in (("checkpoint", lambda: ctx.checkpoints.save("n", 1)),
                           ("transaction", lambda: ctx.transaction().__enter__())):
            try:
                call()
                late[name] = "written"
            except tenure.TenureError as exc:
                late[name] = exc.code
        returned.set()
        return "late"

    job_id = any_store.jobs.enqueue("k")
    w = make_worker(any_store, {"k": handler}, lease=60)
    w.start()
    assert started.wait(10)
    assert w.stop(0.05).in_flight == 1
    any_store.jobs.enqueue("k")  # no wake hook any more: nothing may claim it
    before_row, before_stats = any_store.jobs.get(job_id), w.stats()
    release.set()
    assert returned.wait(10)
    time.sleep(0.1)
    assert any_store.jobs.get(job_id) == before_row and before_row.state == "leased"
    assert w.stats() == before_stats
    assert any_store.jobs.counts()["pending"] == 1
    assert late == {"checkpoint": "TN2073", "transaction": "TN2073"}
    assert [t for t in threading.enumerate() if t.name.startswith(("tenure-keeper", "tenure-dispatch", "tenure-settle"))
            and t.is_alive()] == []


def test_6_28_quiescence_no_write_after_stop(engine_url, tmp_path, make_worker):
    """spec 6.28: before stop() returns, every database operation the worker started
    is done or cancelled and no timer is armed, even with a detached handler and settlements in
    flight: no write after stop() (``PRAGMA data_version`` unchanged on SQLite; every row unchanged
    on both engines)."""
    store = tenure.connect(engine_url)
    started, release = threading.Event(), threading.Event()
    store.jobs.enqueue("hostile", id="hostile")
    store.jobs.enqueue_many([{"kind": "quick", "payload": i} for i in range(300)])
    w = make_worker(store, {"hostile": _hostile(started, release), "quick": lambda p, ctx: p},
                    concurrency=8, lease=0.3, poll_interval=0.01)  # renewals every 100 ms
    w.start()
    try:
        assert started.wait(10)
        wait_for(lambda: w.stats()["completions"] >= 20, what="settlements under way")
        assert w.stop(0.1).in_flight == 1
        rows = _snapshot(store)
        version = None
        if engine_url.startswith("sqlite"):
            reader, version = _data_version(engine_url.removeprefix("sqlite:///"))
            v0 = version()
        release.set()
        time.sleep(0.4)  # several renewal periods and poll intervals: nothing may move
        if version is not None:
            assert version() == v0, "a write reached the file after stop() returned"
            reader.close()
        assert _snapshot(store) == rows
        assert 0 < sum(r.state == "done" for r in rows) < 301
    finally:
        release.set()
        store.close()


def test_6_29_a_claim_queued_behind_an_app_transaction_is_withdrawn(engine_url, make_worker):
    """spec 6.29: a claim still waiting behind an open application transaction is
    withdrawn on stop and never runs later: stop, then commit → the job is still pending with
    attempts == 0. (SQLite: the store gate; PostgreSQL: the pool's only connection.)"""
    store = tenure.connect(engine_url, pool_max=1) if engine_url.startswith("postgres") else \
        tenure.connect(engine_url)
    job_id = store.jobs.enqueue("k")
    ran = []
    # maintenance=False: Maintainer.release() (maintenance.py) writes the worker's registry row
    # without a cancel event, so it waits behind the same transaction (forever on SQLite from
    # another thread, pool_timeout on PostgreSQL); reported. This test is about the worker's claim.
    w = make_worker(store, {"k": lambda p, ctx: ran.append(1)}, poll_interval=0.01, watch=False,
                    maintenance=False)
    try:
        with store.transaction() as tx:
            tx.execute("SELECT 1")
            w.start()
            time.sleep(0.15)  # the dispatcher's claim is now queued behind this transaction
            assert w.stats()["claims"] == 0
            t0 = time.monotonic()
            result = w.stop()
            assert time.monotonic() - t0 < 2.0 and result.drained
        time.sleep(0.1)
        job = store.jobs.get(job_id)
        assert (job.state, job.attempts) == ("pending", 0)
        assert ran == [] and w.stats()["claims"] == 0
    finally:
        store.close()


def test_6_30_stop_then_close_releases_the_file(tmp_path):
    """spec 6.30: worker.stop() then store.close() reliably releases the database
    file: right after close it can be deleted or reopened with no "database is locked", 20 runs in
    a row (each with a handler still winding up at stop)."""
    path = tmp_path / "t.db"
    for run in range(20):
        store = tenure.connect(f"sqlite:///{path}")
        release = threading.Event()
        store.jobs.enqueue_many([{"kind": "k", "payload": i} for i in range(10)])
        store.jobs.enqueue("slow")
        hostile = run % 2 == 1  # odd runs: a handler ignoring its cancellation is detached

        slow_started = threading.Event()

        def slow(payload, ctx, release=release, hostile=hostile, started=slow_started):
            started.set()
            (release if hostile else ctx.cancelled).wait(5)

        w = store.jobs.create_worker({"k": lambda p, ctx: p, "slow": slow}, concurrency=4, poll_interval=0.01)
        w.start()
        assert slow_started.wait(10)
        assert w.stop(0.01 if hostile else 2).drained is not hostile
        store.close()
        release.set()
        assert not os.path.exists(f"{path}-wal"), "a connection is still open (the WAL was not removed)"
        conn = sqlite3.connect(str(path), timeout=0, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")  # no "database is locked"
        conn.execute("COMMIT")
        conn.close()
        if run % 5 == 4:  # and sometimes deleted (the next run starts a fresh file)
            os.remove(path)
            assert not os.path.exists(path)


def _read_only(engine_url):
    if engine_url.startswith("sqlite"):
        return tenure.connect(engine_url + "?mode=ro")
    sep = "&" if "?" in engine_url else "?"
    return tenure.connect(engine_url + sep + "options=-c%20default_transaction_read_only%3Don")


def test_6_21_a_refused_claim_is_counted_never_swallowed(engine_url, make_worker, caplog):
    """spec 6.21: a claim the database refuses (a read-only store) is counted in
    claim_errors and logged; the worker keeps running and stops cleanly."""
    writer = tenure.connect(engine_url)
    writer.jobs.enqueue("k")
    store = _read_only(engine_url)
    seen = Outcomes()
    try:
        w = make_worker(store, {"k": lambda p, ctx: "never"}, poll_interval=0.02, on_outcome=seen,
                        maintenance=False)
        with caplog.at_level("WARNING", logger="tenure.worker"):
            w.start()
            wait_for(lambda: w.stats()["claim_errors"] >= 2, what="refused claims")
        assert w.running and w.stats()["claims"] == 0 and seen.events == []
        assert any("claim failed" in r.getMessage() and "TN0002" in r.getMessage() for r in caplog.records)
        assert w.stop().drained
        assert writer.jobs.counts()["pending"] == 1
    finally:
        store.close()
        writer.close()


_START_STOP = """
import sys, tenure
store = tenure.connect(sys.argv[1])
for _ in range(200):
    w = store.jobs.create_worker({"k": lambda p, ctx: None}, poll_interval=0.01, maintenance=False)
    w.start()
    store.jobs.enqueue("k")
    w.stop()
store.close()
print("ok")
"""


def test_6_27_6_28_rapid_start_stop_never_crashes(tmp_path):
    """spec 6.27 and 6.28 under churn: 200 start/stop cycles with the SQLite
    watcher on. The watcher's connection is closed by its own thread once it has stopped reading
    (closing it from stop() while it ran ``PRAGMA data_version`` crashed the interpreter)."""
    out = subprocess.run([sys.executable, "-c", _START_STOP, f"sqlite:///{tmp_path}/churn.db"],
                         capture_output=True, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr.decode()[-2000:])
    assert out.stdout.decode().strip() == "ok"
