"""Dependencies between jobs (docs/composition.md), on both engines, with the injected clock:
eligibility, every settle path's cascade under every policy, one-transaction enqueue, the coded
refusals, and the composition admin calls."""

from __future__ import annotations

import pytest

from tenure.errors import DependencyCycle, InvalidArgument, InvalidType, UnknownParent

LEASE = 10_000


def claim(jobs, kind=None):
    return jobs.claim(kind, owner="w", lease_ms=LEASE)


def state(jobs, job_id):
    return jobs.get(job_id).state


def test_a_dependent_is_pending_but_not_claimable_until_every_parent_is_done(any_store):
    jobs = any_store.jobs
    a = jobs.enqueue("a", id="a")
    b = jobs.enqueue("b", id="b")
    c = jobs.enqueue("c", id="c", depends_on=[a, b])
    job = jobs.get(c)
    assert (job.state, job.waiting_on) == ("pending", 2)
    assert jobs.counts()["pending"] == 3  # still one of the six states
    first = claim(jobs, ["a", "b", "c"])
    second = claim(jobs, ["a", "b", "c"])
    assert {first.job.id, second.job.id} == {"a", "b"}
    assert claim(jobs, "c") is None
    jobs.complete(first.lease, 1)
    assert jobs.get("c").waiting_on == 1 and claim(jobs, "c") is None
    jobs.complete(second.lease, 2)
    assert jobs.get("c").waiting_on == 0
    got = claim(jobs, "c")
    assert got is not None and got.job.id == "c"
    deps = jobs.dependencies("c")
    assert [(d.parent_id, d.position, d.met, d.job.result) for d in deps] == [("a", 0, True, 1), ("b", 1, True, 2)]
    assert [d.job_id for d in jobs.dependents("a")] == ["c"]


def test_a_parent_already_done_at_enqueue_is_met_at_once(any_store):
    jobs = any_store.jobs
    jobs.enqueue("a", id="a")
    got = claim(jobs)
    jobs.complete(got.lease, "r")
    jobs.enqueue("b", id="b", depends_on=["a"])
    assert jobs.get("b").waiting_on == 0
    assert claim(jobs).job.id == "b"


def test_a_delayed_dependent_waits_for_both_its_parents_and_its_run_at(any_store, clock):
    jobs = any_store.jobs
    jobs.enqueue("a", id="a")
    jobs.enqueue("b", id="b", depends_on=["a"], delay=60)
    jobs.complete(claim(jobs).lease)
    assert claim(jobs) is None
    clock.advance(60_000)
    assert claim(jobs).job.id == "b"


# -- the cascade: every settle path, the default policy ----------------------------------------

def _dead_by_fail(jobs, clock):
    got = claim(jobs, "p")
    jobs.fail(got.lease, "boom")  # max_attempts=1: dead


def _dead_by_discard(jobs, clock):
    jobs.fail(claim(jobs, "p").lease, "boom", dead=True)


def _dead_by_batch_fail(jobs, clock):
    out = jobs.fail_many([(claim(jobs, "p").lease, "boom")])
    assert out[0].state == "dead"


def _cancelled_queued(jobs, clock):
    assert jobs.cancel("p") is True


def _cancelled_with_lease(jobs, clock):
    got = claim(jobs, "p")
    assert jobs.cancel("p", lease=got.lease) is True


def _request_cancel_queued(jobs, clock):
    assert jobs.request_cancel("p") == "cancelled"


def _request_cancel_running_settled_by_holder_failure(jobs, clock):
    got = claim(jobs, "p")
    assert jobs.request_cancel("p") == "requested"
    jobs.fail(got.lease, "stopped")  # a flagged job's failure settles it cancelled (D11)


def _request_cancel_holder_gone(jobs, clock):
    claim(jobs, "p")
    assert jobs.request_cancel("p") == "requested"
    clock.advance(LEASE)
    jobs._store._abandoned_next = 0.0  # the claim's clean-up runs at most once a second per process
    claim(jobs, "nothing")  # the next claim settles the abandoned one cancelled (D11)


def _bounded_reclaim(jobs, clock):
    claim(jobs, "p")
    clock.advance(LEASE)
    assert claim(jobs, "p") is None  # D10: the worker was lost on its last attempt: dead


def _bulk_cancel(jobs, clock):
    assert jobs.cancel_where(kind="p") == 1


SETTLE_PATHS = {
    "fail": ("dead", _dead_by_fail), "discard": ("dead", _dead_by_discard),
    "fail_many": ("dead", _dead_by_batch_fail), "cancel": ("cancelled", _cancelled_queued),
    "cancel_leased": ("cancelled", _cancelled_with_lease),
    "request_cancel": ("cancelled", _request_cancel_queued),
    "request_cancel_running": ("cancelled", _request_cancel_running_settled_by_holder_failure),
    "request_cancel_abandoned": ("cancelled", _request_cancel_holder_gone),
    "bounded_reclaim": ("dead", _bounded_reclaim), "cancel_where": ("cancelled", _bulk_cancel),
}


@pytest.mark.parametrize("path", sorted(SETTLE_PATHS))
def test_every_settle_path_cancels_the_dependents_transitively_in_its_own_transaction(any_store, clock, path):
    jobs = any_store.jobs
    ended, settle = SETTLE_PATHS[path]
    jobs.enqueue("p", id="p", max_attempts=1)
    jobs.enqueue("c", id="c", depends_on=["p"])
    jobs.enqueue("g", id="g", depends_on=["c"])
    jobs.enqueue("r", id="r", depends_on=["c"], on_parent_failure="run")
    jobs.enqueue("w", id="w", depends_on=["p"], on_parent_failure="wait")
    clock.advance(5)
    settle(jobs, clock)
    at = jobs.get("p").updated_at
    assert state(jobs, "p") == ended
    for job_id in ("c", "g"):
        job = jobs.get(job_id)
        assert job.state == "cancelled", (path, job_id)
        assert job.last_error.startswith("TN2103: parent ")
        assert job.updated_at == at  # the same settlement, the same clock
    # run: its parent c was cancelled, the edge is met: it runs, and can read what happened
    assert (state(jobs, "r"), jobs.get("r").waiting_on) == ("pending", 0)
    assert [d.job.state for d in jobs.dependencies("r")] == ["cancelled"]
    # wait: left as it was
    assert (state(jobs, "w"), jobs.get("w").waiting_on) == ("pending", 1)
    assert claim(jobs, ["c", "g", "w"]) is None


def test_run_policy_dependent_runs_once_every_parent_has_settled(any_store):
    jobs = any_store.jobs
    jobs.enqueue("p", id="ok")
    jobs.enqueue("p", id="bad", max_attempts=1)
    jobs.enqueue("cb", id="cb", depends_on=["ok", "bad"], on_parent_failure="run")
    first, second = claim(jobs, "p"), claim(jobs, "p")
    leases = {first.job.id: first.lease, second.job.id: second.lease}
    jobs.fail(leases["bad"], "boom")
    assert claim(jobs, "cb") is None  # "ok" has not settled yet
    jobs.complete(leases["ok"], 7)
    assert claim(jobs, "cb").job.id == "cb"
    outcome = [(d.parent_id, d.job.state, d.job.result, d.met) for d in jobs.dependencies("cb")]
    assert outcome == [("ok", "done", 7, True), ("bad", "dead", None, True)]


def test_wait_policy_dependent_runs_after_the_parent_is_requeued_and_completes(any_store):
    jobs = any_store.jobs
    jobs.enqueue("p", id="p", max_attempts=1)
    jobs.enqueue("w", id="w", depends_on=["p"], on_parent_failure="wait")
    jobs.fail(claim(jobs, "p").lease, "boom")
    assert state(jobs, "w") == "pending" and claim(jobs, "w") is None
    assert jobs.requeue("p") is True
    jobs.complete(claim(jobs, "p").lease, "second time")
    assert claim(jobs, "w").job.id == "w"


def test_a_run_edge_met_by_a_failure_is_not_counted_again_when_the_parent_later_completes(any_store):
    jobs = any_store.jobs
    jobs.enqueue("p", id="p1", max_attempts=1)
    jobs.enqueue("p", id="p2")
    jobs.enqueue("d", id="d", depends_on=["p1", "p2"], on_parent_failure="run")
    leases = {c.job.id: c.lease for c in (claim(jobs, "p"), claim(jobs, "p"))}
    jobs.fail(leases["p1"], "boom")
    assert jobs.get("d").waiting_on == 1
    jobs.requeue("p1")
    jobs.complete(claim(jobs, "p").lease)  # p1 again: its edge was already met
    assert jobs.get("d").waiting_on == 1 and claim(jobs, "d") is None
    jobs.complete(leases["p2"])
    assert claim(jobs, "d").job.id == "d"


def test_a_parent_already_failed_at_enqueue_settles_the_dependent_by_its_policy(any_store):
    jobs = any_store.jobs
    jobs.enqueue("p", id="p")
    jobs.cancel("p")
    jobs.enqueue("c", id="c", depends_on=["p"])
    jobs.enqueue("r", id="r", depends_on=["p"], on_parent_failure="run")
    jobs.enqueue("w", id="w", depends_on=["p"], on_parent_failure="wait")
    c = jobs.get("c")
    assert c.state == "cancelled" and c.last_error.startswith("TN2103: parent p ended cancelled")
    assert (state(jobs, "r"), jobs.get("r").waiting_on) == ("pending", 0)
    assert (state(jobs, "w"), jobs.get("w").waiting_on) == ("pending", 1)


# -- enqueue: one transaction, refusals -----------------------------------------------------

def test_enqueue_many_writes_parents_and_dependents_together(any_store):
    jobs = any_store.jobs
    ids = jobs.enqueue_many([
        {"kind": "c", "id": "c", "depends_on": ["a", "b"]},  # before its parents in the list
        {"kind": "a", "id": "a"},
        {"kind": "b", "id": "b", "depends_on": ["a"]},
    ])
    assert ids == ["c", "a", "b"]
    assert [jobs.get(i).waiting_on for i in ("a", "b", "c")] == [0, 1, 2]
    assert [d.parent_id for d in jobs.dependencies("c")] == ["a", "b"]


def test_an_already_failed_parent_cancels_dependents_enqueued_with_it_transitively(any_store):
    jobs = any_store.jobs
    jobs.enqueue("p", id="p")
    jobs.cancel("p")
    jobs.enqueue_many([{"kind": "c", "id": "c", "depends_on": ["p"]},
                       {"kind": "g", "id": "g", "depends_on": ["c"]}])
    assert state(jobs, "c") == "cancelled" and state(jobs, "g") == "cancelled"


def test_the_outbox_rolls_back_parents_and_dependents_together(any_store):
    jobs = any_store.jobs
    with pytest.raises(RuntimeError), any_store.transaction() as tx:
        tx.jobs.enqueue("a", id="a")
        tx.jobs.enqueue("b", id="b", depends_on=["a"])
        raise RuntimeError("rollback")
    assert jobs.get("a") is None and jobs.get("b") is None
    with any_store.transaction() as tx:
        tx.jobs.enqueue("a", id="a")
        tx.jobs.enqueue("b", id="b", depends_on=["a"])
    assert jobs.get("b").waiting_on == 1


def test_refusals_are_coded_and_write_nothing(any_store):
    jobs = any_store.jobs
    jobs.enqueue("x", id="x")
    with pytest.raises(UnknownParent) as err:
        jobs.enqueue_many([{"kind": "a", "id": "a"}, {"kind": "b", "id": "b", "depends_on": ["a", "nope"]}])
    assert err.value.code == "TN2101" and err.value.details["missing"] == ["nope"]
    with pytest.raises(DependencyCycle) as err:
        jobs.enqueue("a", id="a", depends_on=["a"])
    assert err.value.code == "TN2102"
    with pytest.raises(DependencyCycle) as err:
        jobs.enqueue_many([{"kind": "a", "id": "a", "depends_on": ["c"]}, {"kind": "b", "id": "b", "depends_on": ["a"]},
                           {"kind": "c", "id": "c", "depends_on": ["b", "x"]}])
    assert err.value.details["cycle"][0] == err.value.details["cycle"][-1]
    with pytest.raises(InvalidArgument):
        jobs.enqueue("a", depends_on=["x"], on_parent_failure="ignore")
    with pytest.raises(InvalidType):
        jobs.enqueue("a", depends_on="x")
    with pytest.raises(InvalidArgument):
        jobs.enqueue("a", depends_on=["x", "x"])
    assert jobs.counts()["pending"] == 1 and jobs.get("a") is None and jobs.dependents("x") == []


def test_re_enqueueing_an_existing_id_with_depends_on_changes_nothing(any_store):
    jobs = any_store.jobs
    jobs.enqueue("a", id="a")
    jobs.enqueue("b", id="b")
    assert jobs.enqueue("b", id="b", depends_on=["a"]) == "b"
    assert jobs.get("b").waiting_on == 0 and jobs.dependencies("b") == []


# -- the composition as a whole ---------------------------------------------------------------

def test_composition_lists_parents_before_dependents_and_cancels_and_requeues_as_one(any_store):
    jobs = any_store.jobs
    jobs.enqueue_many([{"kind": "a", "id": "a"}, {"kind": "b", "id": "b", "depends_on": ["a"]},
                       {"kind": "c", "id": "c", "depends_on": ["a"], "on_parent_failure": "run"},
                       {"kind": "d", "id": "d", "depends_on": ["b", "c"]}])
    jobs.enqueue("other", id="z")
    order = [j.id for j in jobs.composition("c")]
    assert sorted(order) == ["a", "b", "c", "d"]
    assert order.index("a") < order.index("b") < order.index("d") and order.index("c") < order.index("d")
    running = claim(jobs, "a")
    assert jobs.cancel_composition("d") == {"cancelled": 3, "requested": 1}
    # the run-policy dependent was cancelled before its parent, so it never ran
    assert [state(jobs, i) for i in "bcd"] == ["cancelled"] * 3
    jobs.fail(running.lease, "stopped")  # the holder settles the flagged job cancelled
    assert state(jobs, "a") == "cancelled" and state(jobs, "z") == "pending"
    assert jobs.requeue_composition("a") == 4
    assert [state(jobs, i) for i in "abcd"] == ["pending"] * 4
    assert [jobs.get(i).waiting_on for i in "abcd"] == [0, 1, 1, 2]
    jobs.complete(claim(jobs, "a").lease)
    assert {claim(jobs, ["b", "c"]).job.id, claim(jobs, ["b", "c"]).job.id} == {"b", "c"}
    assert jobs.composition("nope") == []


def test_requeueing_a_failed_parent_holds_back_again_a_run_dependent_that_has_not_run(any_store):
    jobs = any_store.jobs
    jobs.enqueue("p", id="p", max_attempts=1)
    jobs.enqueue("r", id="r", depends_on=["p"], on_parent_failure="run")
    jobs.fail(claim(jobs, "p").lease, "boom")
    assert jobs.get("r").waiting_on == 0
    jobs.requeue("p")
    assert jobs.get("r").waiting_on == 1 and claim(jobs, "r") is None
    jobs.complete(claim(jobs, "p").lease, "fixed")
    assert claim(jobs, "r").job.id == "r"


def test_a_parent_settled_while_the_enqueue_of_its_dependent_is_still_open(any_store):
    """The race the enqueue's parent mark closes: a completion that started (PostgreSQL: took its
    snapshot) before the dependent's transaction committed still releases it, because it waits for
    the parent row the enqueue marked and its trigger reads the edges afresh."""
    import threading

    jobs = any_store.jobs
    jobs.enqueue("p", id="p")
    running = claim(jobs, "p")
    done = threading.Event()

    def complete() -> None:
        jobs.complete(running.lease, "ok")
        done.set()

    with any_store.transaction() as tx:
        tx.jobs.enqueue("d", id="d", depends_on=["p"])
        t = threading.Thread(target=complete)
        t.start()
        assert not done.wait(0.3)  # it waits for the enqueue's transaction (never the other way)
    t.join(30)
    assert done.is_set() and state(jobs, "p") == "done"
    assert jobs.get("d").waiting_on == 0 and claim(jobs, "d").job.id == "d"


def test_a_long_line_of_dependents_is_cancelled_in_one_settlement(any_store):
    """The cascade is one query over the graph, not a trigger per level: 1 200 levels (past
    SQLite's trigger depth of 1 000 and what PostgreSQL's stack allowed nested) settle at once."""
    jobs = any_store.jobs
    n = 1200
    jobs.enqueue_many([{"kind": "s", "id": "s0000"}] +
                      [{"kind": "s", "id": f"s{i:04d}", "depends_on": [f"s{i - 1:04d}"]} for i in range(1, n)] +
                      [{"kind": "r", "id": "r", "depends_on": [f"s{n - 1:04d}"], "on_parent_failure": "run"}])
    jobs.fail(claim(jobs, "s").lease, "boom", dead=True)
    assert jobs.counts()["cancelled"] == n - 1
    last = jobs.get(f"s{n - 1:04d}")
    assert last.last_error.startswith(f"TN2103: parent s{n - 2:04d} ended cancelled")
    assert jobs.get("r").waiting_on == 0 and claim(jobs, "r").job.id == "r"
