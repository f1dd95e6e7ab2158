"""Retention and the vacuum backstop at the scale where PostgreSQL's defaults stop fitting
(docs/performance.md, "Scale"): the backstop's vacuum cleans the indexes however few pages hold
dead rows."""

from __future__ import annotations

from tenure.engine.postgres import maintenance as pgm


def test_postgres_the_backstop_vacuum_always_cleans_the_indexes(pg_store):
    """Without INDEX_CLEANUP ON a vacuum that finds dead rows on < 2 % of the pages skips the
    indexes (at 100 000 000 rows: every vacuum), leaving the claim index's dead head entries."""
    assert pgm.JOBS_VACUUM == "VACUUM (ANALYZE, INDEX_CLEANUP ON) tenure_jobs"
    pg_store.jobs.enqueue_many([{"kind": "k"} for _ in range(10)])
    assert pg_store.maintenance.vacuum_jobs(force=True)  # the server accepts it, as the table's owner
    assert pg_store.maintenance.stats()["vacuums"] == 1
