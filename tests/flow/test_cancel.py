"""Cancellation and the runner's worker options: spec 7.7, 7.8, 7.9, on both
engines. Every running task gets the run's cancellation (the job handler's ``ctx.cancelled``):
the worker stopping, a lost lease and an operator's cancel reach sync and async tasks alike."""

from __future__ import annotations

import asyncio
import threading
import time

from tenure.flow import RUN_NODE, Flow, Runner

from ._support import FENCE, Recorder, rows, wait_for, wait_state


def listening_flow(name: str, seen: Recorder, started: Recorder, after: Recorder | None = None) -> Flow:
    """Three parallel tasks (two sync waiting on ``ctx.cancelled``, one async awaiting something
    else) that record the cancellation's reason; a fourth node needs all three."""
    flow = Flow(name, max_parallel=3)

    def make_sync(node):
        def wait_sync(ctx):
            started(node)
            assert ctx.cancelled.wait(10), "never cancelled"
            seen((node, getattr(ctx.cancelled.reason, "code", None)))
            return node
        return wait_sync

    async def wait_async(ctx):
        started("c")
        try:
            await asyncio.sleep(30)  # an await in flight: the run cancels it (asyncio) ...
        except asyncio.CancelledError:
            seen(("c", getattr(ctx.cancelled.reason, "code", None)))  # ... and the event says why
            raise
        return "c"

    flow.registry.add("a", make_sync("a"), version=1)
    flow.registry.add("b", make_sync("b"), version=1)
    flow.registry.add("c", wait_async, version=1)
    flow.registry.add("after", lambda ctx: (after or Recorder())("ran"), version=1)
    for n in ("a", "b", "c"):
        flow.node(n)
    flow.node("after", needs=["a", "b", "c"])
    return flow


def test_7_7_stop_reaches_every_running_task(any_store, start_runner):
    seen, started, after = Recorder(), Recorder(), Recorder()
    flow = listening_flow("listen", seen, started, after)
    runner = start_runner(any_store, [flow])
    job_id = any_store.jobs.enqueue("listen", None)
    wait_for(lambda: len(started.snapshot()) == 3, what="three tasks running")
    result = runner.stop(grace=5)
    assert result.drained and result.in_flight == 0
    assert sorted(seen.snapshot()) == [("a", "shutdown"), ("b", "shutdown"), ("c", "shutdown")]
    job = any_store.jobs.get(job_id)
    assert job.state == "failed" and "interrupted" in job.last_error
    assert after.snapshot() == []  # nothing new starts after the cancellation
    # the sync tasks returned after the cancellation with the lease still valid: their values
    # are real work and were saved; the async one was interrupted and saved nothing
    assert [r[0] for r in rows(any_store, job_id)] == [RUN_NODE, "a", "b"]


def test_7_7_a_lost_lease_reaches_every_running_task(any_store, clock, start_runner):
    seen, started, outcomes = Recorder(), Recorder(), Recorder()
    start_runner(any_store, [listening_flow("listen", seen, started)], lease=0.3, on_outcome=outcomes)
    job_id = any_store.jobs.enqueue("listen", None)
    wait_for(lambda: len(started.snapshot()) == 3, what="three tasks running")
    clock.advance(300)  # the lease is over: a rival reclaims, the keeper's next renewal is refused
    rival = any_store.jobs.claim("listen", owner="rival", lease_ms=60_000)
    assert rival is not None and rival.lease.generation == 2
    wait_for(lambda: len(seen.snapshot()) == 3, what="every task to see the loss")
    assert {node for node, _ in seen.snapshot()} == {"a", "b", "c"}
    assert {code for _, code in seen.snapshot()} <= FENCE
    wait_for(lambda: outcomes.snapshot(), what="the lost outcome")
    assert outcomes.snapshot()[0]["outcome"] == "lost"
    # the stale attempt's late values were refused: only its identity record exists
    assert [(n, g) for n, _, g in rows(any_store, job_id)] == [(RUN_NODE, 1)]
    assert any_store.jobs.get(job_id).lease_generation == 2


def test_7_7_an_operators_cancel_reaches_every_running_task(any_store, start_runner):
    seen, started, outcomes = Recorder(), Recorder(), Recorder()
    runner = start_runner(any_store, [listening_flow("listen", seen, started)], on_outcome=outcomes)
    job_id = any_store.jobs.enqueue("listen", None)
    wait_for(lambda: len(started.snapshot()) == 3, what="three tasks running")
    (lease,) = runner.worker.leases()
    assert any_store.jobs.cancel(job_id, lease=lease) is True
    assert sorted(seen.snapshot()) == [("a", "TN2065"), ("b", "TN2065"), ("c", "TN2065")]
    assert any_store.jobs.get(job_id).state == "cancelled"
    wait_for(lambda: outcomes.snapshot(), what="the cancelled outcome")
    assert outcomes.snapshot()[0]["outcome"] == "cancelled"


def hostile_flow(gate: threading.Event, started: Recorder) -> Flow:
    flow = Flow("hostile")

    def ignore_cancellation(ctx):
        started(ctx.job_id)
        gate.wait(30)  # never looks at ctx.cancelled
        return 1

    flow.registry.add("stubborn", ignore_cancellation, version=1)
    flow.node("stubborn")
    return flow


def timed_stop(runner: Runner, *args) -> tuple[float, object]:
    t0 = time.monotonic()
    result = runner.stop(*args)
    return time.monotonic() - t0, result


def test_7_9_stop_uses_the_runners_stop_grace_and_an_explicit_grace_wins(sqlite_store, gates):
    gate, started = gates(), Recorder()
    flow = hostile_flow(gate, started)
    cases = [(0.3, (), 0.3), (5.0, (0.3,), 0.3), (0.3, (0.9,), 0.9)]
    runners = []
    try:
        for i, (declared, args, expected) in enumerate(cases):
            runner = Runner(sqlite_store, [flow], stop_grace=declared, poll_interval=0.05).start()
            runners.append(runner)
            sqlite_store.jobs.enqueue("hostile", None, id=f"h{i}")
            wait_for(lambda i=i: f"h{i}" in started.snapshot(), what=f"hostile task {i}")
            took, result = timed_stop(runner, *args)
            assert result.drained is False and result.in_flight == 1
            assert expected - 0.05 <= took < expected + 1.0, (declared, args, took)
    finally:
        gate.set()
    # the detached attempts write nothing when they finally return (6.26)
    time.sleep(0.2)
    for i in range(len(cases)):
        job = sqlite_store.jobs.get(f"h{i}")
        assert job.state == "leased" and job.result is None


def test_7_8_the_runner_forwards_the_worker_options(any_store, clock, rand, start_runner):
    outcomes = Recorder()
    both = threading.Barrier(2, timeout=5)  # two runs can only pass it together
    pair = Flow("pair")
    pair.registry.add("meet", lambda ctx: both.wait() is not None, version=1)
    pair.node("meet")
    boom = Flow("boom")

    def explode(ctx):
        raise RuntimeError("boom")

    boom.registry.add("explode", explode, version=1)
    boom.node("explode")
    rand.value = 0.0
    runner = start_runner(any_store, [pair, boom], concurrency=2, poll_interval=0.05, lease=4.321,
                          owner="flow-worker", renew=False, on_outcome=outcomes, backoff_base=0.5,
                          backoff_cap=2.0, stop_grace=0.7)
    w = runner.worker
    assert (w.concurrency, w.poll_interval, w.lease_ms, w.owner, w.renew, w.on_outcome) == (
        2, 0.05, 4321, "flow-worker", False, outcomes)
    assert (w.backoff_base_ms, w.backoff_cap_ms, w.stop_grace, runner.stop_grace) == (500, 2000, 0.7, 0.7)
    ids = [any_store.jobs.enqueue("pair", None) for _ in range(2)]
    for job_id in ids:
        assert wait_state(any_store, job_id, "done").result == {"meet": True}
    failed = wait_state(any_store, any_store.jobs.enqueue("boom", None), "failed")
    assert failed.run_at - clock() == 250  # backoff_base 0.5 s, attempt 1, random 0 -> half of 500 ms
    wait_for(lambda: len(outcomes.snapshot()) == 3, what="three outcomes")
    assert sorted(e["outcome"] for e in outcomes.snapshot()) == ["completed", "completed", "failed"]


def test_runner_handlers_merge_into_any_worker(sqlite_store):
    flow = Flow("merged")
    flow.registry.add("x", lambda ctx: "x", version=1)
    flow.node("x")
    runner = Runner(sqlite_store, [flow])
    worker = sqlite_store.jobs.create_worker({**runner.handlers(), "plain": lambda payload, ctx: "plain"},
                                          poll_interval=0.05).start()
    try:
        a = sqlite_store.jobs.enqueue("merged", None)
        b = sqlite_store.jobs.enqueue("plain", None)
        assert wait_state(sqlite_store, a, "done").result == {"x": "x"}
        assert wait_state(sqlite_store, b, "done").result == "plain"
    finally:
        worker.stop()
