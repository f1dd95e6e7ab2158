"""Durable sleep, signals, dynamic fan-out and child workflows, on both engines.

Each test runs a real worker on the store with the injected clock: a parked run is observed
holding no slot and no lease (the worker's ``leases()`` and ``stats()``, the row's state), and
time passes by advancing the clock, never by sleeping for it."""

from __future__ import annotations

import pytest

import tenure
from tenure.durable import STEP_PREFIX
from tenure.errors import ChildFailed, InvalidArgument, InvalidType, ResumeMismatch, SignalTimeout
from tenure.flow import Flow, describe_run

from ._support import Recorder, rows, wait_for, wait_state


def parked(store, job_id: str, attempts: int):
    """The job once its attempt number ``attempts`` has parked it (pending, no lease)."""
    def check():
        job = store.jobs.get(job_id)
        if job is not None and job.state in ("done", "dead", "cancelled"):
            raise AssertionError(f"job {job_id} ended {job.state!r}: {job.last_error}")
        return job if job is not None and job.state == "pending" and job.attempts == attempts else None
    return wait_for(check, 10, f"job {job_id} to park after attempt {attempts}")


def assert_holds_nothing(runner_or_worker, job) -> None:
    """The parked row holds no lease, and the worker lets go of the attempt.

    The worker drops its own record of an attempt after the settle that parked it has committed,
    so a reader that saw the parked row first may still find the lease in ``leases()`` for a
    moment (a race CI hit on PostgreSQL): the worker's side is waited for, with a bound, and a
    worker that kept the lease or the slot still fails here."""
    worker = getattr(runner_or_worker, "worker", runner_or_worker)
    assert job.state == "pending" and job.lease_until is None and job.lease_owner is None
    wait_for(lambda: worker.leases() == [] and worker.stats()["in_flight"] == 0, 10,
             f"the worker to let go of the parked attempt (at the first look: leases {worker.leases()}, "
             f"in flight {worker.stats()['in_flight']})")


def test_a_flow_sleeps_2_s_holding_no_slot_then_resumes_after_the_sleep(any_store, clock, start_runner):
    calls = Recorder()
    flow = Flow("nap", revision="1", output="after")

    @flow.task(version=1)
    def before(ctx):
        calls("before")
        return 1

    @flow.task(needs=["before"], version=1)
    def nap(ctx):
        calls("nap-start")
        ctx.sleep(2)
        calls("nap-end")
        return ctx["before"] + 1

    @flow.task(needs=["nap"], version=1)
    def after(ctx):
        calls("after")
        return ctx["nap"] * 10

    runner = start_runner(any_store, [flow], concurrency=1)
    start = clock()
    run = any_store.jobs.enqueue("nap", {"input": None}, id="run-nap")
    job = parked(any_store, run, 1)
    assert job.run_at == start + 2000
    assert_holds_nothing(runner, job)
    assert runner.stats()["snoozes"] == 1
    steps = {n: v for n, v, _ in rows(any_store, run) if n.startswith(STEP_PREFIX)}
    assert steps == {f"{STEP_PREFIX}nap:1": {"kind": "sleep", "until": start + 2000}}
    view = describe_run(any_store, run, flow=flow)
    assert [(n["id"], n["status"], n["waiting"]) for n in view["nodes"]] == [
        ("before", "done", []), ("nap", "ready", [{"kind": "sleep", "until": start + 2000}]),
        ("after", "pending", [])]

    clock.advance(1999)  # not yet: an early claim (none happens) would park it again
    any_store.jobs.enqueue("nap", {"input": None}, id="run-nap")  # idempotent; wakes the worker
    assert any_store.jobs.get(run).state == "pending"
    clock.advance(1)
    job = wait_state(any_store, run, "done")
    assert job.result == 20 and job.attempts == 2
    # "before" was checkpointed: not run again; the sleeping node ran again from its start and
    # its sleep returned at once; nothing slept twice.
    assert calls.snapshot() == ["before", "nap-start", "nap-start", "nap-end", "after"]
    assert rows(any_store, run) == []  # pruned with the completion


def test_a_plain_handler_sleeps_until_a_time_and_the_finished_sleep_is_recorded(any_store, clock):
    seen = Recorder()

    def handler(payload, ctx):
        seen(("run", ctx.attempt))
        ctx.sleep_until(payload["at"])
        seen("woke")
        return "ok"

    worker = any_store.jobs.create_worker({"nap": handler}, poll_interval=0.02).start()
    try:
        at = clock() + 5000
        jid = any_store.jobs.enqueue("nap", {"at": at})
        job = parked(any_store, jid, 1)
        assert job.run_at == at
        assert_holds_nothing(worker, job)
        clock.advance(5000)
        any_store.jobs.enqueue("poke", None)  # wakes the idle worker at once
        job = wait_state(any_store, jid, "done")
    finally:
        worker.stop(2)
    assert job.result == "ok" and seen.snapshot() == [("run", 1), ("run", 2), "woke"]


def _waiting_flow(name: str, key_of) -> Flow:
    flow = Flow(name, revision="1", output="wait")

    @flow.task(version=1)
    def wait(ctx):
        try:
            return {"got": ctx.wait_for_signal(key_of(ctx), timeout=60)}
        except SignalTimeout as exc:
            return {"timeout": exc.code}

    return flow


def test_a_signal_sent_before_the_wait_and_one_sent_during_it_are_each_received_once(any_store, clock,
                                                                                     start_runner):
    flow = _waiting_flow("approve", lambda ctx: f"approval:{ctx.run_id}")
    runner = start_runner(any_store, [flow])
    signals = any_store.signals

    # Sent BEFORE the run exists: stored, received by the run's first wait without parking.
    first = signals.send("approval:early", {"by": "ann"})
    assert signals.pending("approval:early") == 1
    early = any_store.jobs.enqueue("approve", {"input": None}, id="early")
    assert wait_state(any_store, early, "done").result == {"got": {"by": "ann"}}
    assert signals.pending("approval:early") == 0

    # Sent DURING the wait: the run is parked (no slot, no lease, due at its timeout); the send
    # makes it eligible now, in the send's transaction.
    late = any_store.jobs.enqueue("approve", {"input": None}, id="late")
    job = parked(any_store, late, 1)
    assert job.run_at == clock() + 60_000
    assert describe_run(any_store, late)["nodes"][0]["waiting"] == [
        {"kind": "signal", "key": "approval:late", "until": clock() + 60_000}]
    assert_holds_nothing(runner, job)
    second = signals.send("approval:late", {"by": "bob"})
    assert second > first
    assert any_store.jobs.get(late).run_at <= clock()  # woken in the send's own transaction
    job = wait_state(any_store, late, "done")
    assert job.result == {"got": {"by": "bob"}} and job.attempts == 2

    # Exactly once: a later signal of the same key is not received by the finished run.
    signals.send("approval:late", {"by": "eve"})
    assert signals.pending("approval:late") == 1
    assert signals.pending("approval:early") == 0


def test_one_signal_two_waiters_one_receives_it_the_other_times_out(any_store, clock, start_runner):
    runner = start_runner(any_store, [_waiting_flow("shared", lambda ctx: "go")], concurrency=2)
    a = any_store.jobs.enqueue("shared", {"input": None}, id="a")
    b = any_store.jobs.enqueue("shared", {"input": None}, id="b")
    assert_holds_nothing(runner, parked(any_store, a, 1))
    assert_holds_nothing(runner, parked(any_store, b, 1))
    any_store.signals.send("go", "once")
    got = wait_for(lambda: [j for j in (any_store.jobs.get(a), any_store.jobs.get(b)) if j.state == "done"],
                   what="one waiter to receive the signal")
    assert [j.result for j in got] == [{"got": "once"}]
    other = b if got[0].id == a else a
    parked(any_store, other, 2)  # woken by the send, found it taken, parked again until its timeout
    clock.advance(60_000)
    any_store.jobs.enqueue("poke", None)
    assert wait_state(any_store, other, "done").result == {"timeout": "TN5001"}
    assert any_store.signals.pending("go") == 0


def test_fan_out_of_50_children_decided_at_run_time_and_the_join_sees_all_50_in_order(any_store, start_runner):
    flow = Flow("fan", revision="1", output="join")
    child_calls = Recorder()

    @flow.task(version=1)
    def plan(ctx):
        return list(range(ctx.input["n"]))  # how many children: known only at run time

    @flow.task(needs=["plan"], version=1)
    def fan(ctx):
        return ctx.map("square", [{"i": i} for i in ctx["plan"]])

    @flow.task(needs=["fan"], version=1)
    def join(ctx):
        return {"count": len(ctx["fan"]), "first": ctx["fan"][:3], "sum": sum(ctx["fan"])}

    def square(payload, ctx):
        child_calls(payload["i"])
        return payload["i"] ** 2

    from tenure.flow import Runner

    runner = Runner(any_store, [flow], concurrency=4, poll_interval=0.02)
    worker = any_store.jobs.create_worker({**runner.handlers(), "square": square}, concurrency=4,
                                          poll_interval=0.02).start()
    try:
        run = any_store.jobs.enqueue("fan", {"input": {"n": 50}}, id="fan-run")
        job = wait_state(any_store, run, "done", timeout=60)
    finally:
        worker.stop(2)
    assert job.result == {"count": 50, "first": [0, 1, 4], "sum": sum(i * i for i in range(50))}
    assert sorted(child_calls.snapshot()) == list(range(50))  # each child ran exactly once
    children = [any_store.jobs.get(f"fan-run~fan:1.{i}") for i in range(50)]
    assert all(c.state == "done" and c.result == i * i for i, c in enumerate(children))


def test_the_parent_parks_while_children_run_and_wakes_when_the_last_settles(any_store, clock, start_runner):
    flow = Flow("parent", revision="1", output="gather")

    @flow.task(version=1)
    def gather(ctx):
        return ctx.map("leaf", [{"i": i} for i in range(3)])

    runner = start_runner(any_store, [flow])  # runs the flow only: the leaves wait for us
    run = any_store.jobs.enqueue("parent", {"input": None}, id="p")
    job = parked(any_store, run, 1)
    assert_holds_nothing(runner, job)
    assert job.run_at > clock()  # parked until a re-check far ahead, not polling
    leaves = [f"p~gather:1.{i}" for i in range(3)]
    for n in range(len(leaves)):
        claim = any_store.jobs.claim(kinds=["leaf"], owner="test")
        assert claim is not None and claim.job.id in leaves
        any_store.jobs.complete(claim.lease, claim.job.payload["i"] + 100)
        if n < 2:
            assert any_store.jobs.get(run).run_at > clock()  # not before the LAST child settles
    assert any_store.jobs.get(run).run_at <= clock()  # the last settlement woke it, in its transaction
    assert wait_state(any_store, run, "done").result == [100, 101, 102]


def test_a_dead_child_fails_the_join_with_a_coded_error_the_node_can_catch(any_store, start_runner):
    flow = Flow("brittle", revision="1", output="gather")

    @flow.task(version=1)
    def gather(ctx):
        try:
            return ctx.map("leaf", [1, 2])
        except ChildFailed as exc:
            return {"code": exc.code, "failed": [(f["id"], f["state"]) for f in exc.details["failed"]]}

    def leaf(payload, ctx):
        if payload == 2:
            raise tenure.Discard("no")
        return payload

    from tenure.flow import Runner

    worker = any_store.jobs.create_worker({**Runner(any_store, [flow]).handlers(), "leaf": leaf},
                                          poll_interval=0.02).start()
    try:
        run = any_store.jobs.enqueue("brittle", {"input": None}, id="b")
        job = wait_state(any_store, run, "done")
    finally:
        worker.stop(2)
    assert job.result == {"code": "TN5002", "failed": [["b~gather:1.1", "dead"]]}


def test_a_node_starts_a_child_workflow_and_waits_for_its_result(any_store, start_runner):
    child = Flow("child-flow", revision="1", output="double")

    @child.task(version=1)
    def double(ctx):
        return ctx.input["x"] * 2

    parent = Flow("parent-flow", revision="1", output="use")

    @parent.task(version=1)
    def use(ctx):
        return {"child": ctx.call("child-flow", {"input": {"x": 21}})}

    start_runner(any_store, [parent, child], concurrency=2)
    run = any_store.jobs.enqueue("parent-flow", {"input": None}, id="pf")
    assert wait_state(any_store, run, "done").result == {"child": 42}
    assert any_store.jobs.get("pf~use:1.0").result == 42


def test_a_step_replayed_as_another_kind_is_refused_by_name(any_store, clock):
    mode = {"first": True}

    def handler(payload, ctx):
        if mode["first"]:
            ctx.sleep(1)
        else:
            ctx.wait_for_signal("x")  # step 1 was recorded as a sleep: another code path
        return "unreachable"

    worker = any_store.jobs.create_worker({"drift": handler}, poll_interval=0.02).start()
    try:
        jid = any_store.jobs.enqueue("drift", None, max_attempts=1)
        job = parked(any_store, jid, 1)
        assert job.max_attempts == 2  # parking did not use up the one attempt
        mode["first"] = False
        clock.advance(1000)
        any_store.jobs.enqueue("poke", None)
        job = wait_state(any_store, jid, "dead")
    finally:
        worker.stop(2)
    assert job.last_error.startswith(f"[{ResumeMismatch.code}] cannot resume job")
    assert "'kind': 'sleep'" in job.last_error and "'kind': 'signal'" in job.last_error
    assert any_store.signals.pending("x") == 0


def test_bad_signal_input_is_refused_by_code_and_writes_nothing(any_store):
    signals = any_store.signals
    with pytest.raises(InvalidType) as e1:
        signals.send(42, "x")
    with pytest.raises(InvalidArgument) as e2:
        signals.send("", "x")
    with pytest.raises(InvalidArgument):
        signals.send("k\x00", "x")
    with pytest.raises(InvalidArgument):
        signals.send("k" * 1025, "x")
    with pytest.raises((InvalidType, InvalidArgument)) as e3:
        signals.send("k", object())
    with pytest.raises(InvalidType):
        signals.pending(None)
    assert (e1.value.code, e2.value.code) == ("TN1002", "TN1001") and e3.value.code in ("TN1001", "TN1002")
    assert signals.pending("k") == 0 and signals.pending("k" * 3) == 0


def test_two_parallel_nodes_park_on_a_sleep_and_a_signal_and_each_wakes_on_its_own(any_store, clock, start_runner):
    calls = Recorder()
    flow = Flow("both", revision="1", output="done")

    @flow.task(version=1)
    def nap(ctx):
        calls("nap")
        ctx.sleep(30)
        return "rested"

    @flow.task(version=1)
    def hear(ctx):
        calls("hear")
        return ctx.wait_for_signal(f"hear:{ctx.run_id}", timeout=600)

    @flow.task(needs=["nap", "hear"], version=1)
    def done(ctx):
        return [ctx["nap"], ctx["hear"]]

    runner = start_runner(any_store, [flow])
    start = clock()
    run = any_store.jobs.enqueue("both", {"input": None}, id="two")
    job = parked(any_store, run, 1)
    assert job.run_at == start + 30_000  # one park: due at the earliest of the two steps
    assert_holds_nothing(runner, job)
    any_store.signals.send("hear:two", "heard")  # wakes the run now; the signal node completes,
    job = parked(any_store, run, 2)  # the sleep is not over: parked again, due at its own end
    assert job.run_at == start + 30_000
    assert [n for n, *_ in rows(any_store, run) if not n.startswith("__")] == ["hear"]
    clock.advance(30_000)
    any_store.jobs.enqueue("poke", None)
    assert wait_state(any_store, run, "done").result == ["rested", "heard"]
    assert calls.count("hear") == 2 and calls.count("nap") == 3  # parked, woken; not run after it is saved


def test_cancelling_a_parent_cancels_the_children_it_is_waiting_for(any_store, start_runner):
    flow = Flow("cancel-fan", revision="1", output="fan")

    @flow.task(version=1)
    def fan(ctx):
        return ctx.map("never-handled", [1, 2, 3])

    start_runner(any_store, [flow])
    run = any_store.jobs.enqueue("cancel-fan", {"input": None}, id="cf")
    parked(any_store, run, 1)
    assert any_store.jobs.cancel(run) is not None
    children = [any_store.jobs.get(f"cf~fan:1.{i}") for i in range(3)]
    assert [c.state for c in children] == ["cancelled"] * 3  # in the cancel's own transaction


def test_cancelling_a_job_cancels_its_childrens_children_too(any_store):
    def top(payload, ctx):
        return ctx.map("mid", [1])

    def mid(payload, ctx):
        return ctx.map("leaf", [1, 2])  # "leaf" has no handler here: they stay pending

    worker = any_store.jobs.create_worker({"top": top, "mid": mid}, poll_interval=0.02).start()
    try:
        jid = any_store.jobs.enqueue("top", None, id="t")
        parked(any_store, jid, 1)
        parked(any_store, "t~1.0", 1)
        assert any_store.jobs.cancel(jid) is not None
    finally:
        worker.stop(2)
    states = {i: any_store.jobs.get(i).state for i in ("t", "t~1.0", "t~1.0~1.0", "t~1.0~1.1")}
    assert states == {"t": "cancelled", "t~1.0": "cancelled", "t~1.0~1.0": "cancelled", "t~1.0~1.1": "cancelled"}
