"""Batched settlements classify each lease by its token, even when one batch holds two leases of
the same job (a worker that reclaimed its own stalled attempt; spec 6.19, 3.17)."""

from __future__ import annotations

from tenure.errors import LeaseNotHeld


def test_stale_and_live_lease_of_one_job_in_one_batch(any_store, clock):
    jobs = any_store.jobs
    jobs.enqueue("k", None, id="j")
    stale = jobs.claim("k", owner="w", lease_ms=1000).lease
    clock.advance(1000)
    live = jobs.claim("k", owner="w", lease_ms=1000).lease
    out = jobs.complete_many([(stale, "old"), (live, "new")])
    # D2: once the replacing attempt settled, the stale one is told "not leased" (TN2065)
    assert isinstance(out[0], LeaseNotHeld) and out[1] is None
    assert jobs.get("j").result == "new"


def test_stale_and_live_lease_of_one_job_in_one_fail_batch(any_store, clock):
    jobs = any_store.jobs
    jobs.enqueue("k", None, id="j")
    stale = jobs.claim("k", owner="w", lease_ms=1000).lease
    clock.advance(1000)
    live = jobs.claim("k", owner="w", lease_ms=1000).lease
    out = jobs.fail_many([(live, "boom"), (stale, "old boom")])
    assert out[0].state == "failed" and out[0].last_error == "boom"
    assert isinstance(out[1], LeaseNotHeld)
