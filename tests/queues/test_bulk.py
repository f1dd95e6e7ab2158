"""Bulk enqueue: ``enqueue_many`` validates everything first and writes in one
transaction (SQLite: one executemany; PostgreSQL: one multi-row statement per chunk). The rate is
printed (``-s``); the long measurement is opt-in (``-m soak``)."""

from __future__ import annotations

import time

import pytest

import tenure

from ._helpers import jobs_in, refused


def _measure(url: str, n: int, spec=lambda i: {}) -> float:
    """Rows per second of one ``enqueue_many`` of ``n`` jobs (``spec(i)``: extra keywords)."""
    store = tenure.connect(url)
    try:
        specs = [{"kind": "k", "payload": {"i": i}, "queue": "bulk", **spec(i)} for i in range(n)]
        start = time.perf_counter()
        ids = store.jobs.enqueue_many(specs)
        elapsed = time.perf_counter() - start
        assert len(set(ids)) == n and None not in ids
        assert store.jobs.counts()["pending"] >= n
        return n / elapsed
    finally:
        store.close()


def test_enqueue_many_writes_every_row_and_reports_its_rate(engine_url):
    n = 5_000
    rate = _measure(engine_url, n)
    print(f"enqueue_many {n} rows: {rate:,.0f} rows/s")
    assert rate > 0


def test_enqueue_many_is_all_or_nothing(store):
    specs = [{"kind": "k", "payload": i, "queue": "bulk"} for i in range(100)]
    with refused("TN1002"):
        store.jobs.enqueue_many([*specs, {"kind": "k", "payload": object()}])
    with refused("TN1001"):
        store.jobs.enqueue_many([*specs, {"kind": "k", "queue": "bulk", "retention": -1}])
    assert store.jobs.counts()["pending"] == 0
    ids = store.jobs.enqueue_many([*specs, {"kind": "k", "id": "dup", "queue": "bulk"},
                                   {"kind": "k", "id": "dup", "queue": "bulk", "payload": "second"}])
    assert ids[-2:] == ["dup", "dup"] and store.jobs.get("dup").payload is None
    assert len(jobs_in(store, "bulk")) == 101


def test_enqueue_many_into_a_new_queue_resolves_its_defaults_once(store):
    store.queues.create("tuned", max_attempts=2, timeout=5)
    ids = store.jobs.enqueue_many([{"kind": "k", "queue": q} for q in ("tuned", "fresh", "tuned")])
    assert [(store.jobs.get(i).max_attempts, store.jobs.get(i).timeout_ms) for i in ids] == [
        (2, 5000), (5, None), (2, 5000)]


@pytest.mark.soak
def test_enqueue_many_rate_at_scale(engine_url):
    n = 100_000
    plain = _measure(engine_url, n)
    keyed = _measure(engine_url, n, lambda i: {"queue": "keyed", "singleton_key": f"k{i}", "singleton_for": 3600})
    print(f"enqueue_many {n:,} rows: plain {plain:,.0f} rows/s, keyed+throttled {keyed:,.0f} rows/s")
