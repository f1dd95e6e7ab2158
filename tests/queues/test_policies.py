"""Uniqueness and throttling: the pg-boss policies, ``singleton_for`` and ``debounce``,
enforced by the database's partial unique indexes and the claim statement. A duplicate answers
the EXISTING job's id, never a driver error. "Queued" means pending (docs/queues.md)."""

from __future__ import annotations

import pytest

from tenure.errors import TenureError

from ._helpers import column, jobs_in, refused


def _claim(store, key=None, **kw):
    c = store.jobs.claim("k", owner="w", **kw)
    assert c is not None
    if key is not None:
        assert c.job.singleton_key == key
    return c


# -- short: one queued (pending) job per key ---------------------------------------------------------

def test_short_allows_one_pending_per_key_and_answers_the_existing_id(store, clock):
    store.queues.create("q", policy="short")
    a = store.jobs.enqueue("k", {"n": 1}, queue="q", singleton_key="u1")
    assert store.jobs.enqueue("k", {"n": 2}, queue="q", singleton_key="u1") == a
    clock.advance(1)
    b = store.jobs.enqueue("k", {"n": 3}, queue="q", singleton_key="u2")
    assert b != a
    assert store.jobs.get(a).payload == {"n": 1}  # the duplicate changed nothing
    _claim(store, "u1", queues="q")  # a leaves the queued state: one more may queue behind it
    c = store.jobs.enqueue("k", {"n": 4}, queue="q", singleton_key="u1")
    assert c not in (a, b)
    assert store.jobs.enqueue("k", {"n": 5}, queue="q", singleton_key="u1") == c
    assert len(jobs_in(store, "q")) == 3


def test_short_retry_path_never_violates_the_index(store, clock):
    """A job that fails while another of its key queued behind it goes to ``failed`` without an
    error: a job waiting to retry is not "queued" for the short policy."""
    store.queues.create("q", policy="short", retry_delay=1)
    a = store.jobs.enqueue("k", 1, queue="q", singleton_key="x")
    claim = _claim(store, "x")
    b = store.jobs.enqueue("k", 2, queue="q", singleton_key="x")
    assert store.jobs.fail(claim.lease, "boom").state == "failed"
    assert store.jobs.enqueue("k", 3, queue="q", singleton_key="x") == b  # b is the queued one
    clock.advance(1000)
    got = {c.job.id for c in store.jobs.claim_many("k", owner="w", limit=5)}
    assert got == {a, b}


def test_requeue_into_a_taken_key_is_a_coded_error_not_a_driver_error(store):
    store.queues.create("q", policy="short")
    a = store.jobs.enqueue("k", 1, queue="q", singleton_key="x")
    store.jobs.cancel(a)
    b = store.jobs.enqueue("k", 2, queue="q", singleton_key="x")
    with pytest.raises(TenureError):
        store.jobs.requeue(a)
    assert (store.jobs.get(a).state, store.jobs.get(b).state) == ("cancelled", "pending")


# -- singleton: one active (leased) job per key --------------------------------------------------------

def test_singleton_queues_many_but_leases_one_per_key_even_in_one_batch(store, clock):
    store.queues.create("q", policy="singleton")
    x = []
    for i in range(3):
        x.append(store.jobs.enqueue("k", i, queue="q", singleton_key="x"))
        clock.advance(1)
    y = store.jobs.enqueue("k", 9, queue="q", singleton_key="y")
    assert len(set(x)) == 3
    got = store.jobs.claim_many("k", owner="w", limit=10)
    assert sorted(c.job.id for c in got) == sorted([x[0], y])
    assert store.jobs.claim_many("k", owner="w", limit=10) == []
    first = next(c for c in got if c.job.id == x[0])
    store.jobs.complete(first.lease)
    assert [c.job.id for c in store.jobs.claim_many("k", owner="w", limit=10)] == [x[1]]


def test_singleton_expired_lease_and_a_waiting_job_are_never_leased_together(store, clock):
    store.queues.create("q", policy="singleton")
    a = store.jobs.enqueue("k", 1, queue="q", singleton_key="x")
    _claim(store, "x", lease_ms=1000)
    clock.advance(10)
    b = store.jobs.enqueue("k", 2, queue="q", singleton_key="x")
    clock.advance(5000)  # a's lease expired: a (recovery) and b are both eligible
    got = store.jobs.claim_many("k", owner="w2", limit=10)
    assert len(got) == 1 and got[0].job.id in (a, b)
    assert store.jobs.claim_many("k", owner="w3", limit=10) == []


def test_singleton_without_key_runs_one_job_of_the_queue_at_a_time(store):
    store.queues.create("q", policy="singleton")
    for i in range(3):
        store.jobs.enqueue("k", i, queue="q")
    assert len(store.jobs.claim_many("k", owner="w", limit=10)) == 1


# -- stately: one queued + one active per key ---------------------------------------------------------

def test_stately_one_pending_and_one_leased_per_key(store):
    store.queues.create("q", policy="stately")
    a = store.jobs.enqueue("k", 1, queue="q", singleton_key="x")
    assert store.jobs.enqueue("k", 2, queue="q", singleton_key="x") == a
    claim = _claim(store, "x")
    b = store.jobs.enqueue("k", 3, queue="q", singleton_key="x")
    assert b != a
    assert store.jobs.enqueue("k", 4, queue="q", singleton_key="x") == b
    assert store.jobs.claim("k", owner="w2") is None  # b waits for a: one active per key
    store.jobs.complete(claim.lease)
    assert _claim(store, "x").job.id == b


# -- exclusive: one queued-or-active job per key ------------------------------------------------------

def test_exclusive_one_job_per_key_until_it_settles(store, clock):
    store.queues.create("q", policy="exclusive", retry_delay=1)
    a = store.jobs.enqueue("k", 1, queue="q", singleton_key="x")
    claim = _claim(store, "x")
    assert store.jobs.enqueue("k", 2, queue="q", singleton_key="x") == a  # leased still holds the key
    store.jobs.fail(claim.lease, "boom")
    assert store.jobs.enqueue("k", 3, queue="q", singleton_key="x") == a  # failed (retrying) too
    clock.advance(1000)
    store.jobs.complete(_claim(store, "x").lease)
    b = store.jobs.enqueue("k", 4, queue="q", singleton_key="x")
    assert b != a


# -- singleton_for: time-bucket throttling ------------------------------------------------------------

def test_singleton_for_throttles_per_bucket_even_after_the_job_ran(store, clock):
    clock.set(clock() - clock() % 60_000 + 40_000)  # 40 s into a 60 s bucket
    a = store.jobs.enqueue("k", 1, queue="q", singleton_key="x", singleton_for=60)
    assert store.jobs.enqueue("k", 2, queue="q", singleton_key="x", singleton_for=60) == a
    store.jobs.complete(_claim(store).lease)
    clock.advance(19_000)
    assert store.jobs.enqueue("k", 3, queue="q", singleton_key="x", singleton_for=60) == a  # done, same bucket
    other = store.jobs.enqueue("k", 4, queue="q", singleton_key="y", singleton_for=60)
    assert other != a
    clock.advance(1_000)  # the next bucket
    b = store.jobs.enqueue("k", 5, queue="q", singleton_key="x", singleton_for=60)
    assert b not in (a, other)
    assert column(store, b, "singleton_on") - column(store, a, "singleton_on") == 60_000


def test_a_cancelled_job_frees_its_bucket(store):
    a = store.jobs.enqueue("k", 1, queue="q", singleton_for=60)
    store.jobs.cancel(a)
    b = store.jobs.enqueue("k", 2, queue="q", singleton_for=60)
    assert b != a and store.jobs.get(b).state == "pending"


# -- debounce ------------------------------------------------------------------------------------------

def test_debounce_replaces_the_payload_and_pushes_the_run_time(store, clock):
    a = store.jobs.enqueue("k", {"v": 1}, queue="q", singleton_key="doc-7", debounce=5)
    assert store.jobs.get(a).run_at == clock() + 5000
    clock.advance(3000)
    assert store.jobs.enqueue("k", {"v": 2}, queue="q", singleton_key="doc-7", debounce=5) == a
    job = store.jobs.get(a)
    assert (job.payload, job.run_at) == ({"v": 2}, clock() + 5000)
    assert store.jobs.claim("k", owner="w") is None  # pushed: not due yet
    other_kind = store.jobs.enqueue("k2", {"v": 3}, queue="q", singleton_key="doc-7", debounce=5)
    other_key = store.jobs.enqueue("k", {"v": 4}, queue="q", singleton_key="doc-8", debounce=5)
    assert len({a, other_kind, other_key}) == 3
    clock.advance(5000)
    claim = store.jobs.claim("k", owner="w", queues="q")
    assert claim.job.id == a and claim.job.payload == {"v": 2}
    # Once it started, a later enqueue starts a new debounce window.
    assert store.jobs.enqueue("k", {"v": 5}, queue="q", singleton_key="doc-7", debounce=5) != a


def test_debounce_refuses_an_explicit_run_time_or_throttle(store):
    with refused("TN1001"):
        store.jobs.enqueue("k", None, debounce=5, delay=1)
    with refused("TN1001"):
        store.jobs.enqueue("k", None, debounce=5, run_at=1_700_000_000_000)
    with refused("TN1001"):
        store.jobs.enqueue("k", None, debounce=5, singleton_for=10)
    assert store.jobs.counts()["pending"] == 0


def test_debounce_in_a_short_queue_answers_the_queued_job(store):
    store.queues.create("q", policy="short")
    a = store.jobs.enqueue("k", 1, queue="q", singleton_key="x")
    assert store.jobs.enqueue("k", 2, queue="q", singleton_key="x", debounce=5) == a
    assert store.jobs.get(a).payload == 1


# -- bulk and idempotent ids ---------------------------------------------------------------------------

def test_enqueue_many_answers_existing_ids_for_duplicates_inside_and_outside_the_batch(store):
    store.queues.create("q", policy="short")
    before = store.jobs.enqueue("k", 0, queue="q", singleton_key="a")
    ids = store.jobs.enqueue_many([
        {"kind": "k", "payload": 1, "queue": "q", "singleton_key": "a"},
        {"kind": "k", "payload": 2, "queue": "q", "singleton_key": "b"},
        {"kind": "k", "payload": 3, "queue": "q", "singleton_key": "b"},
        {"kind": "k", "payload": 4, "queue": "q", "singleton_key": "c", "debounce": 1},
        {"kind": "k", "payload": 5, "queue": "q", "singleton_key": "c", "debounce": 1},
        {"kind": "k", "payload": 6, "queue": "plain"},
    ])
    assert ids[0] == before and ids[1] == ids[2] and ids[3] == ids[4]
    assert len(set(ids)) == 4
    assert store.jobs.get(ids[3]).payload == 5
    assert len(jobs_in(store, "q")) == 3


def test_a_caller_supplied_id_that_exists_is_answered_as_is(store):
    """spec 2.3 still holds under a policy."""
    store.queues.create("q", policy="exclusive")
    assert store.jobs.enqueue("k", 1, id="job-1", queue="q", singleton_key="x") == "job-1"
    assert store.jobs.enqueue("k", 2, id="job-1", queue="q", singleton_key="x") == "job-1"
    assert store.jobs.enqueue("k", 3, id="job-2", queue="q", singleton_key="x") == "job-1"
    assert store.jobs.get("job-2") is None


def test_standard_queue_keys_do_nothing_without_throttle_or_debounce(store):
    a = store.jobs.enqueue("k", 1, queue="q", singleton_key="x")
    b = store.jobs.enqueue("k", 2, queue="q", singleton_key="x")
    assert a != b
    assert len(store.jobs.claim_many("k", owner="w", limit=5)) == 2


def test_policies_hold_inside_the_callers_transaction(store):
    """The outbox (spec 3.19) with a policy: a duplicate inside the transaction
    answers the first job's id without ending the transaction; a rollback takes both away."""
    store.queues.create("q", policy="short")
    with pytest.raises(RuntimeError):
        with store.transaction() as tx:
            a = tx.jobs.enqueue("k", 1, queue="q", singleton_key="x")
            assert store.jobs.enqueue("k", 2, queue="q", singleton_key="x", conn=tx.connection) == a
            assert tx.jobs.enqueue("k", 3, queue="q", singleton_key="x", debounce=5) == a
            raise RuntimeError("rollback")
    assert jobs_in(store, "q") == []
    with store.transaction() as tx:
        b = tx.jobs.enqueue("k", 1, queue="q", singleton_key="x")
        assert tx.jobs.enqueue_many([{"kind": "k", "queue": "q", "singleton_key": "x"}]) == [b]
    assert [j.id for j in jobs_in(store, "q")] == [b]
