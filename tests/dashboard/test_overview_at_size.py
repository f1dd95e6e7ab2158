"""The overview at size (tenure.insights): past ``exact_below`` jobs (the database's estimate,
read without a pass over the table) PostgreSQL's counts come from a sample of the table's pages,
leased jobs still counted exactly, and the overview says so; below it, and on SQLite always,
every row is counted."""

from __future__ import annotations

import tenure
from tenure.insights import Insights
from tests.conftest import PG_URL, require_pg


def test_below_the_threshold_and_on_sqlite_every_row_is_counted(any_store):
    store = any_store
    store.jobs.enqueue_many([{"kind": "k", "queue": "a"} for _ in range(50)])
    assert len(store.jobs.claim_many("k", owner="t", limit=4, queues=["a"])) == 4
    exact = Insights(store).overview(fresh=True)
    assert exact.estimated is False and exact.counts["pending"] == 46 and exact.counts["leased"] == 4
    forced = Insights(store, exact_below=0, sample_pages=1).overview(fresh=True)
    if store.dialect == "sqlite":  # no estimate to go by: always counted
        assert forced.estimated is False and forced.counts == exact.counts
    else:  # a table of a few pages: a sample of one page is an estimate
        assert forced.estimated is True and forced.counts["leased"] == 4


def test_postgres_estimates_from_a_page_sample_past_the_threshold():
    require_pg()
    store = tenure.connect(PG_URL)
    try:
        store._reset_for_tests()
        n = 30_000
        store.jobs.enqueue_many([{"kind": "k", "queue": "a"} for _ in range(n)])
        with store._session() as s:  # a third of them done, spread over every page
            s.execute("UPDATE tenure_jobs SET state = 'done' WHERE get_byte(decode(md5(id), 'hex'), 0) % 3 = 0")
            done = s.execute("SELECT count(*) FROM tenure_jobs WHERE state = 'done'").fetchone()[0]
            s.execute("ANALYZE tenure_jobs")
            pages = s.execute("SELECT pg_relation_size('tenure_jobs') / 8192").fetchone()[0]
        assert len(store.jobs.claim_many("k", owner="t", limit=7, queues=["a"])) == 7
        pending = n - done - 7
        ov = Insights(store, exact_below=10_000, sample_pages=pages // 4).overview(fresh=True)
        assert ov.estimated is True
        assert ov.counts["leased"] == 7  # exact, through its partial index
        assert abs(ov.counts["done"] - done) < 0.25 * done
        assert abs(ov.counts["pending"] - pending) < 0.25 * pending
        assert ov.counts != {**ov.counts, "done": done, "pending": pending}  # not a count in disguise
        assert ov.kinds is not None and ov.kinds.unserved  # the kinds report reads the same sample
        assert abs(ov.kinds.unserved[0].count - pending) < 0.25 * pending
        exact = Insights(store, exact_below=n * 10).overview(fresh=True)
        assert exact.estimated is False and exact.counts["done"] == done and exact.counts["pending"] == pending
    finally:
        store._reset_for_tests()
        store.close()


def test_the_failures_per_minute_read_their_own_index(any_store, clock):
    """The throughput's failed buckets go through tenure_jobs_failed (migration 0020), not a
    pass over every job (1.7 s at ten million pending on PostgreSQL before it)."""
    store = any_store
    store.jobs.enqueue_many([{"kind": "k"} for _ in range(200)])
    store.jobs.fail(store.jobs.claim("k", owner="t").lease, "boom", backoff_base_ms=60_000)
    params = {"since": clock.now - 3_600_000, "until": clock.now + 60_000, "bucket": 60_000}
    with store._session() as s:
        if store.dialect == "postgres":
            from tenure.engine.postgres.insights import FAILED_BUCKETS

            s.execute("SET enable_seqscan = off")  # a table this small would be scanned anyway
            try:
                plan = "\n".join(r[0] for r in s.execute("EXPLAIN " + FAILED_BUCKETS, params).fetchall())
            finally:
                s.execute("RESET enable_seqscan")
        else:
            from tenure.engine.sqlite.insights import FAILED_BUCKETS

            plan = "\n".join(r[-1] for r in s.execute("EXPLAIN QUERY PLAN " + FAILED_BUCKETS, params).fetchall())
        assert [r[2] for r in s.insight_settled_buckets(params["since"], params["until"], 60_000)
                if r[1] == "failed"] == [1]
    assert "tenure_jobs_failed" in plan
