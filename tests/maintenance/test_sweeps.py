"""The leader's sweeps, one pass at a time with the injected clock: queued jobs past their
retention expire, settled jobs past their deletion horizon are deleted (in bounded batches, with
their checkpoints), dead workers are reaped and their leases ended; heartbeats fill the registry."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tenure.errors import LeaseExpired
from tenure.maintenance import DEFAULT_DELETE_AFTER_MS, EXPIRED_ERROR

DAY = 86_400_000


def sql(store, text: str, params: tuple = ()) -> list:
    """Run SQL on the store's database (``?`` placeholders on both engines)."""
    if store.dialect == "postgres":
        text = text.replace("?", "%s")
    with store._session() as s:
        cur = s.execute(text, params)
        return cur.fetchall() if cur.description else []


def make(store, n: int, prefix: str = "j", kind: str = "k", **columns) -> list[str]:
    """``n`` jobs, then their columns set directly (the sweeps' contract is the columns)."""
    ids = store.jobs.enqueue_many([{"kind": kind, "id": f"{prefix}{i:05d}"} for i in range(n)])
    if columns:
        sets = ", ".join(f"{c} = ?" for c in columns)
        sql(store, f"UPDATE tenure_jobs SET {sets} WHERE id LIKE ?", (*columns.values(), f"{prefix}%"))
    return ids


# -- expire queued jobs past keep_until ------------------------------------------------------------------


def test_queued_jobs_past_retention_expire_as_dead(store, clock):
    now = clock.now
    store.jobs.enqueue("running", id="leased")
    claim = store.jobs.claim("running", owner="w")
    sql(store, "UPDATE tenure_jobs SET keep_until = ? WHERE id = 'leased'", (now - DAY,))
    make(store, 1, "due-pending", keep_until=now)
    make(store, 1, "due-failed", keep_until=now - 1, state="failed", last_error="boom")
    make(store, 1, "not-yet", keep_until=now + 1)
    make(store, 1, "no-retention")
    make(store, 1, "settled", keep_until=now - DAY, state="done")
    m = store.maintenance
    assert m.expire_queued() == 2
    states = {j.id: (j.state, j.last_error) for j in store.jobs.page().items}
    assert states["due-pending00000"] == states["due-failed00000"] == ("dead", EXPIRED_ERROR)
    assert states["not-yet00000"][0] == states["no-retention00000"][0] == "pending"
    assert states["settled00000"][0] == "done"
    assert states["leased"][0] == "leased"  # a running attempt is never expired
    store.jobs.complete(claim.lease, "fine")
    assert store.jobs.get("due-pending00000").updated_at == now
    assert m.expire_queued() == 0
    assert m.stats()["expired"] == 2


def test_expired_jobs_are_never_claimed(store, clock):
    make(store, 3, keep_until=clock.now - 1)
    assert store.maintenance.expire_queued() == 3
    assert store.jobs.claim("k", owner="w") is None
    assert store.jobs.counts()["dead"] == 3


def test_expiry_through_queue_retention(store, clock):
    """End to end with the queue option: retention turns into keep_until at enqueue."""
    if not hasattr(store.queues, "create"):
        pytest.skip("queue retention is not available")
    store.queues.create("short-lived", retention=60)
    store.jobs.enqueue("k", queue="short-lived", id="r1")
    clock.advance(59_999)
    assert store.maintenance.expire_queued() == 0
    clock.advance(1)
    assert store.maintenance.expire_queued() == 1
    assert store.jobs.get("r1").state == "dead"


def test_expiry_runs_in_bounded_batches(store, clock):
    make(store, 250, keep_until=clock.now)
    m = store.maintenance
    m.configure(batch_size=100, max_batches=2)  # the shape of the default 1000 x 10, smaller
    assert m.expire_queued() == 200  # one background pass: at most 2 batches
    assert m.expire_queued() == 50
    assert store.jobs.counts()["dead"] == 250


# -- delete settled jobs past delete_after -----------------------------------------------------------------


def test_settled_jobs_are_deleted_after_the_default_horizon_with_their_checkpoints(store, clock):
    assert DEFAULT_DELETE_AFTER_MS == 7 * DAY
    now = clock.now
    make(store, 1, "old-done", state="done", updated_at=now - 7 * DAY)
    make(store, 1, "old-dead", state="dead", updated_at=now - 8 * DAY)
    make(store, 1, "old-cancelled", state="cancelled", updated_at=now - 30 * DAY)
    make(store, 1, "young-done", state="done", updated_at=now - 7 * DAY + 1)
    make(store, 1, "ancient-pending", updated_at=now - 400 * DAY)
    make(store, 1, "ancient-failed", state="failed", updated_at=now - 400 * DAY)
    sql(store, "INSERT INTO tenure_checkpoints (run_id, node_id, value, generation) VALUES (?, 'a', '1', 1)",
        ("old-dead00000",))
    sql(store, "INSERT INTO tenure_checkpoints (run_id, node_id, value, generation) VALUES (?, 'a', '1', 1)",
        ("ancient-failed00000",))
    m = store.maintenance
    assert m.delete_settled() == 3
    left = sorted(j.id for j in store.jobs.page().items)
    assert left == ["ancient-failed00000", "ancient-pending00000", "young-done00000"]
    assert [r[0] for r in sql(store, "SELECT run_id FROM tenure_checkpoints")] == ["ancient-failed00000"]
    assert m.delete_settled() == 0
    clock.advance(1)
    assert m.delete_settled() == 1
    assert m.stats()["deleted"] == 4


def test_a_job_s_own_delete_after_wins(store, clock):
    now = clock.now
    make(store, 1, "zero", state="done", updated_at=now, delete_after_ms=0)
    make(store, 1, "minute", state="done", updated_at=now - 60_000, delete_after_ms=60_000)
    make(store, 1, "month", state="done", updated_at=now - 8 * DAY, delete_after_ms=30 * DAY)
    make(store, 1, "hour", state="dead", updated_at=now - 60_000, delete_after_ms=3_600_000)
    assert store.maintenance.delete_settled() == 2
    assert sorted(j.id for j in store.jobs.page().items) == ["hour00000", "month00000"]


def test_without_a_default_only_jobs_with_their_own_horizon_go(store, clock):
    make(store, 1, "default", state="done", updated_at=clock.now - 365 * DAY)
    make(store, 1, "own", state="done", updated_at=clock.now - DAY, delete_after_ms=DAY)
    m = store.maintenance
    m.configure(delete_after=None)
    assert m.delete_settled() == 1
    assert [j.id for j in store.jobs.page().items] == ["default00000"]


def test_deletion_runs_in_bounded_batches(store, clock):
    make(store, 230, state="done", updated_at=clock.now - 8 * DAY)
    make(store, 70, "own", state="done", updated_at=clock.now, delete_after_ms=0)
    m = store.maintenance
    m.configure(batch_size=100, max_batches=2)
    assert m.delete_settled() == 200
    assert m.delete_settled(drain=True) == 100
    assert store.jobs.counts()["done"] == 0


# -- heartbeats and the worker registry --------------------------------------------------------------------


def test_a_running_worker_heartbeats_into_the_registry_and_leaves_on_stop(store, clock):
    worker = store.jobs.create_worker({"a": lambda p, ctx: None, "b": lambda p, ctx: None}, concurrency=3,
                                      queues=["q1", "q2"], poll_interval=0.05, owner="w-1")
    m = store.maintenance
    worker.start()
    try:
        assert m.wait_for_pass(after=0, timeout=10)
        [info] = m.workers()
        assert (info.id, info.queues, info.kinds, info.concurrency, info.in_flight) == (
            "w-1", ["q1", "q2"], ["a", "b"], 3, 0)
        assert info.heartbeat_at == clock.now and info.started_at == clock.now
        assert info.pid is not None and info.host and info.stats["claims"] == 0
        clock.advance(5_000)
        assert m.heartbeat() == 1
        assert m.workers()[0].heartbeat_at == clock.now and m.workers()[0].started_at == clock.now - 5_000
    finally:
        worker.stop()
    assert m.workers() == []
    assert m.stats()["heartbeats"] >= 2


def test_dead_workers_are_reaped_and_their_long_leases_end(store, other, clock):
    now = clock.now
    dead_after = int(store.maintenance.config.worker_dead_after * 1000)
    store.jobs.enqueue("k", id="held")
    claim = store.jobs.claim("k", owner="ghost", lease_ms=3_600_000, instance="ghost#1")  # a long lease
    with store._session() as s:
        s.worker_heartbeat([{"id": "ghost", "instance": "ghost#1", "host": "h", "pid": 1, "queues": None,
                             "kinds": json.dumps(["k"]), "concurrency": 1, "started_at": now,
                             "in_flight": 1, "stats": None}], now)
        s.worker_heartbeat([{"id": "alive", "host": "h", "pid": 2, "queues": None, "kinds": None,
                             "concurrency": 1, "started_at": now, "in_flight": 0, "stats": None}],
                           now + 30_000)
    m = other.maintenance
    clock.set(now + dead_after)
    assert m.reap_workers() == (0, 0)  # silent for exactly the limit: not yet dead
    clock.advance(1)
    assert m.reap_workers() == (1, 1)
    assert [w.id for w in m.workers()] == ["alive"]
    job = store.jobs.get("held")
    assert (job.state, job.lease_until) == ("leased", clock.now)
    with pytest.raises(LeaseExpired):  # the vanished attempt is fenced
        store.jobs.complete(claim.lease, "late")
    again = store.jobs.claim("k", owner="rescuer")  # and the job is recovered at once
    assert again.job.id == "held" and again.job.attempts == 2
    assert m.stats()["workers_reaped"] == 1 and m.stats()["leases_released"] == 1


def test_the_reaper_ends_a_silent_instance_s_leases_never_a_live_namesake_s(store, other, clock):
    """): two processes use the owner
    string "w". One went silent (its registry row is stale); the other is alive and holds a lease
    of its own, claimed under the same owner. The reaper ends the silent instance's lease only."""
    now = clock.now
    store.jobs.enqueue("k", id="gone")
    store.jobs.enqueue("live", id="busy")
    started, release = threading.Event(), threading.Event()

    def hold(payload, ctx):
        started.set()
        release.wait(30)
        return "kept"

    # The live process: a real worker, owner "w", that never heartbeats (its maintenance is
    # elsewhere), holding a long lease on "busy".
    live = other.jobs.create_worker({"live": hold}, owner="w", lease=3600, maintenance=False,
                                    poll_interval=0.02, watch=False)
    live.start()
    try:
        assert started.wait(10)
        assert sql(store, "SELECT lease_instance FROM tenure_jobs WHERE id = 'busy'") == [(live.instance,)]
        # The silent process: it claimed "gone" as "w" and its last heartbeat is old.
        silent = "host-b:4242:silent"
        gone = store.jobs.claim("k", owner="w", lease_ms=3_600_000, instance=silent)
        with store._session() as s:
            s.worker_heartbeat([{"id": "w", "instance": silent, "host": "host-b", "pid": 4242, "queues": None,
                                 "kinds": json.dumps(["k"]), "concurrency": 1, "started_at": now,
                                 "in_flight": 1, "stats": None}], now)
        busy_until = store.jobs.get("busy").lease_until
        clock.advance(int(store.maintenance.config.worker_dead_after * 1000) + 1)
        assert store.maintenance.reap_workers() == (1, 1)
        assert store.jobs.get("gone").lease_until == clock.now  # the silent instance's lease ended
        with pytest.raises(LeaseExpired):
            store.jobs.complete(gone.lease, "late")
        assert store.jobs.get("busy").lease_until == busy_until  # the live namesake's did not
        release.set()
        deadline = time.monotonic() + 10
        while store.jobs.get("busy").state != "done" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.jobs.get("busy").state == "done"
        assert live.stats()["lost_settlements"] == 0
    finally:
        release.set()
        live.stop()


def test_a_process_never_reaps_its_own_running_workers(store, clock):
    worker = store.jobs.create_worker({"k": lambda p, ctx: None}, poll_interval=0.05, owner="mine")
    m = store.maintenance
    worker.start()
    try:
        assert m.wait_for_pass(after=0, timeout=10)
        clock.advance(int(10 * m.config.worker_dead_after * 1000))  # its heartbeat looks ancient
        assert m.reap_workers() == (0, 0)
        assert [w.id for w in m.workers()] == ["mine"]
    finally:
        worker.stop()


# -- run_once and PostgreSQL specifics ---------------------------------------------------------------------


def test_run_once_runs_every_duty_and_counts_them(store, clock):
    store.schedules.add("s", "* * * * *", "k")
    make(store, 2, "exp", keep_until=clock.now + 60_000)
    make(store, 3, "del", state="done", updated_at=clock.now + 60_000 - 7 * DAY - 1)
    clock.advance(60_000)
    store.maintenance.configure(vacuum=False)  # its trigger depends on the table's history (tested below)
    counts = store.maintenance.run_once()
    assert counts == {"fired": 1, "heartbeats": 0, "expired": 2, "deleted": 3, "leases_released": 0,
                      "workers_reaped": 0, "vacuums": 0, "analyzes": 0}
    assert store.maintenance.run_once()["fired"] == 0


def test_postgres_jobs_table_autovacuum_settings(pg_store):
    """The settings docs/maintenance.md documents, as the migration applies them."""
    store = pg_store
    [(options,)] = sql(store, "SELECT reloptions FROM pg_class WHERE oid = 'tenure_jobs'::regclass")
    settings = dict(o.split("=", 1) for o in options)
    assert settings == {"fillfactor": "90", "autovacuum_vacuum_scale_factor": "0.02",
                        "autovacuum_analyze_scale_factor": "0.05",
                        "autovacuum_vacuum_insert_scale_factor": "0.05", "vacuum_truncate": "false"}


def test_postgres_sweeps_skip_rows_another_transaction_holds(pg_store, clock):
    import psycopg

    from .conftest import PG_URL

    store = pg_store
    make(store, 3, keep_until=clock.now - 1)
    make(store, 2, "old", state="done", updated_at=clock.now - 8 * DAY)
    with psycopg.connect(PG_URL) as conn:
        conn.execute("SELECT id FROM tenure_jobs WHERE id IN ('j00000', 'old00000') FOR UPDATE")
        m = store.maintenance
        assert m.expire_queued() == 2  # j00000 is skipped, not waited for
        assert m.delete_settled() == 1
    assert m.expire_queued() == 1 and m.delete_settled() == 1


def test_postgres_a_running_vacuum_is_cancelled_when_the_service_stops(pg_store):
    """Quiescence: a vacuum in progress (here: waiting for a lock another session holds) is
    cancelled on the server as soon as the service is told to stop."""
    import threading
    import time

    import psycopg

    from .conftest import PG_URL

    m = pg_store.maintenance
    stop, result = threading.Event(), []
    with psycopg.connect(PG_URL) as holder:
        holder.execute("LOCK TABLE tenure_jobs IN SHARE UPDATE EXCLUSIVE MODE")  # what VACUUM needs
        t = threading.Thread(target=lambda: result.append(m.vacuum_jobs(force=True, cancel=stop)))
        t.start()
        t.join(0.3)
        assert t.is_alive()  # blocked behind the lock
        started = time.monotonic()
        stop.set()
        t.join(5)
        assert not t.is_alive() and time.monotonic() - started < 3
    assert result == [False] and m.stats()["vacuums"] == 0
