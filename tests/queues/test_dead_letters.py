"""Dead letters and redrive. A job that dies is kept ``dead`` (docs/spec.md
4.3/4.4) AND copied to its queue's dead-letter queue in the failure's own transaction;
``jobs.redrive`` moves the copies back to the queues they died in."""

from __future__ import annotations

import pytest

import tenure.queues
from tenure.errors import TenureError

from ._helpers import column, jobs_in, refused


def _die(store, queue="q", payload=None, **enqueue):
    """Enqueue one job, claim it and fail it dead; answers the dead record."""
    jid = store.jobs.enqueue("k", payload, queue=queue, **enqueue)
    claim = store.jobs.claim("k", owner="w", queues=queue)
    assert claim is not None and claim.job.id == jid
    return store.jobs.fail(claim.lease, RuntimeError("boom"), dead=True)


def test_a_dead_job_is_kept_and_copied_to_the_dead_letter_queue(store, clock):
    store.queues.create("q", dead_letter="q.dlq", max_attempts=1)
    store.queues.create("q.dlq", max_attempts=7, timeout=9, retention=60)
    jid = store.jobs.enqueue("k", {"order": 42}, queue="q", priority=3, group_key="g", singleton_key="s")
    clock.advance(10)
    claim = store.jobs.claim("k", owner="w")
    dead = store.jobs.fail(claim.lease, RuntimeError("card declined"))  # attempts ran out
    assert (dead.state, dead.last_error) == ("dead", "card declined")
    assert store.jobs.get(jid).state == "dead"  # kept (spec 4.3)
    (copy,) = jobs_in(store, "q.dlq")
    assert (copy.kind, copy.payload, copy.state, copy.last_error, copy.origin_id) == (
        "k", {"order": 42}, "pending", "card declined", jid)
    assert (copy.attempts, copy.max_attempts, copy.timeout_ms, copy.priority, copy.group_key) == (0, 7, 9000, 3, "g")
    assert (copy.run_at, copy.created_at, copy.dead_letter) == (clock(), clock(), None)
    assert column(store, copy.id, "origin_queue") == "q"
    assert column(store, copy.id, "policy") == "standard"
    assert column(store, copy.id, "keep_until") == clock() + 60_000


def test_only_dead_jobs_with_a_dead_letter_queue_are_copied(store):
    store.queues.create("q", dead_letter="dlq", max_attempts=2)
    jid = store.jobs.enqueue("k", None, queue="q")
    failed = store.jobs.fail(store.jobs.claim("k", owner="w").lease, "first")
    assert failed.state == "failed"
    assert jobs_in(store, "dlq") == []
    _die(store, queue="plain")
    assert [j.queue for j in store.jobs.page().items if j.origin_id] == []
    assert store.jobs.get(jid).state == "failed"


def test_a_job_level_dead_letter_overrides_the_queue(store):
    store.queues.create("q", dead_letter="dlq")
    _die(store, dead_letter="special")
    assert len(jobs_in(store, "special")) == 1 and jobs_in(store, "dlq") == []


def test_the_copy_is_written_in_the_failures_transaction(store):
    """If the copy cannot be written, the failure is rolled back too: the job stays leased."""
    store.queues.create("q", dead_letter="dlq")
    jid = store.jobs.enqueue("k", None, queue="q")
    claim = store.jobs.claim("k", owner="w")
    with store._session() as s:
        if store.dialect == "sqlite":
            s.execute("CREATE TRIGGER tn_test_refuse BEFORE INSERT ON tenure_jobs WHEN NEW.queue = 'dlq' "
                      "BEGIN SELECT RAISE(ABORT, 'refused by test'); END")
        else:
            s.execute("CREATE FUNCTION tn_test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
                      "$$ BEGIN RAISE EXCEPTION 'refused by test'; END $$")
            s.execute("CREATE TRIGGER tn_test_refuse BEFORE INSERT ON tenure_jobs FOR EACH ROW "
                      "WHEN (NEW.queue = 'dlq') EXECUTE FUNCTION tn_test_refuse()")
    try:
        with pytest.raises(TenureError):
            store.jobs.fail(claim.lease, "boom", dead=True)
        assert store.jobs.get(jid).state == "leased"
        assert jobs_in(store, "dlq") == []
    finally:
        with store._session() as s:
            s.execute("DROP TRIGGER tn_test_refuse" + ("" if store.dialect == "sqlite" else " ON tenure_jobs"))
            if store.dialect != "sqlite":
                s.execute("DROP FUNCTION tn_test_refuse()")
    assert store.jobs.fail(claim.lease, "boom", dead=True).state == "dead"
    assert len(jobs_in(store, "dlq")) == 1


def test_redrive_moves_copies_back_as_fresh_jobs(store, clock):
    store.queues.create("q", dead_letter="dlq", max_attempts=4)
    dead = []
    for i in range(3):
        dead.append(_die(store, payload=i))
        clock.advance(100)  # oldest copy first
    assert store.jobs.redrive("dlq", limit=2) == 2
    back = sorted(jobs_in(store, "q", "pending"), key=lambda j: j.payload)
    assert [j.payload for j in back] == [0, 1]
    assert all((j.attempts, j.max_attempts, j.run_at, j.last_error) == (0, 4, clock(), None) for j in back)
    assert {j.origin_id for j in back} == {dead[0].id, dead[1].id}
    settled = jobs_in(store, "dlq", "cancelled")
    assert sorted(j.result["redriven_as"] for j in settled) == sorted(j.id for j in back)
    assert store.jobs.redrive("dlq") == 1
    assert store.jobs.redrive("dlq") == 0
    assert [j.state for j in jobs_in(store, "dlq")] == ["cancelled"] * 3
    # The redriven job can die again and be dead-lettered again.
    claim = store.jobs.claim("k", owner="w", queues="q")
    store.jobs.fail(claim.lease, "again", dead=True)
    assert len(jobs_in(store, "dlq", "pending")) == 1


def test_redrive_leaves_copies_the_origin_policy_refuses_and_keeps_going(store, monkeypatch):
    monkeypatch.setattr(tenure.queues, "REDRIVE_BATCH", 2)
    store.queues.create("q", dead_letter="dlq", policy="exclusive")
    for key in ["a", "a", "b", "c", "d"]:
        _die(store, singleton_key=key)
    store.jobs.enqueue("k", "holder", queue="q", singleton_key="a")  # key a is taken again
    assert store.jobs.redrive("dlq") == 3
    left = jobs_in(store, "dlq", "pending")
    assert len(left) == 2 and {column(store, j.id, "singleton_key") for j in left} == {"a"}
    assert sorted(column(store, j.id, "singleton_key") for j in jobs_in(store, "q", "pending")) == ["a", "b", "c", "d"]


def test_redrive_skips_copies_being_worked_and_settled_ones(store):
    store.queues.create("q", dead_letter="dlq")
    _die(store, payload=1)
    _die(store, payload=2)
    claim = store.jobs.claim("k", owner="dlq-worker", queues="dlq")  # a consumer holds one copy
    assert store.jobs.redrive("dlq") == 1
    assert store.jobs.get(claim.job.id).state == "leased"
    with refused("TN1001"):
        store.jobs.redrive("dlq", limit=0)
