"""Distributed runs: ``Runner(..., distributed=True)`` runs each node as its own job,
spread over every worker, with the in-process mode's identity rules and checkpoints, and
cancellation reaching every node job. Both engines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import tenure
from tenure.flow import Flow, Runner, describe_run
from tenure.flow.distributed import NODE_JOB_PREFIX

from ._kill_flow import CHILD_LEASE_MS, build, calls
from ._support import Recorder, rows, wait_for, wait_state


def test_nodes_run_as_their_own_jobs_on_two_workers_and_the_output_is_the_same(live_store):
    barrier = threading.Barrier(2, timeout=20)
    owners = Recorder()
    flow = Flow("spread", revision="1", output="join")

    @flow.task(version=1)
    def start(ctx):
        return ctx.input["n"]

    def side(ctx):
        owners((ctx.node_id, ctx.job.lease_owner, ctx.run_id, ctx.idempotency_key))
        barrier.wait()  # both sides at once: each worker has one slot, so two workers run them
        return ctx["start"] * (2 if ctx.node_id == "left" else 3)

    flow.task(name="left", needs=["start"], version=1)(side)
    flow.node("right", "left", needs=["start"])

    @flow.task(needs=["left", "right"], version=1)
    def join(ctx):
        return {"left": ctx["left"], "right": ctx["right"]}

    runner = Runner(live_store, [flow], distributed=True)
    workers = [live_store.jobs.create_worker(runner.handlers(), concurrency=1, poll_interval=0.02,
                                             owner=f"w{i}").start() for i in (1, 2)]
    try:
        run = live_store.jobs.enqueue("spread", {"input": {"n": 7}}, id="sp")
        job = wait_state(live_store, run, "done", timeout=30)
    finally:
        for w in workers:
            w.stop(2)
    assert job.result == {"left": 14, "right": 21}
    seen = owners.snapshot()
    assert sorted(n for n, *_ in seen) == ["left", "right"]
    assert {o for _, o, *_ in seen} == {"w1", "w2"}  # one node on each worker
    assert all(r == "sp" and k == f"sp:{n}" for n, _, r, k in seen)  # the RUN's id, not the node job's
    nodes = {n: live_store.jobs.get(f"sp~node:{n}.1") for n in ("start", "left", "right", "join")}
    assert {n: (j.state, j.result) for n, j in nodes.items()} == {
        "start": ("done", 7), "left": ("done", 14), "right": ("done", 21),
        "join": ("done", {"left": 14, "right": 21})}
    assert rows(live_store, run) == []  # the run's checkpoints pruned with its completion, as in-process


def test_a_node_job_claimed_by_other_code_is_refused_by_name_and_the_run_is_dead(any_store):
    def build(version: int) -> Flow:
        flow = Flow("versioned", revision="1", output="a")

        @flow.task(version=version)
        def a(ctx):
            return version

        return flow

    old = Runner(any_store, [build(1)], distributed=True).handlers()
    new = Runner(any_store, [build(2)], distributed=True).handlers()
    # The coordinator runs the old code; the node job lands on a worker with the new code.
    worker = any_store.jobs.create_worker({"versioned": old["versioned"], "versioned:node": new["versioned:node"]},
                                          poll_interval=0.02).start()
    try:
        run = any_store.jobs.enqueue("versioned", {"input": None}, id="v")
        job = wait_state(any_store, run, "dead")
    finally:
        worker.stop(2)
    node = any_store.jobs.get("v~node:a.1")
    assert node.state == "dead" and node.last_error.startswith("[TN2069] cannot run node 'a' of run 'v'")
    assert "'a' moved from version 1 to 2" in node.last_error
    assert job.last_error.startswith("[TN2069]") and job.attempts == 2  # dead at once, not retried


def test_cancelling_a_distributed_run_reaches_every_node_job(live_store, gates):
    release = gates()
    started = Recorder()
    stopped = Recorder()
    flow = Flow("cancel-all", revision="1", max_parallel=3)

    def busy(ctx):
        started(ctx.node_id)
        while not ctx.cancelled.wait(0.02):
            if release.is_set():
                return "released"
        stopped((ctx.node_id, getattr(ctx.cancelled.reason, "code", None)))
        return "cancelled"

    flow.task(name="n1", version=1)(busy)
    flow.node("n2", "n1")
    flow.node("n3", "n1")

    runner = Runner(live_store, [flow], distributed=True)
    worker = live_store.jobs.create_worker(runner.handlers(), concurrency=2, poll_interval=0.02).start()
    try:
        run = live_store.jobs.enqueue("cancel-all", {"input": None}, id="ca")
        wait_for(lambda: len(started.snapshot()) == 2, 20, "two node jobs to run (the third has no slot)")
        parked = live_store.jobs.get(run)
        assert parked.state == "pending" and parked.lease_until is None  # the coordinator holds no slot
        assert live_store.jobs.cancel(run) is not None
        wait_for(lambda: len(stopped.snapshot()) == 2, 20, "both running node jobs to see the cancellation")
        states = wait_for(lambda: (lambda s: s if all(x == "cancelled" for x in s.values()) else None)(
            {n: live_store.jobs.get(f"ca~node:{n}.1").state for n in ("n1", "n2", "n3")}), 20,
            "every node job to be cancelled")
    finally:
        worker.stop(2)
    assert states == {"n1": "cancelled", "n2": "cancelled", "n3": "cancelled"}
    assert sorted(started.snapshot()) == sorted(n for n, _ in stopped.snapshot())  # the queued one never ran
    assert live_store.jobs.get(run).state == "cancelled"


def test_describe_run_shows_a_distributed_run_like_an_in_process_one(any_store):
    flow = Flow("shown", revision="1", output="b")

    @flow.task(version=1)
    def a(ctx):
        return 1

    @flow.task(needs=["a"], version=1)
    def b(ctx):
        return ctx["a"] + 1

    handlers = Runner(any_store, [flow], distributed=True).handlers()
    coordinator = any_store.jobs.create_worker({"shown": handlers["shown"]}, poll_interval=0.02).start()
    try:
        run = any_store.jobs.enqueue("shown", {"input": None}, id="sh")
        wait_for(lambda: any_store.jobs.get("sh~node:a.1"), 10, "node a's job to be started")
        wait_state(any_store, run, "pending")
    finally:
        coordinator.stop(2)
    view = describe_run(any_store, run, flow=flow)
    assert [(n["id"], n["status"], n["waiting"]) for n in view["nodes"]] == [
        ("a", "ready", [{"kind": "node_job", "job": "sh~node:a.1"}]), ("b", "pending", [])]
    assert [n for n, *_ in rows(any_store, run)] == [f"{NODE_JOB_PREFIX}a", "__tenure_run__"]


def test_kill_9_inside_a_node_job_then_another_worker_finishes_the_run(engine_url, tmp_path):
    """A real worker process runs the distributed run ``a -> b -> c -> d``; node ``c``'s job blocks
    and the process is SIGKILLed. A second worker, whose clock is past the dead one's leases,
    reclaims ``c``'s job; its settlement wakes the parked coordinator, which records ``c`` and runs
    ``d``: ``a`` and ``b`` are not run again, each node's job ran to completion once."""
    child_script = Path(__file__).with_name("_kill_flow.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(child_script.parent), os.environ.get("PYTHONPATH", "")])}
    store = tenure.connect(engine_url)
    run = store.jobs.enqueue("kill-me", {"input": {"n": 4}}, id="run-dk")
    child = subprocess.Popen([sys.executable, str(child_script), engine_url, str(tmp_path), "distributed"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (tmp_path / "c-started").exists() or child.poll() is not None, timeout=30,
                 what="node c's job to start")
        assert child.poll() is None, child.stderr.read().decode()
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert [n for n, _ in calls(tmp_path)] == ["a", "b", "c"]
    # The coordinator parked after starting c's job, or was about to (c's job can start on the
    # other slot before the park commits): either way the next worker resumes it.
    assert store.jobs.get(run).state in ("pending", "leased")
    assert store.jobs.get("run-dk~node:c.1").state == "leased"
    store.close()

    later = tenure.connect(engine_url, clock=lambda: time.time_ns() // 1_000_000 + CHILD_LEASE_MS + 60_000)
    runner = Runner(later, [build(tmp_path, block_c=False)], distributed=True, poll_interval=0.05).start()
    try:
        job = wait_state(later, run, "done", timeout=30)
    finally:
        runner.stop()
    assert job.result == {"total": 41, "run": "run-dk"}
    assert [n for n, _ in calls(tmp_path)] == ["a", "b", "c", "c", "d"]
    assert later.jobs.get("run-dk~node:c.1").attempts == 2  # the same node job, reclaimed, not a new one
    assert all(later.jobs.get(f"run-dk~node:{n}.1").state == "done" for n in "abcd")
    later.close()
