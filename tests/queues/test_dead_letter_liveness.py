"""Dead letters cannot re-run a job behind its owner's back, nor run away (
docs/queues.md, "Dead letters and redrive"; docs/guarantees.md, "Liveness: bounded reclaim and
dead letters").

- A dead-letter copy is claimed only by a claim that names its queue: a default worker (no
  ``queues``) never runs it, so a ``max_attempts=1`` job ("never charge twice") runs once.
- A copy keeps the dead job's attempt budget unless its dead-letter queue sets one.
- Dead-letter queues that would form a cycle, of any length, are refused with TN3003.
"""

from __future__ import annotations

import pytest

from tenure.errors import DeadLetterCycle
from tests.worker._wk import wait_for

from ._helpers import jobs_in, refused


def _charge_fails(store, **enqueue):
    """A max_attempts=1 job whose handler always raises, under a default worker (no queues);
    answers (its id, the ledger of runs, the worker)."""
    runs: list[str] = []

    def charge(payload, ctx):
        runs.append(ctx.job.id)
        raise RuntimeError("card declined")

    jid = store.jobs.enqueue("charge", {"amount": 12}, queue="payments", max_attempts=1, **enqueue)
    worker = store.jobs.create_worker(
        {"charge": charge}, concurrency=4, poll_interval=0.01, maintenance=False
    ).start()
    return jid, runs, worker


def test_a_max_attempts_1_job_runs_once_under_a_default_worker(store):
    store.queues.create("payments", dead_letter="payments.dead")
    jid, runs, worker = _charge_fails(store)
    try:
        wait_for(lambda: store.jobs.get(jid).state == "dead", what="the charge to die")
        (copy,) = wait_for(lambda: jobs_in(store, "payments.dead"), what="its dead-letter copy")
        # The default worker has a free slot and the copy's kind; it still never claims it.
        assert store.jobs.claim_many("charge", owner="default", limit=10) == []
        worker.stop()
    finally:
        worker.stop()
    assert runs == [jid]
    copy = store.jobs.get(copy.id)
    assert (copy.state, copy.attempts, copy.max_attempts) == ("pending", 0, 1)  # the dead job's budget


def test_a_per_job_dead_letter_copy_is_not_claimed_by_default_either(store):
    """A job-level dead_letter names a queue no registry entry calls a dead-letter queue: the copy
    itself is still reserved to claims that name its queue."""
    jid, runs, worker = _charge_fails(store, dead_letter="special")
    try:
        wait_for(lambda: len(jobs_in(store, "special")) == 1, what="the copy")
        assert store.jobs.claim_many("charge", owner="default", limit=10) == []
    finally:
        worker.stop()
    assert runs == [jid]
    # Naming the queue takes the copy (a deliberate dead-letter consumer); a plain job enqueued to
    # that queue is still claimed by anyone.
    plain = store.jobs.enqueue("charge", None, queue="special")
    assert [c.job.id for c in store.jobs.claim_many("charge", owner="default", limit=10)] == [plain]
    (named,) = store.jobs.claim_many("charge", owner="consumer", limit=10, queues="special")
    assert named.job.origin_id == jid


def test_a_dead_letter_queue_is_claimed_only_by_name(store):
    """Everything in a queue the registry names as a dead-letter queue waits for a consumer that
    names it; a dead-letter queue's own max_attempts still sets the copies' budget."""
    store.queues.create("q", dead_letter="q.dead", max_attempts=1)
    store.queues.create("q.dead", max_attempts=3)
    store.jobs.enqueue("k", None, queue="q")
    (claim,) = store.jobs.claim_many("k", owner="w", limit=1, queues="q")
    store.jobs.fail(claim.lease, "boom")
    direct = store.jobs.enqueue("k", None, queue="q.dead")
    assert store.jobs.claim_many("k", owner="default", limit=10) == []
    got = store.jobs.claim_many("k", owner="consumer", limit=10, queues=["q.dead"])
    assert sorted(c.job.id for c in got) == sorted(
        [direct, *(j.id for j in jobs_in(store, "q.dead") if j.origin_id)]
    )
    assert {c.job.max_attempts for c in got if c.job.origin_id} == {3}


@pytest.mark.parametrize("ring", [["a", "b"], ["a", "b", "c"], ["a", "b", "c", "d", "e"]])
def test_a_dead_letter_cycle_of_any_length_is_refused(store, ring):
    store.queues.create(ring[-1])
    for name, target in zip(ring, ring[1:], strict=False):
        store.queues.create(name, dead_letter=target)
    with refused(DeadLetterCycle.code) as got:
        store.queues.create(ring[-1], dead_letter=ring[0])
    assert " -> ".join([*ring[-1:], *ring]) in str(got.value)
    assert store.queues.get(ring[-1]).dead_letter is None  # nothing written
    with refused(DeadLetterCycle.code):
        store.queues.update(ring[-1], dead_letter=ring[0])
    # Closing the ring elsewhere is refused too; a chain that ends is fine.
    if len(ring) > 2:
        with refused(DeadLetterCycle.code):
            store.queues.update(ring[1], dead_letter=ring[0])
    store.queues.create(ring[-1], dead_letter="the-end")
    assert store.queues.get(ring[-1]).dead_letter == "the-end"


def test_a_cycle_is_a_value_error_too(store):
    store.queues.create("x", dead_letter="y")
    with pytest.raises(ValueError, match="cycle"):
        store.queues.create("y", dead_letter="x")
