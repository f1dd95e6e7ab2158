"""Running workflows on both engines: spec 7.2-7.6, 7.10, 7.15 and 5.4.

The store's clock is injected and frozen (``any_store``): leases never expire on their own, and a
test moves the clock to let a rival reclaim. Tests wait only for real progress (a task starting),
never for a lease to run out."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tenure.flow import RUN_NODE, Flow, RunIdentity

from ._support import FENCE, Recorder, rows, wait_for, wait_state


def report_flow(calls: Recorder, *, revision: str = "1") -> Flow:
    """fetch -> transform -> (load_a async, load_b sync) -> report."""
    flow = Flow("sync-report", revision=revision, output="report")

    @flow.task(version=1)
    def fetch(ctx):
        calls("fetch")
        return {"day": ctx.input["day"], "rows": [3, 1, 2]}

    @flow.task(needs=["fetch"], version=1)
    def transform(ctx):
        calls("transform")
        return sorted(ctx["fetch"]["rows"])

    @flow.task(needs=["transform"], version=1)
    async def load_a(ctx):
        calls("load_a")
        await asyncio.sleep(0)
        return {"loaded": len(ctx["transform"]), "key": ctx.idempotency_key}

    @flow.task(needs=["transform"], version=1)
    def load_b(ctx):
        calls("load_b")
        return sum(ctx["transform"])

    @flow.task(needs=["load_a", "load_b"], version=1)
    def report(ctx):
        calls("report")
        return {"day": ctx.input["day"], "a": ctx["load_a"]["loaded"], "b": ctx["load_b"], "run": ctx.run_id}

    return flow


def test_7_2_7_4_a_run_is_a_job_and_its_output_is_the_result(any_store, start_runner):
    calls, outcomes = Recorder(), Recorder()
    start_runner(any_store, [report_flow(calls)], on_outcome=outcomes)
    job_id = any_store.jobs.enqueue("sync-report", {"input": {"day": "2026-08-05"}}, id="run-1")
    job = wait_state(any_store, job_id, "done", "failed", "dead")
    assert job.state == "done", job.last_error
    assert job.result == {"day": "2026-08-05", "a": 3, "b": 6, "run": "run-1"}
    assert sorted(calls.snapshot()) == ["fetch", "load_a", "load_b", "report", "transform"]
    assert rows(any_store, job_id) == []  # 7.4: done and pruned together
    wait_for(lambda: outcomes.snapshot(), what="on_outcome")
    assert [e["outcome"] for e in outcomes.snapshot()] == ["completed"]


def test_7_2_output_may_be_a_map_of_nodes_or_of_every_sink(sqlite_store, start_runner):
    both = Flow("two-out", output=["a", "b"])
    sinks = Flow("sinks")
    for f in (both, sinks):
        f.registry.add("a", lambda ctx: 1, version=1)
        f.registry.add("b", lambda ctx: ctx["a"] + 1, version=1)
        f.registry.add("c", lambda ctx: ctx["a"] + 2, version=1)
        f.node("a")
        f.node("b", needs=["a"])
        f.node("c", needs=["a"])
    start_runner(sqlite_store, [both, sinks])
    j1 = sqlite_store.jobs.enqueue("two-out", {"input": None})
    j2 = sqlite_store.jobs.enqueue("sinks", None)  # no payload: the input is None
    assert wait_state(sqlite_store, j1, "done").result == {"a": 1, "b": 2}
    assert wait_state(sqlite_store, j2, "done").result == {"b": 2, "c": 3}


def gated_flow(name: str, gate: threading.Event, started: Recorder, calls: Recorder) -> Flow:
    """a -> b (blocks on ``gate`` in attempt 1) -> c (needs a and b)."""
    flow = Flow(name, revision="1", output="c")

    @flow.task(version=1)
    def a(ctx):
        calls("a")
        return {"a": ctx.input}

    @flow.task(needs=["a"], version=1)
    def b(ctx):
        calls("b")
        started(("b", ctx.attempt))
        if ctx.attempt == 1:
            gate.wait(10)
        return "b-value"

    @flow.task(needs=["a", "b"], version=1)
    def c(ctx):
        calls("c")
        return [ctx["a"], ctx["b"]]

    return flow


def test_7_3_7_10_node_values_and_the_identity_are_checkpointed_as_the_run_goes(any_store, start_runner, gates):
    gate, started, calls = gates(), Recorder(), Recorder()
    flow = gated_flow("g", gate, started, calls)
    start_runner(any_store, [flow])
    job_id = any_store.jobs.enqueue("g", {"input": 7})
    wait_for(lambda: started.snapshot(), what="node b to start")
    identity = RunIdentity.of(flow, 7, {"a": 1, "b": 1, "c": 1}).record()
    assert rows(any_store, job_id) == [(RUN_NODE, identity, 1), ("a", {"a": 7}, 1)]
    assert identity["revision"] == "1" and identity["task_versions"] == {"a": 1, "b": 1, "c": 1}
    gate.set()
    assert wait_state(any_store, job_id, "done").result == [{"a": 7}, "b-value"]
    assert rows(any_store, job_id) == []  # 7.10: the reserved entry is pruned with the rest


def test_7_5_7_15_5_4_a_reclaimed_run_restores_recorded_nodes_and_a_stale_attempt_writes_nothing(
        any_store, clock, start_runner, gates):
    gate, started, calls, outcomes = gates(), Recorder(), Recorder(), Recorder()
    b2_gate = gates()
    flow = gated_flow("g", gate, started, calls)
    # attempt 2's b waits on its own gate so the rows can be inspected while it runs
    inner_b = flow.registry.get("b").fn

    def b(ctx):
        value = inner_b(ctx)
        if ctx.attempt == 2:
            b2_gate.wait(10)
        return value

    object.__setattr__(flow.registry.get("b"), "fn", b)
    first = start_runner(any_store, [flow], renew=False, on_outcome=outcomes, owner="first")
    job_id = any_store.jobs.enqueue("g", {"input": 1})
    wait_for(lambda: ("b", 1) in started.snapshot(), what="attempt 1's b")
    before = rows(any_store, job_id)
    assert [r[0] for r in before] == [RUN_NODE, "a"] and {r[2] for r in before} == {1}

    clock.advance(30_001)  # attempt 1's lease (30 s) is over; it is still running
    start_runner(any_store, [flow], on_outcome=outcomes, owner="second")
    wait_for(lambda: ("b", 2) in started.snapshot(), what="attempt 2's b")
    # 7.15: the agreeing resume restored a and wrote nothing, pruned nothing
    assert rows(any_store, job_id) == before
    assert calls.count("a") == 1

    gate.set()  # 5.4: the stale attempt's b returns; its save is refused and writes nothing
    wait_for(lambda: [e for e in outcomes.snapshot() if e["generation"] == 1], what="attempt 1's outcome")
    stale = [e for e in outcomes.snapshot() if e["generation"] == 1]
    assert stale[0]["outcome"] == "lost" and stale[0]["code"] == "TN2066"
    assert rows(any_store, job_id) == before
    job = any_store.jobs.get(job_id)
    assert job.state == "leased" and job.lease_generation == 2 and job.result is None

    b2_gate.set()
    job = wait_state(any_store, job_id, "done")
    assert job.result == [{"a": 1}, "b-value"]
    assert (calls.count("a"), calls.count("b"), calls.count("c")) == (1, 2, 1)  # 7.5
    assert rows(any_store, job_id) == []
    first.stop()


def test_7_4_5_4_a_stale_complete_cannot_prune_the_live_attempts_checkpoints(any_store, clock):
    jobs = any_store.jobs
    job_id = jobs.enqueue("g", {"input": 1})
    old = jobs.claim("g", owner="old").lease
    jobs.checkpoints(old).save(RUN_NODE, {"revision": "1"})
    jobs.checkpoints(old).save("a", 1)
    clock.advance(30_000)
    live = jobs.claim("g", owner="live").lease
    jobs.checkpoints(live).save("b", 2)
    with pytest.raises(Exception) as e:
        jobs.complete(old, {"stale": True})
    assert e.value.code == "TN2066"
    assert rows(any_store, job_id) == [(RUN_NODE, {"revision": "1"}, 1), ("a", 1, 1), ("b", 2, 2)]
    job = jobs.get(job_id)
    assert job.state == "leased" and job.result is None
    jobs.complete(live, {"ok": 1})
    assert rows(any_store, job_id) == [] and jobs.get(job_id).result == {"ok": 1}


def test_a_failing_task_fails_the_attempt_and_the_retry_reruns_only_what_is_missing(
        any_store, clock, start_runner):
    calls = Recorder()
    b_raised = threading.Event()
    flow = Flow("fails", revision="1", output="c")

    @flow.task(version=1)
    def a(ctx):
        calls("a")
        b_raised.wait(5)  # still running when its sibling fails: its value is kept
        return "A"

    @flow.task(version=1)
    def b(ctx):
        calls("b")
        if ctx.attempt == 1:
            b_raised.set()
            raise ValueError("bad row 17")
        return "B"

    @flow.task(needs=["a", "b"], version=1)
    def c(ctx):
        calls("c")
        return ctx["a"] + ctx["b"]

    start_runner(any_store, [flow])
    job_id = any_store.jobs.enqueue("fails", {"input": None})
    job = wait_state(any_store, job_id, "failed")
    assert "node 'b' (task 'b' version 1) failed: ValueError: bad row 17" in job.last_error
    assert [r[0] for r in rows(any_store, job_id)] == [RUN_NODE, "a"]
    assert calls.count("c") == 0
    clock.advance(job.run_at - clock())  # the retry is due
    any_store.jobs.enqueue("nudge", None)  # a same-store enqueue wakes the worker at once
    job = wait_state(any_store, job_id, "done")
    assert job.result == "AB" and job.attempts == 2
    assert (calls.count("a"), calls.count("b"), calls.count("c")) == (1, 2, 1)


def test_independent_nodes_run_concurrently_bounded_by_max_parallel(sqlite_store, start_runner):
    active, peak, lock = [0], [0], threading.Lock()
    pair = threading.Barrier(2, timeout=5)  # passes only if two sync tasks run at once
    flow = Flow("wide", max_parallel=2)

    def work(ctx):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        pair.wait()
        with lock:
            active[0] -= 1
        return ctx.node_id

    for i in range(4):
        flow.registry.add(f"s{i}", work, version=1)
        flow.node(f"s{i}")
    start_runner(sqlite_store, [flow])
    job = wait_state(sqlite_store, sqlite_store.jobs.enqueue("wide", None), "done", "failed")
    assert job.state == "done", job.last_error
    assert peak[0] == 2 and job.result == {f"s{i}": f"s{i}" for i in range(4)}


def test_async_tasks_share_the_runs_loop_and_sync_tasks_run_beside_them(sqlite_store, start_runner):
    flow = Flow("mixed", max_parallel=3)
    seen: dict[str, bool] = {}
    sync_started = threading.Event()

    async def ping(ctx):
        seen["ping"] = True
        for _ in range(500):  # waits for pong: only possible if both run on the loop at once
            if seen.get("pong"):
                return "ping"
            await asyncio.sleep(0.01)
        raise TimeoutError("pong never ran concurrently")

    async def pong(ctx):
        seen["pong"] = True
        for _ in range(500):
            if seen.get("ping") and sync_started.is_set():
                return "pong"
            await asyncio.sleep(0.01)
        raise TimeoutError("ping never ran concurrently")

    def blocking(ctx):
        sync_started.set()
        return threading.current_thread().name

    flow.registry.add("ping", ping, version=1)
    flow.registry.add("pong", pong, version=1)
    flow.registry.add("blocking", blocking, version=1)
    for n in ("ping", "pong", "blocking"):
        flow.node(n)
    start_runner(sqlite_store, [flow])
    job = wait_state(sqlite_store, sqlite_store.jobs.enqueue("mixed", None), "done", "failed")
    assert job.state == "done", job.last_error
    assert job.result["ping"] == "ping" and job.result["pong"] == "pong"
    assert job.result["blocking"].startswith("tenure-flow-mixed")  # the run's own thread pool


def test_7_6_every_task_can_read_the_job_id(sqlite_store, start_runner):
    flow = Flow("ids")
    flow.registry.add("who", lambda ctx: [ctx.job_id, ctx.run_id, ctx.idempotency_key, ctx.job.id,
                                          ctx.generation, ctx.attempt], version=1)
    flow.node("who")
    start_runner(sqlite_store, [flow])
    job_id = sqlite_store.jobs.enqueue("ids", None, id="order-42")
    assert wait_state(sqlite_store, job_id, "done").result == {
        "who": ["order-42", "order-42", "order-42:who", "order-42", 1, 1]}


def test_a_value_that_cannot_be_stored_fails_its_node(sqlite_store, start_runner):
    flow = Flow("bad-value")
    flow.registry.add("obj", lambda ctx: object(), version=1)
    flow.node("obj")
    start_runner(sqlite_store, [flow])
    job = wait_state(sqlite_store, sqlite_store.jobs.enqueue("bad-value", None), "failed")
    assert "node 'obj'" in job.last_error and rows(sqlite_store, job.id) == [
        (RUN_NODE, RunIdentity.of(flow, None, {"obj": 1}).record(), 1)]


def test_a_malformed_payload_makes_the_run_dead_at_once(sqlite_store, start_runner):
    outcomes = Recorder()
    flow = Flow("strict")
    flow.registry.add("a", lambda ctx: 1, version=1)
    flow.node("a")
    start_runner(sqlite_store, [flow], on_outcome=outcomes)
    job = wait_state(sqlite_store, sqlite_store.jobs.enqueue("strict", {"day": 1}), "dead", "failed")
    assert job.state == "dead" and job.attempts == 1 and "{\"input\": ...}" in job.last_error
    wait_for(lambda: outcomes.snapshot(), what="outcome")
    assert outcomes.snapshot()[0]["outcome"] == "failed"


def test_fence_codes_helper_matches_the_error_table():
    from tenure.errors import FENCE_CODES

    assert set(FENCE_CODES) == FENCE
