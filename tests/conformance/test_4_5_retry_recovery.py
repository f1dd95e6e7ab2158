"""spec §4 (retry and dead-lettering) and §5 (recovery)."""

from __future__ import annotations

import random as random_module

import pytest

from ._support import Rand, claim1, refused

BASE, CAP = 1000, 60_000


def expected_backoff(attempts: int, r: float) -> float:
    """The 4.5 formula, exactly as the seed states it."""
    return min(CAP, BASE * 2 ** (attempts - 1)) * (0.5 + r / 2)


def _fail_once(jobs, clock, job_id, error="boom", **claim_kwargs):
    clock.set(max(clock(), jobs.get(job_id).run_at))
    lease = claim1(jobs, **claim_kwargs).lease
    jobs.fail(lease, error)
    return jobs.get(job_id)


# -- §4 ----------------------------------------------------------------------------------------------


def test_4_1_fail_records_the_message(jobs):
    """spec 4.1: fail(lease, RuntimeError("boom")) → last_error == "boom"; a str
    error is recorded as given."""
    a = jobs.enqueue("k", id="a")
    b = jobs.enqueue("k", id="b")
    jobs.fail(claim1(jobs).lease, RuntimeError("boom"))
    jobs.fail(claim1(jobs).lease, "plain message")
    assert jobs.get(a).last_error == "boom"
    assert jobs.get(b).last_error == "plain message"


def test_4_2_retry_is_failed_with_backoff_run_at(jobs, clock, rand):
    """spec 4.2: while attempts < max_attempts a failure makes the job failed with
    run_at = now + backoff(attempts) (the 4.5 formula, injected clock and random)."""
    rand.value = 0.5
    job_id = jobs.enqueue("k", max_attempts=4)
    for attempts in (1, 2, 3):
        clock.set(max(clock(), jobs.get(job_id).run_at) + 3)
        lease = claim1(jobs).lease
        clock.advance(100)
        now = clock()
        jobs.fail(lease, f"fail {attempts}")
        job = jobs.get(job_id)
        assert (job.state, job.attempts) == ("failed", attempts)
        assert job.run_at == now + expected_backoff(attempts, 0.5)  # 750, 1500, 3000: exact integers
        assert (job.lease_until, job.lease_owner) == (None, None)


def test_4_2_failed_job_is_claimable_again_at_run_at(jobs, clock):
    """spec 4.2: the failed job waits for its run_at, then is claimed again."""
    job_id = jobs.enqueue("k")
    jobs.fail(claim1(jobs).lease, "x")
    run_at = jobs.get(job_id).run_at
    clock.set(run_at - 1)
    assert jobs.claim(["k"], owner="w") is None
    clock.set(run_at)
    claim = claim1(jobs)
    assert (claim.job.id, claim.job.attempts, claim.lease.generation) == (job_id, 2, 2)


def test_4_3_exhausted_job_is_dead_forever(jobs, clock):
    """spec 4.3: max_attempts=1, one fail → dead, terminal, never claimed again."""
    job_id = jobs.enqueue("k", max_attempts=1)
    jobs.fail(claim1(jobs).lease, "boom")
    job = jobs.get(job_id)
    assert (job.state, job.attempts, job.lease_until, job.lease_owner) == ("dead", 1, None, None)
    for step in (0, 1, 60_000, 10**10):
        clock.advance(step)
        assert jobs.claim(["k"], owner="w") is None
    assert jobs.get(job_id) == job
    assert jobs.counts()["dead"] == 1


def test_4_3_dead_after_exactly_max_attempts(jobs, clock):
    """spec 4.3: with max_attempts=3 the job is failed twice, then dead."""
    job_id = jobs.enqueue("k", max_attempts=3)
    states = [_fail_once(jobs, clock, job_id).state for _ in range(3)]
    assert states == ["failed", "failed", "dead"]


def test_4_4_dead_job_keeps_last_error_and_checkpoints(jobs, clock, target):
    """spec 4.4: a dead job keeps its last_error and its checkpoint rows (read back
    by the next attempt after an operator's requeue)."""
    job_id = jobs.enqueue("k", max_attempts=1)
    lease = claim1(jobs).lease
    jobs.checkpoints(lease).save("a", {"step": 1})
    jobs.fail(lease, "final")
    job = jobs.get(job_id)
    assert (job.state, job.last_error) == ("dead", "final")
    assert target.checkpoint_rows(job_id) == [("a", 1)]
    assert jobs.requeue(job_id) is True
    again = claim1(jobs).lease
    assert jobs.checkpoints(again).load() == {"a": {"step": 1}}


@pytest.mark.parametrize(
    ("r", "attempt", "low", "high"),
    [
        (0.0, 1, 500, 500),
        (0.999999, 1, 999, 1000),
        (0.0, 2, 1000, 1000),
        (0.5, 3, 3000, 3000),
        (0.0, 7, 30_000, 30_000),  # 1000·2^6 = 64000 → capped at 60000
        (0.0, 8, 30_000, 30_000),
        (0.999999, 9, 59_999, 60_000),
        (0.0, 20, 30_000, 30_000),
    ],
)
def test_4_5_backoff_formula(jobs, clock, rand, r, attempt, low, high):
    """spec 4.5: backoff = min(60000, 1000·2^(attempts−1)) · (0.5 + random()/2):
    random 0 → half, random ≈1 → all of it, and capped from attempt 7 on."""
    job_id = jobs.enqueue("k", max_attempts=attempt + 1)
    rand.value = 0.0
    for _ in range(attempt - 1):
        _fail_once(jobs, clock, job_id)
    clock.set(max(clock(), jobs.get(job_id).run_at))
    lease = claim1(jobs).lease
    assert lease.attempt == attempt
    rand.value = r
    now = clock()
    jobs.fail(lease, "x")
    delay = jobs.get(job_id).run_at - now
    assert low <= delay <= high, (attempt, r, delay)


def test_4_5_random_drawn_per_failure(jobs, clock, rand):
    """spec 4.5: the jitter comes from the injected random (it is consulted)."""
    rand.calls = 0
    jobs.enqueue("k")
    jobs.fail(claim1(jobs).lease, "x")
    assert rand.calls >= 1


def test_4_6_random_injected_at_connect_is_deterministic(open_store, store, clock):
    """spec 4.6: a random injected only at connect gives a deterministic run_at;
    two stores with the same seeded source produce the same schedule."""
    schedules = []
    for run in range(2):
        seeded = random_module.Random(1234).random
        s = open_store(random_=seeded)
        jobs = s.jobs
        job_id = jobs.enqueue(f"det{run}", id=f"det-{run}", max_attempts=6)
        delays = []
        for _ in range(4):
            clock.set(max(clock(), jobs.get(job_id).run_at))
            lease = jobs.claim([f"det{run}"], owner="w").lease
            now = clock()
            jobs.fail(lease, "x")
            delays.append(jobs.get(job_id).run_at - now)
        schedules.append(delays)
    reference = random_module.Random(1234)
    expected = [expected_backoff(a, reference.random()) for a in (1, 2, 3, 4)]
    assert schedules[0] == schedules[1]
    assert all(abs(d - e) <= 1 for d, e in zip(schedules[0], expected, strict=True)), (schedules, expected)


def test_4_6_store_random_differs_by_source(open_store, store, clock):
    """spec 4.6: the store's injected random decides the jitter (0 vs ≈1)."""
    delays = {}
    for value in (0.0, 0.999999):
        s = open_store(random_=Rand(value))
        job_id = s.jobs.enqueue(f"r{value}", id=f"r-{value}")
        now = clock()
        s.jobs.fail(s.jobs.claim([f"r{value}"], owner="w").lease, "x")
        delays[value] = s.jobs.get(job_id).run_at - now
    assert delays[0.0] == 500
    assert 999 <= delays[0.999999] <= 1000


# -- §5 ----------------------------------------------------------------------------------------------


def test_5_1_recovery_is_the_next_claim(jobs, clock):
    """spec 5.1: worker A vanishes; after its lease, B's plain claim gets the job
    (attempts 2) — no sweeper involved."""
    job_id = jobs.enqueue("k", {"n": 1})
    a = claim1(jobs, owner="A", lease_ms=5000).lease
    clock.set(a.expires_at - 1)
    assert jobs.claim(["k"], owner="B") is None
    clock.set(a.expires_at)
    b = claim1(jobs, owner="B")
    assert (b.job.id, b.job.attempts, b.job.lease_owner, b.lease.generation) == (job_id, 2, "B", 2)
    assert jobs.counts()["leased"] == 1
    jobs.complete(b.lease, "B")
    assert jobs.get(job_id).result == "B"


def test_5_2_reclaimed_attempt_reads_predecessors_checkpoints(jobs, clock):
    """spec 5.2: generation 1 saves a; generation 2's checkpoint store lists a."""
    jobs.enqueue("k", id="run")
    g1 = claim1(jobs, lease_ms=1000).lease
    jobs.checkpoints(g1).save("a", {"from": 1})
    clock.set(g1.expires_at)
    g2 = claim1(jobs).lease
    assert g2.generation == 2
    cp2 = jobs.checkpoints(g2)
    assert cp2.load() == {"a": {"from": 1}}
    cp2.save("b", {"from": 2})
    assert cp2.load() == {"a": {"from": 1}, "b": {"from": 2}}


@pytest.mark.parametrize("call", ["renew", "complete", "fail", "checkpoint", "cancel"])
def test_5_3_reclaim_fences_the_displaced_attempt_at_once(jobs, clock, call):
    """spec 5.3: after B claims, each of A's settling calls raises TN2066 (never a
    silent drop) and changes nothing."""
    job_id = jobs.enqueue("k")
    a = claim1(jobs, owner="A", lease_ms=1000).lease
    clock.set(a.expires_at)
    b = claim1(jobs, owner="B").lease
    before = jobs.get(job_id)
    calls = {
        "renew": lambda: jobs.renew(a),
        "complete": lambda: jobs.complete(a, "A"),
        "fail": lambda: jobs.fail(a, "A"),
        "checkpoint": lambda: jobs.checkpoints(a).save("from-a", 1),
        "cancel": lambda: jobs.cancel(job_id, lease=a),
    }
    with refused("TN2066"):
        calls[call]()
    assert jobs.get(job_id) == before
    assert jobs.checkpoints(b).load() == {}
    jobs.complete(b, "B")
    assert jobs.get(job_id).result == "B"


def test_5_4_stale_complete_cannot_prune_live_checkpoints(jobs, clock, target):
    """spec 5.4: generation 2's row b survives generation 1's refused complete;
    generation 2's own complete then prunes everything at or below 2."""
    job_id = jobs.enqueue("k")
    g1 = claim1(jobs, lease_ms=1000).lease
    jobs.checkpoints(g1).save("a", 1)
    clock.set(g1.expires_at)
    g2 = claim1(jobs).lease
    jobs.checkpoints(g2).save("b", 2)
    with refused("TN2066"):
        jobs.complete(g1, "stale")
    assert target.checkpoint_rows(job_id) == [("a", 1), ("b", 2)]
    assert jobs.checkpoints(g2).load() == {"a": 1, "b": 2}
    jobs.complete(g2, "live")
    assert jobs.get(job_id).result == "live"
    assert target.checkpoint_rows(job_id) == []


@pytest.mark.parametrize("refusal", ["expired", "superseded"])
def test_5_4_refused_complete_keeps_checkpoints_and_writes_no_result(jobs, clock, target, refusal):
    """spec 5.4 (with 7.4): a refused complete writes no result and prunes nothing;
    the live complete stores the result, marks done and prunes in one go."""
    jobs.enqueue("k", id="j", max_attempts=3)
    g1 = claim1(jobs, lease_ms=1000).lease
    jobs.checkpoints(g1).save("a", 1)
    clock.set(g1.expires_at)
    if refusal == "superseded":
        claim1(jobs, lease_ms=1000)
    with refused("TN2067" if refusal == "expired" else "TN2066"):
        jobs.complete(g1, "refused")
    assert jobs.get("j").result is None and jobs.get("j").state == "leased"
    assert target.checkpoint_rows("j") == [("a", 1)]


def test_5_4_fail_keeps_checkpoints_for_the_retry(jobs, clock, target):
    """spec 5.4 (with 5.2): a failed attempt's checkpoints stay for the next one."""
    jobs.enqueue("k", id="j", max_attempts=3)
    g1 = claim1(jobs).lease
    jobs.checkpoints(g1).save("a", 1)
    jobs.fail(g1, "x")
    assert target.checkpoint_rows("j") == [("a", 1)]
    clock.set(jobs.get("j").run_at)
    g2 = claim1(jobs).lease
    assert jobs.checkpoints(g2).load() == {"a": 1}
    jobs.complete(g2, "ok")
    assert target.checkpoint_rows("j") == []


def test_5_5_default_lease_is_30_seconds(jobs, clock):
    """spec 5.5: a claim without lease_ms expires at now + 30000, and recovery
    takes exactly that long."""
    job_id = jobs.enqueue("k")
    lease = claim1(jobs).lease
    assert lease.expires_at == clock() + 30_000
    assert jobs.get(job_id).lease_until == clock() + 30_000
    clock.advance(29_999)
    assert jobs.claim(["k"], owner="other") is None
    clock.advance(1)
    assert claim1(jobs, owner="other").job.id == job_id
