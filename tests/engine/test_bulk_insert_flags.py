"""``Session.job_insert`` answers, for each job of a bulk, whether THIS call wrote it: the flags
of a mixed bulk (some new ids, some already stored, one repeated within the call) on both
engines. The store's uniqueness answers read these flags (tenure.queues)."""

from __future__ import annotations

from tenure.engine.rows import NewJob


def _job(job_id: str) -> NewJob:
    return NewJob(id=job_id, kind="k", payload=None, queue="default", priority=0, run_at=None, delay_ms=0,
                  max_attempts=5)


def test_a_mixed_bulk_flags_exactly_the_rows_it_wrote(store):
    store.jobs.enqueue("k", {"old": 1}, id="old-1")
    store.jobs.enqueue("k", {"old": 2}, id="old-2")
    ids = ["new-1", "old-1", "new-2", "new-1", "old-2", "new-3"]
    with store.engine.transaction() as s:
        got = s.job_insert([_job(i) for i in ids], None)
    assert [(g.id, g.inserted) for g in got] == [
        ("new-1", True), ("old-1", False), ("new-2", True), ("new-1", False), ("old-2", False), ("new-3", True)]
    assert store.jobs.get("old-1").payload == {"old": 1}  # a stored job is left as it was
    assert all(store.jobs.get(i) is not None for i in ("new-1", "new-2", "new-3"))
    with store.engine.transaction() as s:  # the same bulk again writes nothing
        again = s.job_insert([_job(i) for i in ids], None)
    assert [g.inserted for g in again] == [False] * len(ids)


def test_a_bulk_of_new_ids_flags_every_row(store):
    with store.engine.transaction() as s:
        got = s.job_insert([_job(f"n{i}") for i in range(10_050)], None)  # more than one chunk on SQLite
    assert len(got) == 10_050 and all(g.inserted for g in got)
    assert [g.id for g in got] == [f"n{i}" for i in range(10_050)]


def test_a_sqlite_bulk_on_a_callers_implicit_transaction_is_undone_by_its_rollback(tmp_path):
    """The outbox on SQLite: ``enqueue_many(conn=)`` on a driver connection in its implicit-
    transaction mode writes inside the caller's transaction, so the caller's rollback undoes it
    (the bulk's savepoint must not be the outermost one, whose RELEASE would commit)."""
    import sqlite3

    import tenure

    path = tmp_path / "outbox.db"
    store = tenure.connect(f"sqlite:///{path}")
    try:
        conn = sqlite3.connect(path)
        ids = store.jobs.enqueue_many([{"kind": "k"}, {"kind": "k"}], conn=conn)
        assert conn.in_transaction
        conn.rollback()
        assert all(store.jobs.get(i) is None for i in ids)
        ids = store.jobs.enqueue_many([{"kind": "k"}, {"kind": "k"}], conn=conn)
        conn.commit()
        conn.close()
        assert all(store.jobs.get(i) is not None for i in ids)
    finally:
        store.close()
