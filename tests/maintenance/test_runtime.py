"""The service's lifecycle and shape: shared by a store's workers, started by the first and stopped
quiescently by the last, sweeps only on the leader, and a database outage logged, counted and
survived. Cadences are real time here (shortened); "now" is still the injected clock."""

from __future__ import annotations

import logging
import sqlite3
import threading

import pytest

import tenure

from .test_sweeps import make


def maintenance_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "tenure-maintenance" and t.is_alive()]


def noop(payload, ctx):
    return None


def test_workers_share_one_service_that_stops_with_the_last(store):
    before = len(maintenance_threads())
    m = store.maintenance
    a = store.jobs.create_worker({"k": noop}, poll_interval=0.05, owner="a").start()
    b = store.jobs.create_worker({"k": noop}, poll_interval=0.05, owner="b").start()
    try:
        assert m.running and len(maintenance_threads()) == before + 1
        assert m.wait_for_pass(after=0, timeout=10)
        m.heartbeat()
        assert sorted(w.id for w in m.workers()) == ["a", "b"]
        a.stop()
        assert m.running and [w.id for w in m.workers()] == ["b"]
    finally:
        a.stop()
        b.stop()
    assert not m.running and len(maintenance_threads()) == before
    assert m.workers() == [] and m.stats()["workers"] == 0


def test_stop_is_quiescent_the_store_closes_right_after(engine_url, clock, caplog):
    caplog.set_level(logging.DEBUG, logger="tenure.maintenance")
    for _ in range(3):
        s = tenure.connect(engine_url, clock=clock)
        s.maintenance.configure(schedule_interval=0.01, heartbeat_interval=0.01, worker_dead_after=1)
        w = s.jobs.create_worker({"k": noop}, poll_interval=0.01).start()
        s.maintenance.wait_for_pass(after=0, timeout=10)
        w.stop()
        s.close()  # nothing of the service may still be using the database
        assert not s.maintenance.running
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_heartbeats_on_the_engine_clock(live_store):
    """Without an injected clock: SQLite's wall clock, PostgreSQL's server clock."""
    import time

    m = live_store.maintenance
    before = int(time.time() * 1000)
    w = live_store.jobs.create_worker({"k": noop}, poll_interval=0.05, owner="real-clock").start()
    try:
        assert m.wait_for_pass(after=0, timeout=10)
        [info] = m.workers()
        assert info.id == "real-clock" and m.stats()["errors"] == 0
        assert before - 5_000 <= info.started_at <= info.heartbeat_at <= int(time.time() * 1000) + 5_000
    finally:
        w.stop()


def test_maintenance_false_starts_nothing(store):
    before = len(maintenance_threads())
    w = store.jobs.create_worker({"k": noop}, poll_interval=0.05, maintenance=False).start()
    try:
        assert len(maintenance_threads()) == before and not store.maintenance.running
        assert store.maintenance.workers() == []
    finally:
        w.stop()


def test_sweeps_run_on_the_leader_only(store, other, clock):
    for s in (store, other):
        s.maintenance.configure(expire_interval=0.02, delete_interval=0.02, reap_interval=0.02,
                                leader_ttl=3)
    wa = store.jobs.create_worker({"k": noop}, poll_interval=0.05, owner="a").start()
    wb = other.jobs.create_worker({"k": noop}, poll_interval=0.05, owner="b").start()
    try:
        ma, mb = store.maintenance, other.maintenance
        assert ma.wait_for_pass(after=0, timeout=10) and mb.wait_for_pass(after=0, timeout=10)
        leaders = [m for m in (ma, mb) if m.is_leader()]
        assert len(leaders) == 1
        follower = mb if leaders[0] is ma else ma
        make(store, 5, "exp", kind="nobody", keep_until=clock.now - 1)
        for _ in range(200):
            if store.jobs.counts()["dead"] == 5:
                break
            leaders[0].wait_for_pass(timeout=1)
        assert store.jobs.counts()["dead"] == 5
        # the pass counts what it expired after its commit: let the pass that did it end
        assert leaders[0].wait_for_pass(timeout=10)
        assert leaders[0].stats()["expired"] == 5 and follower.stats()["expired"] == 0
    finally:
        wa.stop()
        wb.stop()


def test_a_database_outage_is_logged_counted_and_survived(tmp_path, clock, caplog):
    """SQLite: another connection holds the write lock; every duty fails with a coded busy error,
    the thread keeps going (one warning per duty per outage), and fires once the lock is gone."""
    path = tmp_path / "outage.db"
    store = tenure.connect(f"sqlite:///{path}?busy_timeout=20ms", clock=clock)
    m = store.maintenance
    m.configure(schedule_interval=0.01, heartbeat_interval=0.01, worker_dead_after=1)
    s = store.schedules.add("tick", "* * * * *", "k")
    clock.set(s.next_fire_at)
    caplog.set_level(logging.INFO, logger="tenure.maintenance")
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    w = store.jobs.create_worker({"other": noop}, poll_interval=0.05).start()
    try:
        for _ in range(200):
            if m.stats()["errors_by_duty"].get("schedules", 0) >= 3:
                break
            m.wait_for_pass(timeout=1)
        stats = m.stats()
        assert stats["errors_by_duty"]["schedules"] >= 3 and stats["fired"] == 0 and m.running
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "'schedules'" in r.getMessage()]
        assert len(warnings) == 1 and "TN0003" in warnings[0].getMessage()
        blocker.execute("ROLLBACK")
        for _ in range(200):
            if m.stats()["fired"]:
                break
            m.wait_for_pass(timeout=1)
        assert m.stats()["fired"] == 1
        assert store.jobs.get(f"cron:tick:{s.next_fire_at}") is not None
        assert any("recovered" in r.getMessage() for r in caplog.records)
    finally:
        blocker.close()
        w.stop()
        store.close()


@pytest.mark.parametrize("drain", [True, False])
def test_run_once_without_workers_is_safe(store, drain):
    assert store.maintenance.run_once(drain=drain)["heartbeats"] == 0
    assert not store.maintenance.running


@pytest.mark.parametrize("off", [{"schedules": False}, {"sweeps": False}, {"schedules": False, "sweeps": False}])
def test_a_disabled_duty_does_not_make_the_service_spin(store, off):
    """A duty turned off is never rescheduled; the loop once took its stale due time as the next
    wake-up and ran passes back to back (a full core taken from the workers). With nothing due
    for a second, no second pass may come within 0.3 s of the first."""
    m = store.maintenance
    m.configure(**off)
    w = store.jobs.create_worker({"k": noop}, poll_interval=0.05).start()
    try:
        assert m.wait_for_pass(after=0, timeout=10)
        first = m.stats()["passes"]
        assert not m.wait_for_pass(after=first, timeout=0.3), m.stats()["passes"] - first
    finally:
        w.stop()
