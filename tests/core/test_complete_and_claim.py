"""The worker's settle-and-refill: ``jobs.complete_and_claim`` settles a batch of fenced
completions and claims the slots it frees in ONE transaction. Each completion is fenced exactly as
``complete_many`` fences it (spec §3: a stale lease is refused by code, never silently), and
the claim is ``claim_many``'s; both engines."""

from __future__ import annotations

import dataclasses

from tenure.errors import LeaseSuperseded


def test_completions_are_fenced_and_the_freed_slots_claimed_in_one_call(any_store):
    jobs = any_store.jobs
    for i in range(4):
        jobs.enqueue("k", {"i": i}, id=f"j{i}")
    a, b = jobs.claim_many("k", owner="w", limit=2)
    forged = dataclasses.replace(b.lease, token="not-" + b.lease.token)
    errors, claims = jobs.complete_and_claim([(a.lease, '"ok"'), (forged, None)], ["k"], owner="w",
                                             limit=2, lease_ms=30_000)
    assert errors[0] is None and isinstance(errors[1], LeaseSuperseded)  # refused by code (3.9)
    assert jobs.get(a.job.id).state == "done" and jobs.get(a.job.id).result == "ok"
    assert jobs.get(b.job.id).state == "leased"  # the forged completion changed nothing
    assert sorted(c.job.id for c in claims) == ["j2", "j3"]
    assert all(jobs.get(c.job.id).state == "leased" and c.lease.generation == 1 for c in claims)


def test_a_zero_limit_only_settles(any_store):
    jobs = any_store.jobs
    jobs.enqueue("k", None, id="x")
    jobs.enqueue("k", None, id="y")
    (c,) = jobs.claim_many("k", owner="w", limit=1)
    errors, claims = jobs.complete_and_claim([(c.lease, None)], ["k"], owner="w", limit=0, lease_ms=30_000)
    assert errors == [None] and claims == []
    assert jobs.counts()["done"] == 1 and jobs.counts()["pending"] == 1
