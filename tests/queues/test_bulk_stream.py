"""Bulk enqueue streamed into the store: ``enqueue_many`` of jobs that cannot collide
(ids minted by tenure, no ``singleton_key``/``singleton_for``/``debounce``, no queue policy)
validates each job while the previous ones are written (PostgreSQL: COPY straight into
``tenure_jobs``; SQLite keeps its one-transaction insert). Whatever the path, a bulk stores
exactly what the same jobs enqueued one by one store, honours every policy, is all or nothing,
and every job is claimed exactly once."""

from __future__ import annotations

import re

import pytest

import tenure
from tenure.jobs_base import STREAM_MIN_JOBS

from . import _procs
from ._helpers import at_once, jobs_in, raw, refused

N = 2 * STREAM_MIN_JOBS + 3  # above the streaming threshold
#: The columns a Job record does not carry, compared raw.
RAW_COLUMNS = ("policy", "singleton_key", "singleton_on", "retry_delay_ms", "retry_backoff",
               "retry_delay_max_ms", "keep_until", "delete_after_ms")


def _spec(i: int) -> dict:
    """A varied job: every enqueue argument and job option a streamed job may carry."""
    spec: dict = {"kind": f"k{i % 3}", "payload": {"i": i, "s": "é" * (i % 2)}, "queue": ("tuned", "plain")[i % 2]}
    if i % 5 == 0:
        spec["priority"] = i - 50
    if i % 7 == 0:
        spec["delay"] = 30
    elif i % 11 == 0:
        spec["run_at"] = 1_900_000_000_000 + i
    if i % 4 == 0:
        spec.update(tags=["a", f"t{i % 3}"], meta={"n": i})
    if i % 6 == 0:
        spec.update(max_attempts=9, timeout=2, retention=100, retry_delay=1, dead_letter="other")
    if i % 9 == 0:
        spec["group_key"] = f"g{i % 2}"
    if i % 8 == 0:
        spec["retry_backoff"] = False  # stored 0, not NULL, beside rows that leave it unset
    return spec


def _stored(store, job_id: str) -> tuple:
    job = store.jobs.get(job_id)
    record = {k: v for k, v in vars(job).items() if k != "id"} if hasattr(job, "__dict__") else None
    if record is None:
        from dataclasses import asdict

        record = {k: v for k, v in asdict(job).items() if k != "id"}
    extra = raw(store, f"SELECT {', '.join(RAW_COLUMNS)} FROM tenure_jobs WHERE id = ?", (job_id,))[0]
    return tuple(sorted(record.items(), key=lambda kv: kv[0])), extra


def test_streamed_bulk_stores_what_one_by_one_stores(store):
    store.queues.create("tuned", max_attempts=3, retry_delay=2, retry_backoff=True, retry_delay_max=30,
                        timeout=5, retention=60, delete_after=120, dead_letter="dlq")
    specs = [_spec(i) for i in range(N)]
    bulk = store.jobs.enqueue_many(specs)
    single = [store.jobs.enqueue(**spec) for spec in specs]
    assert len(set(bulk)) == N and None not in bulk and bulk == sorted(bulk)
    for b, s in zip(bulk, single, strict=True):
        assert _stored(store, b) == _stored(store, s), (b, s)


def test_a_sqlite_bulk_names_only_the_columns_its_rows_set():
    """SQLite's bulk INSERT names the optional columns some row of the batch sets, and no other:
    each column a row carries costs it time, NULL or not (the rows it stores are the test above)."""
    from tenure.engine.rows import NewJob
    from tenure.engine.sqlite.bulk_insert import _insert_rows

    def columns(sql: str) -> list[str]:
        return re.search(r"INSERT INTO tenure_jobs \(([^)]*)\)", sql).group(1).split(", ")

    always = ["state", "attempts", "lease_generation", "updated_at", "id", "kind", "payload", "run_at",
              "max_attempts", "created_at", "queue", "priority", "policy"]
    plain = [NewJob(f"id{i}", "k", None, "default", 0, None, 0, 5) for i in range(3)]
    sql, rows = _insert_rows(plain, 1000)
    assert columns(sql) == always
    assert rows[0] == ("id0", "k", None, 1000, 5, 1000, "default", 0, "standard")
    plain[1].tags, plain[2].retry_backoff = '["a"]', False
    sql, rows = _insert_rows(plain, 1000)
    assert columns(sql) == [*always, "retry_backoff", "tags"]
    assert [r[9:] for r in rows] == [(None, None), (None, '["a"]'), (0, None)]


@pytest.mark.parametrize("policy", ["short", "stately", "exclusive"])
def test_bulk_into_a_deduplicating_queue_keeps_one_job(store, policy):
    store.queues.create("once", policy=policy)
    ids = store.jobs.enqueue_many([{"kind": "k", "payload": i, "queue": "once"} for i in range(N)])
    assert len(set(ids)) == 1 and [j.id for j in jobs_in(store, "once")] == ids[:1]


def test_bulk_into_a_singleton_queue_runs_one_at_a_time(store):
    store.queues.create("one", policy="singleton")
    ids = store.jobs.enqueue_many([{"kind": "k", "payload": i, "queue": "one"} for i in range(N)])
    assert len(set(ids)) == N
    assert raw(store, "SELECT DISTINCT policy, singleton_key FROM tenure_jobs") == [("singleton", "")]
    assert len(store.jobs.claim_many("k", owner="w", limit=10)) == 1


def test_bulk_with_keys_and_ids_answers_the_existing_jobs(store):
    first = store.jobs.enqueue_many([{"kind": "k", "queue": "q", "singleton_key": f"key{i % 10}",
                                      "singleton_for": 3600} for i in range(N)])
    assert len(set(first)) == 10 and len(jobs_in(store, "q")) == 10
    mine = [{"kind": "k", "id": f"job-{i}", "queue": "p"} for i in range(N)]
    assert store.jobs.enqueue_many(mine) == [f"job-{i}" for i in range(N)]
    assert store.jobs.enqueue_many(mine) == [f"job-{i}" for i in range(N)]  # idempotent
    assert len(jobs_in(store, "p")) == N


def test_a_bad_item_mid_stream_writes_nothing_and_spares_the_outbox(store):
    # 2 000 rows: well past the first chunk the driver sends, so the server has rows to undo
    good = [{"kind": "k", "payload": i, "queue": "bulk"} for i in range(2_000)]
    for bad, code in (({"kind": "k", "payload": float("nan")}, "TN1002"), ({"kind": "bad name"}, "TN1001"),
                      ({"kind": "k", "queue": "bulk", "meta": {"x": "y" * 5000}}, "TN1001"),
                      ({"kind": "k", "priority": 2**40}, "TN1001"), ({"kind": "k", "priority": True}, "TN1002"),
                      ({"kind": "k", "queue": 7}, "TN1002"), ({"kind": None}, "TN1002")):
        with refused(code):
            store.jobs.enqueue_many([*good, bad, *good])
    assert store.jobs.counts()["pending"] == 0
    with store.transaction() as tx:
        before = tx.jobs.enqueue("k", queue="bulk")
        with refused("TN1002"):
            tx.jobs.enqueue_many([*good, {"kind": "k", "payload": object()}])
        after = tx.jobs.enqueue("k", queue="bulk")  # the transaction is still usable
    assert sorted(j.id for j in jobs_in(store, "bulk")) == sorted([before, after])


def test_postgres_streams_with_copy(store, monkeypatch):
    """On PostgreSQL such a bulk never takes the INSERT path (it is the COPY)."""
    if store.dialect != "postgres":
        pytest.skip("SQLite inserts a bulk in one transaction (no COPY)")
    from tenure.engine.postgres.session import PostgresSession

    def refuse(*_a, **_k):
        raise AssertionError("job_insert called for a streamable bulk")

    monkeypatch.setattr(PostgresSession, "job_insert", refuse)
    ids = store.jobs.enqueue_many([{"kind": "k", "queue": "q"} for _ in range(N)])
    assert sorted(j.id for j in jobs_in(store, "q")) == sorted(ids)


def test_bulk_in_a_transaction_commits_with_it(store):
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.jobs.enqueue_many([{"kind": "k", "queue": "tx"} for _ in range(N)])
        raise RuntimeError("roll back")
    assert jobs_in(store, "tx") == []
    with store.transaction() as tx:
        ids = tx.jobs.enqueue_many([{"kind": "k", "queue": "tx"} for _ in range(N)])
        ids += tx.jobs.enqueue_many([{"kind": "k", "queue": "tx"} for _ in range(N)])  # twice in one
    assert sorted(j.id for j in jobs_in(store, "tx")) == sorted(ids) and len(set(ids)) == 2 * N


def test_streamed_jobs_are_claimed_exactly_once(store):
    ids = store.jobs.enqueue_many([{"kind": "k", "payload": i, "queue": "q"} for i in range(5 * N)])
    seen: list[str] = []
    while got := store.jobs.claim_many("k", owner="w", limit=37):
        seen += [c.job.id for c in got]
        assert store.jobs.complete_many([(c.lease, None) for c in got]) == [None] * len(got)
    assert sorted(seen) == sorted(ids)
    assert raw(store, "SELECT count(*), min(attempts), max(attempts) FROM tenure_jobs WHERE state = 'done'") == [
        (5 * N, 1, 1)]


def test_processes_bulk_enqueueing_at_once(engine_url):
    """Four processes stream a bulk into one plain queue and one 'short' queue at the same
    instant: every plain job is stored once, and the 'short' queue holds one job, whose id
    every process was answered for every item."""
    setup = tenure.connect(engine_url)
    try:
        setup.queues.create("short", policy="short")
        for queue in ("plain", "short"):
            results = at_once(_procs.enqueue_bulk, (engine_url, queue, N))
            stored = sorted(j.id for j in jobs_in(setup, queue))
            answered = [i for ids, _ in results for i in ids]
            if queue == "plain":
                assert stored == sorted(answered) and len(stored) == 4 * N
            else:
                assert len(stored) == 1 and set(answered) == set(stored)
    finally:
        setup.close()
