"""A worker's shutdown does not turn a durable step's park into a failure, for a plain handler
and a flow run alike (spec 6.23: the cancellation reason tells a shutdown from a loss or an
operator's cancel).

A handler that takes a durable step after its worker began stopping parks as the step asked: the
step's record is saved with the park, no retry is used up. A flow run used to fail instead
(``RunInterrupted``): a retry used up (a run with ``max_attempts=1`` dead), the step's record lost,
so the sleep started over on the next attempt. Now the run parks on its parked nodes; when the
shutdown also cut other nodes short (interrupted, or ready and never started), it parks due at
once, so they run again as soon as a worker takes it, and the parked steps keep their records.
An operator's cancel, a cancel request and a lost lease still end the run as they say. Both
engines, on the injected clock."""

from __future__ import annotations

import asyncio
import threading

from tenure.durable import STEP_PREFIX
from tenure.flow import Flow

from ._support import rows, wait_for, wait_state

HOUR_MS = 3_600_000


def _steps(store, job_id: str) -> dict:
    return {n: val for n, val, _ in rows(store, job_id) if n.startswith(STEP_PREFIX)}


def test_a_plain_handler_that_sleeps_after_shutdown_began_parks(any_store, clock):
    started = threading.Event()

    def handler(payload, ctx):
        started.set()
        assert ctx.cancelled.wait(10)  # the worker is stopping: checkpoint and sleep
        ctx.sleep(3600)
        return "slept"

    worker = any_store.jobs.create_worker({"nap": handler}, poll_interval=0.02).start()
    start = clock()
    jid = any_store.jobs.enqueue("nap", None, max_attempts=1)
    assert started.wait(10)
    assert worker.stop(5).drained
    job = any_store.jobs.get(jid)
    assert (job.state, job.attempts, job.last_error, job.run_at) == ("pending", 1, None, start + HOUR_MS)
    assert _steps(any_store, jid) == {f"{STEP_PREFIX}1": {"kind": "sleep", "until": start + HOUR_MS}}


def _napping_flow(name: str, started: threading.Event, with_slow: bool, slow_runs: list) -> Flow:
    flow = Flow(name, revision="1", max_parallel=2)

    @flow.task(version=1)
    def nap(ctx):
        started.set()
        if not ctx.cancelled.is_set() and not _steps(ctx.store, ctx.run_id):
            assert ctx.cancelled.wait(10)  # first attempt: the worker is stopping
        ctx.sleep(3600)
        return "slept"

    if with_slow:
        @flow.task(version=1)
        async def slow(ctx):
            slow_runs.append(ctx.attempt)
            if len(slow_runs) == 1:
                await asyncio.sleep(30)  # cut short by the shutdown (the run cancels it)
            return "slow done"
    return flow


def test_a_flow_node_that_sleeps_after_shutdown_began_parks_the_run(any_store, clock, start_runner):
    started, slow_runs = threading.Event(), []
    flow = _napping_flow("shutnap", started, False, slow_runs)
    runner = start_runner(any_store, [flow], concurrency=1)
    start = clock()
    run = any_store.jobs.enqueue("shutnap", {"input": None}, id="run-shutnap", max_attempts=1)
    assert started.wait(10)
    assert runner.stop(grace=5).drained
    job = any_store.jobs.get(run)
    # without the fix: failed (dead, max_attempts=1), "interrupted", the sleep's record lost
    assert (job.state, job.attempts, job.last_error, job.run_at) == ("pending", 1, None, start + HOUR_MS)
    assert _steps(any_store, run) == {f"{STEP_PREFIX}nap:1": {"kind": "sleep", "until": start + HOUR_MS}}

    start_runner(any_store, [flow], concurrency=1)
    clock.advance(HOUR_MS)
    any_store.jobs.enqueue("poke", None)  # wakes the idle worker at once
    job = wait_state(any_store, run, "done")
    assert job.attempts == 2 and job.result == {"nap": "slept"}


def test_a_run_cut_short_by_shutdown_with_a_parked_node_parks_due_at_once(any_store, clock, start_runner):
    started, slow_runs = threading.Event(), []
    flow = _napping_flow("shutmix", started, True, slow_runs)
    runner = start_runner(any_store, [flow], concurrency=1)
    start = clock()
    run = any_store.jobs.enqueue("shutmix", {"input": None}, id="run-shutmix", max_attempts=1)
    assert started.wait(10)
    wait_for(lambda: slow_runs, what="the slow node to start")
    assert runner.stop(grace=5).drained
    job = any_store.jobs.get(run)
    assert (job.state, job.attempts, job.last_error, job.run_at) == ("pending", 1, None, start)
    assert _steps(any_store, run) == {f"{STEP_PREFIX}nap:1": {"kind": "sleep", "until": start + HOUR_MS}}

    start_runner(any_store, [flow], concurrency=1)  # due now: the slow node runs again at once
    any_store.jobs.enqueue("poke", None)
    job = wait_for(lambda: (j := any_store.jobs.get(run)).attempts == 2 and j.state == "pending" and j,
                   what="the second attempt to park on the hour")
    assert job.run_at == start + HOUR_MS  # the sleep kept its record: it did not start over
    assert "slow" in {n for n, _, _ in rows(any_store, run)}
    clock.advance(HOUR_MS)
    any_store.jobs.enqueue("poke", None)
    job = wait_state(any_store, run, "done")
    assert job.attempts == 3 and job.result == {"nap": "slept", "slow": "slow done"}
