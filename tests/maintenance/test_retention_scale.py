"""Retention and the vacuum backstop at the scale where PostgreSQL's defaults stop fitting
(docs/performance.md, "Scale"): the backstop's vacuum cleans the indexes however few pages hold
dead rows."""

from __future__ import annotations

from tenure.engine.postgres import maintenance as pgm


def test_postgres_the_backstop_vacuum_always_cleans_the_indexes(pg_store):
    """Without INDEX_CLEANUP ON a vacuum that finds dead rows on < 2 % of the pages skips the
    indexes (at 100 000 000 rows: every vacuum), leaving the claim index's dead head entries."""
    assert pgm.JOBS_VACUUM == "VACUUM (ANALYZE, INDEX_CLEANUP ON, TRUNCATE false) tenure_jobs"
    pg_store.jobs.enqueue_many([{"kind": "k"} for _ in range(10)])
    assert pg_store.maintenance.vacuum_jobs(force=True)  # the server accepts it, as the table's owner
    assert pg_store.maintenance.stats()["vacuums"] == 1


def _settled_history(store, n: int) -> None:
    """``n`` done jobs past the default horizon, none with a horizon of its own, ANALYZEd: the
    statistics that led the planner to scan the whole heap for the custom horizon's statement."""
    with store._session() as s:
        s.execute("INSERT INTO tenure_jobs (id, kind, payload, state, run_at, created_at, updated_at) "
                  "SELECT 'h' || lpad(g::text, 9, '0'), 'k', '{}', 'done', g, g, g "
                  "FROM generate_series(1, %s) g", (n,))
        s.execute("ANALYZE tenure_jobs")


def _plan(store, sql: str, *settings: str) -> str:
    import psycopg

    from tests.conftest import PG_URL

    with psycopg.connect(PG_URL) as conn:
        for setting in settings:
            conn.execute(setting)
        rows = conn.execute("EXPLAIN " + sql, {"now": None, "limit": 1000, "from": pgm.NO_MARK, "from_id": "",
                                               "default_after_ms": 7 * 86_400_000}).fetchall()
    return "\n".join(r[0] for r in rows)


def test_postgres_retention_statements_walk_their_index_whatever_the_estimate(pg_store):
    _settled_history(pg_store, 20_000)
    misled = _plan(pg_store, pgm.DELETE_SETTLED_CUSTOM)
    # What the planner picks on its own estimate: a bitmap scan here (it reads every due row, then
    # sorts), the whole heap sequentially at 100 000 000 rows.
    assert "Index Scan using tenure_jobs_delete_at" not in misled, misled
    for sql, index in ((pgm.DELETE_SETTLED_CUSTOM, "tenure_jobs_delete_at"),
                       (pgm.DELETE_SETTLED_DEFAULT, "tenure_jobs_settled")):
        plan = _plan(pg_store, sql, *pgm.INDEX_WALK)
        assert f"Index Scan using {index} on tenure_jobs" in plan, plan
        assert "Seq Scan on tenure_jobs" not in plan and "Bitmap Heap Scan on tenure_jobs" not in plan, plan
    # The walk's mark bounds the index descent itself (past the dead entries), not a filter after it.
    plan = _plan(pg_store, pgm.DELETE_SETTLED_DEFAULT, *pgm.INDEX_WALK)
    assert "ROW(updated_at, id) > ROW(" in plan.split("Index Cond:")[1].split("\n")[0], plan


def test_postgres_the_custom_horizon_walk_descends_past_its_mark_in_its_index(pg_store):
    """Migration 0022: tenure_jobs_delete_at holds (horizon, id), so the walk's mark bounds the
    index descent itself and the rows come in index order, no sort: a batch never walks again the
    dead entries of rows tied with the last one the previous batch deleted (before, the descent
    started AT the last horizon and every tied entry was read again, batch after batch)."""
    _settled_history(pg_store, 20_000)
    plan = _plan(pg_store, pgm.DELETE_SETTLED_CUSTOM, *pgm.INDEX_WALK)
    assert "Index Scan using tenure_jobs_delete_at on tenure_jobs" in plan, plan
    assert "ROW((updated_at + delete_after_ms), id) > ROW(" in plan.split("Index Cond:")[1].split("\n")[0], plan
    assert "Sort" not in plan, plan


def test_postgres_a_custom_horizon_batch_starts_past_its_mark_s_id(pg_store, clock):
    from tenure.engine.rows import RetentionMark
    from tests.maintenance.test_sweeps import DAY, make, sql

    make(pg_store, 3, "tie", state="done", updated_at=clock.now - DAY, delete_after_ms=1_000)
    key = clock.now - DAY + 1_000
    mark = RetentionMark(custom=key, custom_id="tie00001")
    with pg_store._session() as s:
        assert s.job_delete_settled(clock.now, None, 10, mark) == 1
    assert (mark.custom, mark.custom_id) == (key, "tie00002")
    assert sorted(r[0] for r in sql(pg_store, "SELECT id FROM tenure_jobs")) == ["tie00000", "tie00001"]


def test_postgres_retention_settings_stay_in_its_own_transaction(pg_store, clock):
    _settled_history(pg_store, 10)
    assert pg_store.maintenance.delete_settled() == 10
    with pg_store._session() as s:
        assert s.execute("SHOW enable_seqscan").fetchone()[0] == "on"
        assert s.execute("SHOW enable_bitmapscan").fetchone()[0] == "on"


def test_a_drain_deletes_exactly_the_due_rows_across_batches_with_tied_keys(store, clock):
    """Batches of 3 over keys tied across batch boundaries: each batch starts AT the last key
    deleted, so a tie cut by the limit is still found, and nothing not due goes."""
    from tests.maintenance.test_sweeps import DAY, make, sql

    old = clock.now - 8 * DAY
    for i, (n, at) in enumerate(((4, old), (5, old + 1), (1, old + 2))):
        make(store, n, f"due{i}-", state="done", updated_at=at)
    for i, n in enumerate((4, 2)):  # their own horizon: due, tied in updated_at + delete_after_ms
        make(store, n, f"own{i}-", state="dead", updated_at=clock.now - 60_000 + i, delete_after_ms=1_000 - i)
    make(store, 2, "young", state="done", updated_at=clock.now - 7 * DAY + 1)
    make(store, 2, "own-young", state="done", updated_at=clock.now, delete_after_ms=1)
    make(store, 2, "pending", updated_at=old)
    make(store, 2, "failed", state="failed", updated_at=old)
    m = store.maintenance
    m.configure(batch_size=3)
    assert m.delete_settled(drain=True) == 16
    left = sorted(r[0] for r in sql(store, "SELECT id FROM tenure_jobs"))
    assert left == sorted(f"{p}{i:05d}" for p in ("young", "own-young", "pending", "failed") for i in range(2))


def test_a_batch_starts_at_the_walk_s_mark_and_advances_it(store, clock):
    from tenure.engine.rows import RetentionMark
    from tests.maintenance.test_sweeps import DAY, make, sql

    old = clock.now - 8 * DAY
    make(store, 2, "behind", state="done", updated_at=old - 5)
    make(store, 3, "ahead", state="done", updated_at=old)
    make(store, 2, "own-behind", state="done", updated_at=old, delete_after_ms=DAY - 1)
    make(store, 1, "own-ahead", state="done", updated_at=old, delete_after_ms=DAY)
    mark = RetentionMark(custom=old + DAY, default=old - 4)
    with store._session() as s:
        assert s.job_delete_settled(clock.now, 7 * DAY, 10, mark) == 4
    assert (mark.custom, mark.default) == (old + DAY, old)
    assert mark.default_id == ("ahead00002" if store.dialect == "postgres" else None)
    assert mark.custom_id == ("own-ahead00000" if store.dialect == "postgres" else None)
    left = sorted(r[0] for r in sql(store, "SELECT id FROM tenure_jobs"))
    assert left == ["behind00000", "behind00001", "own-behind00000", "own-behind00001"]
    with store._session() as s:
        assert s.job_delete_settled(clock.now, 7 * DAY, 10, mark) == 0
    assert (mark.custom, mark.default) == (old + DAY, old)
