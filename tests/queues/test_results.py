"""Results and batch claiming: the completion value is stored (``job.result``),
``handle.result()`` waits for it across the store, and ``claim_many`` leases each job with its own
fence (spec 3.3 per job, 6.4 for the handler's return value)."""

from __future__ import annotations

import pytest

import tenure
from tenure.app import Handle

from ._helpers import refused


def test_claim_many_gives_each_job_its_own_lease_and_settles_in_a_batch(store, clock):
    ids = store.jobs.enqueue_many([{"kind": "k", "payload": i} for i in range(5)])
    got = store.jobs.claim_many("k", owner="w", limit=3, lease_ms=10_000)
    assert len(got) == 3 and len({c.lease.token for c in got}) == 3
    assert all((c.job.state, c.job.attempts, c.lease.generation, c.lease.expires_at) ==
               ("leased", 1, 1, clock() + 10_000) for c in got)
    outcomes = store.jobs.complete_many([(c.lease, {"n": c.job.payload}) for c in got])
    assert outcomes == [None, None, None]
    assert [store.jobs.get(c.job.id).result for c in got] == [{"n": c.job.payload} for c in got]
    # Stale leases in a batch are refused by code, each for its own reason; the live one settles.
    rest = store.jobs.claim_many("k", owner="w", limit=5, lease_ms=1000)
    assert len(rest) == 2
    clock.advance(1000)
    fresh = store.jobs.claim("k", owner="w2")  # recovers one of the two expired leases
    outcomes = store.jobs.complete_many([(c.lease, "late") for c in rest])
    assert sorted(o.code for o in outcomes) == ["TN2066", "TN2067"]  # superseded, expired
    assert store.jobs.complete_many([(fresh.lease, "ok")]) == [None]
    assert store.jobs.get(fresh.job.id).result == "ok"
    assert {c.job.id for c in rest} <= set(ids)


def test_handle_result_waits_for_the_worker_and_raises_by_code(live_store):
    app = tenure.App(store=live_store)

    @app.task(name="add")
    def add(a, b):
        return {"sum": a + b}

    @app.task(name="explode", max_attempts=1)
    def explode():
        raise ValueError("kaboom")

    worker = app.create_worker(concurrency=2, poll_interval=0.05)
    worker.start()
    try:
        assert add.enqueue(2, 3).result(timeout=20) == {"sum": 5}
        with refused("TN2080") as ei:
            explode.enqueue().result(timeout=20)
        assert ei.value.details["last_error"] == "kaboom"
    finally:
        worker.stop(grace=5)


def test_handle_result_timeout_and_cancel(store):
    jid = store.jobs.enqueue("never", None)
    handle = Handle(jid, store)
    with refused("TN2082"):
        handle.result(timeout=0.05)
    assert handle.cancel() is True
    with refused("TN2081"):
        handle.result(timeout=1)
    with pytest.raises(ValueError):
        Handle(None, store).result()
