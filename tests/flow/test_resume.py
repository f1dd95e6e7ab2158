"""A resume must be the same run: spec 7.11-7.14 and D6, on both engines.

"An earlier deploy" is simulated faithfully: its attempt claims the run, records the identity it
had (and maybe node values) through the fenced checkpoint store, and vanishes; the injected clock
then passes its lease so the current deploy's runner reclaims the run. A refused resume runs no
task, makes the job ``dead`` at once with the refusal (TN2069) in ``last_error``, and the worker
reports the attempt as ``failed``."""

from __future__ import annotations

import copy
import threading

import pytest

from tenure.flow import RUN_NODE, Flow, Registry, RunIdentity, describe_run, restart

from ._support import Recorder, rows, wait_for, wait_state

DOC = {
    "name": "post",
    "revision": "1",
    "output": "publish",
    "nodes": {"draft": {}, "edit": {"needs": ["draft"]}, "publish": {"needs": ["edit"]}},
}
LEASE_MS = 30_000


def tasks(calls: Recorder, versions: dict[str, int] | None = None, gate: threading.Event | None = None) -> Registry:
    versions = {"draft": 1, "edit": 1, "publish": 1, **(versions or {})}
    reg = Registry()

    def draft(ctx):
        calls("draft")
        return f"draft of {ctx.input['topic']}"

    def edit(ctx):
        calls("edit")
        if gate is not None:
            gate.wait(10)
        return ctx["draft"].upper()

    def publish(ctx):
        calls("publish")
        return {"published": ctx["edit"]}

    for fn in (draft, edit, publish):
        reg.add(fn.__name__, fn, version=versions[fn.__name__])
    return reg


def identity(doc=DOC, run_input=None, versions=None) -> dict:
    versions = {"draft": 1, "edit": 1, "publish": 1, **(versions or {})}
    return RunIdentity.of(Flow.from_document(doc), run_input, versions).record()


def earlier_attempt(store, clock, payload, record, values=()) -> str:
    """Enqueue a run, let an 'earlier deploy' checkpoint it, then pass its lease."""
    job_id = store.jobs.enqueue("post", payload)
    lease = store.jobs.claim("post", owner="earlier-deploy", lease_ms=LEASE_MS).lease
    cps = store.jobs.checkpoints(lease)
    if record is not None:
        cps.save(RUN_NODE, record)
    for node, value in values:
        cps.save(node, value)
    clock.advance(LEASE_MS)
    return job_id


def refused(store, job_id, outcomes: Recorder):
    job = wait_state(store, job_id, "dead")
    assert job.attempts == 2 < job.max_attempts  # dead at once, not after the attempts ran out
    assert "[TN2069]" in job.last_error
    wait_for(lambda: outcomes.snapshot(), what="the refused attempt's outcome")
    (event,) = outcomes.snapshot()
    assert event["outcome"] == "failed" and event["generation"] == 2 and "TN2069" in event["reason"]
    return job


PAYLOAD = {"input": {"topic": "fences"}}
INPUT = PAYLOAD["input"]


def test_7_11_an_edited_document_is_refused_naming_the_revision(any_store, clock, start_runner, gates):
    calls_v1, calls_v2, outcomes = Recorder(), Recorder(), Recorder()
    gate = gates()
    v1 = Flow.from_document(DOC)
    old = start_runner(any_store, [v1], registry=tasks(calls_v1, gate=gate), renew=False)
    job_id = any_store.jobs.enqueue("post", PAYLOAD)
    wait_for(lambda: calls_v1.count("edit"), what="v1's edit to start")
    clock.advance(LEASE_MS)  # the v1 worker is wedged; its lease is over

    edited = copy.deepcopy(DOC)
    edited["revision"] = "2"
    edited["nodes"]["edit"]["needs"] = ["draft"]
    start_runner(any_store, [Flow.from_document(edited)], registry=tasks(calls_v2), on_outcome=outcomes)
    job = refused(any_store, job_id, outcomes)
    assert "the document revision changed from '1' to '2'" in job.last_error
    assert "input hash" not in job.last_error and "moved from version" not in job.last_error
    assert calls_v2.snapshot() == []  # no task ran
    assert [r[0] for r in rows(any_store, job_id)] == [RUN_NODE, "draft"]  # 4.4: kept for inspection
    gate.set()
    old.stop()


def test_7_11_a_different_input_hash_is_refused_naming_the_input(any_store, clock, start_runner):
    calls, outcomes = Recorder(), Recorder()
    job_id = earlier_attempt(any_store, clock, PAYLOAD, identity(run_input={"topic": "leases"}),
                             [("draft", "draft of leases")])
    start_runner(any_store, [Flow.from_document(DOC)], registry=tasks(calls), on_outcome=outcomes)
    job = refused(any_store, job_id, outcomes)
    assert "the input hash changed from sha256:" in job.last_error
    assert "revision" not in job.last_error.split("Start it again")[0]
    assert "moved from version" not in job.last_error
    assert calls.snapshot() == []


def test_7_12_a_moved_task_version_is_refused_though_the_document_is_byte_equal(any_store, clock, start_runner):
    calls, outcomes = Recorder(), Recorder()
    job_id = earlier_attempt(any_store, clock, PAYLOAD, identity(run_input=INPUT),
                             [("draft", "draft of fences")])
    # the same document, byte for byte; only the declared implementation of 'draft' moved
    start_runner(any_store, [Flow.from_document(copy.deepcopy(DOC))], registry=tasks(calls, {"draft": 2}),
                 on_outcome=outcomes)
    job = refused(any_store, job_id, outcomes)
    assert "'draft' moved from version 1 to 2" in job.last_error
    assert "revision" not in job.last_error.split("Start it again")[0] and "input hash" not in job.last_error
    assert calls.snapshot() == []


def test_7_12_two_moved_versions_are_each_named(sqlite_store, clock, start_runner):
    calls, outcomes = Recorder(), Recorder()
    job_id = earlier_attempt(sqlite_store, clock, PAYLOAD, identity(run_input=INPUT))
    start_runner(sqlite_store, [Flow.from_document(DOC)], registry=tasks(calls, {"draft": 2, "publish": 5}),
                 on_outcome=outcomes)
    job = refused(sqlite_store, job_id, outcomes)
    assert "'draft' moved from version 1 to 2" in job.last_error
    assert "'publish' moved from version 1 to 5" in job.last_error and "'edit'" not in job.last_error


def test_decision_6_the_worker_reports_the_refusal_with_its_code(any_store, clock, start_runner):
    outcomes = Recorder()
    job_id = earlier_attempt(any_store, clock, PAYLOAD, identity(run_input=INPUT, versions={"edit": 3}))
    start_runner(any_store, [Flow.from_document(DOC)], registry=tasks(Recorder()), on_outcome=outcomes)
    refused(any_store, job_id, outcomes)
    assert outcomes.snapshot()[0].get("code") == "TN2069"


def test_7_13_a_legacy_run_without_values_is_upgraded_in_place_and_completes(
        any_store, clock, start_runner, gates):
    calls, gate = Recorder(), gates()
    legacy = {"revision": "1", "input_hash": identity(run_input=INPUT)["input_hash"]}
    job_id = earlier_attempt(any_store, clock, PAYLOAD, legacy)
    assert rows(any_store, job_id) == [(RUN_NODE, legacy, 1)]
    start_runner(any_store, [Flow.from_document(DOC)], registry=tasks(calls, gate=gate))
    wait_for(lambda: calls.count("edit"), what="edit to start")
    got = dict((n, (v, g)) for n, v, g in rows(any_store, job_id))
    assert got[RUN_NODE] == (identity(run_input=INPUT), 2)  # upgraded in place by generation 2
    assert describe_run(any_store, job_id)["legacy"] is False
    gate.set()
    job = wait_state(any_store, job_id, "done")
    assert job.result == {"published": "DRAFT OF FENCES"}
    assert calls.snapshot() == ["draft", "edit", "publish"]


def test_7_14_a_legacy_run_with_values_is_refused_saying_why(any_store, clock, start_runner):
    calls, outcomes = Recorder(), Recorder()
    legacy = {"revision": "1", "input_hash": identity(run_input=INPUT)["input_hash"]}
    job_id = earlier_attempt(any_store, clock, PAYLOAD, legacy, [("draft", "draft of fences")])
    view = describe_run(any_store, job_id)
    assert view["legacy"] is True and view["identity"]["revision"] == "1"
    start_runner(any_store, [Flow.from_document(DOC)], registry=tasks(calls), on_outcome=outcomes)
    job = refused(any_store, job_id, outcomes)
    assert "without task identity" in job.last_error and "'draft'" in job.last_error
    assert "cannot be confirmed" in job.last_error
    assert calls.snapshot() == []
    assert rows(any_store, job_id) == [(RUN_NODE, legacy, 1), ("draft", "draft of fences", 1)]  # not upgraded


def test_values_with_no_identity_record_at_all_are_never_read_as_equal(sqlite_store, clock, start_runner):
    calls, outcomes = Recorder(), Recorder()
    job_id = earlier_attempt(sqlite_store, clock, PAYLOAD, None, [("draft", "something")])
    start_runner(sqlite_store, [Flow.from_document(DOC)], registry=tasks(calls), on_outcome=outcomes)
    job = refused(sqlite_store, job_id, outcomes)
    assert "cannot be confirmed" in job.last_error and calls.snapshot() == []


def test_a_refused_run_is_restarted_from_scratch_as_a_new_run(any_store, clock, start_runner):
    calls, outcomes = Recorder(), Recorder()
    job_id = earlier_attempt(any_store, clock, PAYLOAD, identity(run_input=INPUT), [("draft", "old draft")])
    start_runner(any_store, [Flow.from_document(DOC)], registry=tasks(calls, {"draft": 2}), on_outcome=outcomes)
    refused(any_store, job_id, outcomes)
    new_id = restart(any_store, job_id, new_id=f"{job_id}-again")
    assert restart(any_store, job_id, new_id=f"{job_id}-again") == new_id  # idempotent with an id
    job = wait_state(any_store, new_id, "done")
    assert job.result == {"published": "DRAFT OF FENCES"} and job.payload == PAYLOAD
    assert calls.snapshot() == ["draft", "edit", "publish"]
    old = any_store.jobs.get(job_id)
    assert old.state == "dead" and [r[0] for r in rows(any_store, job_id)] == [RUN_NODE, "draft"]
    with pytest.raises(Exception) as e:
        restart(any_store, new_id)  # a done run is not restarted
    assert e.value.code == "TN1001"
    with pytest.raises(Exception) as e:
        restart(any_store, job_id, new_id=job_id)
    assert e.value.code == "TN1001"


def test_a_recorded_value_for_a_node_the_document_does_not_have_is_refused(sqlite_store, clock, start_runner):
    # Same revision and task versions, but a value for a node this document does not declare:
    # unknown is never read as equal.
    calls, outcomes = Recorder(), Recorder()
    job_id = earlier_attempt(sqlite_store, clock, PAYLOAD, identity(run_input=INPUT), [("ghost", 1)])
    start_runner(sqlite_store, [Flow.from_document(DOC)], registry=tasks(calls), on_outcome=outcomes)
    job = refused(sqlite_store, job_id, outcomes)
    assert "recorded values for 'ghost' belong to no node of this document" in job.last_error
    assert calls.snapshot() == []
