"""Bounded reclaim: tenure's decision extending spec 2.7, 4.3, 5.1 and 3.16
(docs/guarantees.md, "Liveness: bounded reclaim and dead letters").

Recovery is still the next claim (5.1), but an expired lease on a job that has used its last
attempt is settled ``dead`` by that claim (``last_error`` opening with TN2084, dead-lettered like
any dead job) instead of being run again; and a job leased again from an expired lease comes
alone, never in a batch with other jobs. Injected clock, no sleeps.
"""

from __future__ import annotations

import pytest

from tenure.errors import WorkerLost

from ._support import claim1, refused


def _lose(jobs, clock, job_id, lease_ms=1000):
    """Claim ``job_id`` and let its worker vanish: the clock moves to the lease's expiry."""
    claim = claim1(jobs, owner="lost", lease_ms=lease_ms)
    assert claim.job.id == job_id
    clock.set(claim.lease.expires_at)
    return claim


def test_a_spent_expired_lease_is_settled_dead_not_run(jobs, clock):
    """attempts == max_attempts and the lease expired: the next claim answers nothing and the job
    is dead with a TN2084 last_error; attempts never pass max_attempts (2.7, 4.3)."""
    job_id = jobs.enqueue("k", max_attempts=1)
    lost = _lose(jobs, clock, job_id)
    clock.advance(-1)  # a live lease on the last attempt is left alone (3.2)
    assert jobs.claim(["k"], owner="next") is None
    assert jobs.get(job_id).state == "leased"
    clock.advance(1)
    assert jobs.claim(["k"], owner="next") is None
    job = jobs.get(job_id)
    assert (job.state, job.attempts, job.max_attempts) == ("dead", 1, 1)
    assert (job.lease_until, job.lease_owner, job.lease_generation) == (None, None, 1)
    assert job.last_error.startswith(f"{WorkerLost.code}: worker lost on its final attempt (1 of 1)")
    assert "lost" in job.last_error  # names the lease owner that vanished
    assert job.updated_at == clock()
    assert jobs.counts()["dead"] == 1
    # The lost attempt, should it still run somewhere, is refused by code and changes nothing.
    with refused("TN2065"):
        jobs.complete(lost.lease, "late")
    assert jobs.get(job_id) == job
    assert jobs.claim(["k"], owner="again") is None  # terminal (4.3)


def test_a_lease_is_reclaimed_until_the_last_attempt_then_dead(jobs, clock):
    """max_attempts=3 and a worker lost every time: runs 1, 2, 3, then dead at 3/3."""
    job_id = jobs.enqueue("k", max_attempts=3)
    for attempt in (1, 2, 3):
        claim = _lose(jobs, clock, job_id)
        assert (claim.job.attempts, claim.reclaimed) == (attempt, attempt > 1)
    assert jobs.claim(["k"], owner="next") is None
    job = jobs.get(job_id)
    assert (job.state, job.attempts) == ("dead", 3)
    assert "(3 of 3)" in job.last_error


def test_a_reclaimed_job_comes_alone(jobs, clock):
    """An expired lease leased again is answered alone, flagged ``reclaimed``; the due jobs come
    with the next claim, unflagged."""
    crasher = jobs.enqueue("k", id="crasher", max_attempts=5)
    _lose(jobs, clock, crasher)
    healthy = [jobs.enqueue("k", id=f"h{i}") for i in range(3)]
    got = jobs.claim_many(["k"], owner="w", limit=10)
    assert [(c.job.id, c.job.attempts, c.reclaimed) for c in got] == [("crasher", 2, True)]
    rest = jobs.claim_many(["k"], owner="w", limit=10)
    assert sorted(c.job.id for c in rest) == healthy
    assert not any(c.reclaimed for c in rest)


def test_two_expired_leases_come_one_per_claim(jobs, clock):
    a = jobs.enqueue("k", id="a")
    b = jobs.enqueue("k", id="b")
    first = jobs.claim_many(["k"], owner="lost", limit=2, lease_ms=1000)
    assert len(first) == 2
    clock.set(first[0].lease.expires_at)
    got = [jobs.claim_many(["k"], owner="w", limit=10) for _ in range(3)]
    assert [[c.job.id for c in batch] for batch in got] == [[a], [b], []]
    assert all(c.reclaimed for batch in got for c in batch)


def test_a_spent_lease_does_not_hold_back_due_jobs(jobs, clock):
    """Settling a spent lease dead runs nothing, so the same claim still leases due jobs."""
    spent = jobs.enqueue("k", id="spent", max_attempts=1)
    _lose(jobs, clock, spent)
    due = [jobs.enqueue("k", id=f"d{i}") for i in range(2)]
    got = jobs.claim_many(["k"], owner="w", limit=10)
    assert sorted(c.job.id for c in got) == due
    assert jobs.get(spent).state == "dead"


def test_only_a_claimer_of_the_kind_settles_it(jobs, clock):
    """A claimer without the kind never touches its row (3.4), even a spent expired lease."""
    job_id = jobs.enqueue("k", max_attempts=1)
    _lose(jobs, clock, job_id)
    assert jobs.claim(["other"], owner="w") is None
    assert jobs.get(job_id).state == "leased"
    assert jobs.claim(["k"], owner="w") is None
    assert jobs.get(job_id).state == "dead"


def test_a_spent_lease_is_dead_lettered_exactly_once(store, jobs, clock, open_store):
    """Dead like any dead job: copied to the queue's dead-letter queue in the same transaction,
    once, whichever of two stores (two processes) meets the row."""
    store.queues.create("q", dead_letter="q.dead", max_attempts=1)
    job_id = jobs.enqueue("k", {"n": 1}, queue="q")
    claim = claim1(jobs, owner="lost", lease_ms=1000, queues="q")
    clock.set(claim.lease.expires_at)
    other = open_store()
    assert other.jobs.claim(["k"], owner="b", queues="q") is None
    assert jobs.claim(["k"], owner="a", queues="q") is None
    (copy,) = jobs.page(queue="q.dead").items
    assert (copy.origin_id, copy.payload, copy.state) == (job_id, {"n": 1}, "pending")
    assert copy.last_error == jobs.get(job_id).last_error
    assert copy.last_error.startswith(WorkerLost.code)


@pytest.mark.parametrize("limit", [{"concurrency_limit": 1}, {"group_limit": 1}])
def test_a_limited_queue_reclaims_within_its_limit(store, jobs, clock, limit):
    """A reclaim is a claim: a concurrency or group limit holds for it, and it comes alone."""
    store.queues.create("lim", **limit)
    a = jobs.enqueue("k", id="a", queue="lim", group_key="g")
    _lose(jobs, clock, a)
    jobs.enqueue("k", id="b", queue="lim", group_key="g")
    got = jobs.claim_many(["k"], owner="w", limit=10, queues="lim")
    assert [(c.job.id, c.reclaimed) for c in got] == [("a", True)]
    assert jobs.claim_many(["k"], owner="w", limit=10, queues="lim") == []  # the limit is full
    jobs.complete(got[0].lease, "ok")
    assert [c.job.id for c in jobs.claim_many(["k"], owner="w", limit=10, queues="lim")] == ["b"]


def test_a_spent_lease_in_a_limited_queue_is_settled_dead(store, jobs, clock):
    store.queues.create("lim", concurrency_limit=2)
    job_id = jobs.enqueue("k", queue="lim", max_attempts=1)
    _lose(jobs, clock, job_id)
    assert jobs.claim_many(["k"], owner="w", limit=10, queues="lim") == []
    assert jobs.get(job_id).state == "dead"
