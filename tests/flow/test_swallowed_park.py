"""A handler (or a flow task) that swallows the park of its own durable step still parks.

``try: ctx.sleep(3600) except Exception: pass`` used to finish the job on attempt 1 with the hour
skipped: the step's :class:`tenure.durable.Park` is an ordinary exception. The step remembers the
park it raised; whatever the code does after it — returns, raises another error or a control of
its own, calls another step, opens ``ctx.transaction()`` — the attempt parks as the step asked
(docs/workflows.md, "Do not catch Park"), with a WARNING saying the handler swallowed it. On both
engines, on the injected clock: nothing sleeps for real."""

from __future__ import annotations

import logging

import pytest

import tenure
from tenure.durable import STEP_PREFIX, Park
from tenure.flow import Flow

from ._support import Recorder, rows, wait_for, wait_state
from .test_durable import assert_holds_nothing, parked

HOUR_MS = 3_600_000


def _after_the_swallow(how: str, ctx) -> str:
    """What the handler does once it caught its step's park."""
    if how == "returns":
        return "ok"
    if how == "raises":
        raise ValueError("went on with what the step did not answer")
    if how == "retries":
        raise tenure.Retry(delay=1)
    if how == "discards":
        raise tenure.Discard("gave up on the step")
    if how == "steps again":
        ctx.sleep(60)  # a later step: the pending park is raised again, nothing is recorded
        return "ok"
    if how == "transaction":
        with ctx.transaction() as tx:  # would commit the completion: the pending park is raised again
            tx.result = "committed"
        return "ok"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["returns", "raises", "retries", "discards", "steps again", "transaction"])
def test_a_handler_that_swallows_its_sleep_parks_for_the_hour_and_runs_again_once(any_store, clock, caplog, how):
    seen = Recorder()

    def handler(payload, ctx):
        seen(("run", ctx.attempt))
        try:
            ctx.sleep(3600)
        except Exception as exc:  # noqa: BLE001 - the mistake under test
            seen(type(exc).__name__)
            return _after_the_swallow(how, ctx)
        seen("woke")
        return "ok"

    worker = any_store.jobs.create_worker({"nap": handler}, poll_interval=0.02).start()
    try:
        start = clock()
        with caplog.at_level(logging.WARNING, logger="tenure.jobs"):
            jid = any_store.jobs.enqueue("nap", None)
            job = parked(any_store, jid, 1)  # without the fix: done (or failed) on attempt 1
        assert job.run_at == start + HOUR_MS and job.last_error is None
        # the row parks at the settlement's commit; the worker frees the slot right after it
        wait_for(lambda: not worker.leases() and worker.stats()["in_flight"] == 0, 10, "the slot to be freed")
        assert_holds_nothing(worker, job)
        assert worker.stats()["snoozes"] == 1 and worker.stats()["failures"] == 0
        steps = {n: val for n, val, _ in rows(any_store, jid) if n.startswith(STEP_PREFIX)}
        assert steps == {f"{STEP_PREFIX}1": {"kind": "sleep", "until": start + HOUR_MS}}
        swallowed = [r for r in caplog.records if getattr(r, "outcome", None) == "swallowed_park"]
        assert len(swallowed) == 1 and swallowed[0].job_id == jid and "swallowed" in swallowed[0].getMessage()

        clock.advance(HOUR_MS - 1)  # not yet
        any_store.jobs.enqueue("poke", None)
        assert any_store.jobs.get(jid).state == "pending"
        clock.advance(1)
        any_store.jobs.enqueue("poke", None)  # wakes the idle worker at once
        job = wait_state(any_store, jid, "done")
    finally:
        worker.stop(2)
    assert job.result == "ok" and job.attempts == 2
    assert seen.snapshot() == [("run", 1), "Park", ("run", 2), "woke"]


def test_an_async_handler_that_swallows_its_sleep_parks_too(any_store, clock):
    seen = Recorder()

    async def handler(payload, ctx):
        seen(("run", ctx.attempt))
        try:
            ctx.sleep(3600)
        except Exception:  # noqa: BLE001
            return "skipped the hour"
        return "slept"

    worker = any_store.jobs.create_worker({"nap": handler}, poll_interval=0.02).start()
    try:
        start = clock()
        jid = any_store.jobs.enqueue("nap", None)
        assert parked(any_store, jid, 1).run_at == start + HOUR_MS
        clock.advance(HOUR_MS)
        any_store.jobs.enqueue("poke", None)
        job = wait_state(any_store, jid, "done")
    finally:
        worker.stop(2)
    assert job.result == "slept" and seen.snapshot() == [("run", 1), ("run", 2)]


def test_a_handler_that_raises_retry_itself_keeps_retrying(any_store, clock):
    """The user's own control, raised with no step parked, is settled as before: a failure."""
    def handler(payload, ctx):
        raise tenure.Retry(delay=5)

    worker = any_store.jobs.create_worker({"r": handler}, poll_interval=0.02).start()
    try:
        jid = any_store.jobs.enqueue("r", None, max_attempts=1)
        job = wait_state(any_store, jid, "dead")
    finally:
        worker.stop(2)
    assert job.attempts == 1 and "retry requested" in (job.last_error or "")


def _swallowing_flow(name: str, is_async: bool) -> Flow:
    flow = Flow(name, revision="1", output="nap")
    if is_async:
        @flow.task(version=1)
        async def nap(ctx):
            try:
                ctx.sleep(3600)
            except Exception:  # noqa: BLE001
                return "skipped"
            return "slept"
    else:
        @flow.task(version=1)
        def nap(ctx):
            try:
                ctx.sleep(3600)
            except Exception:  # noqa: BLE001
                return "skipped"
            return "slept"
    return flow


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_flow_task_that_swallows_its_sleep_parks_the_run_and_saves_no_value(any_store, clock, start_runner,
                                                                               is_async):
    flow = _swallowing_flow("swallow", is_async)
    runner = start_runner(any_store, [flow], concurrency=1)
    start = clock()
    run = any_store.jobs.enqueue("swallow", {"input": None}, id="run-swallow")
    job = parked(any_store, run, 1)
    assert job.run_at == start + HOUR_MS
    assert "nap" not in {n for n, _, _ in rows(any_store, run)}  # the node's value was not saved
    clock.advance(HOUR_MS)
    any_store.jobs.enqueue("swallow", {"input": None}, id="run-swallow")  # idempotent; wakes the worker
    job = wait_state(any_store, run, "done")
    assert job.result == "slept" and job.attempts == 2
    assert runner.stats()["snoozes"] == 1


def test_a_distributed_node_that_swallows_its_sleep_parks_its_node_job(sqlite_store, clock, start_runner):
    flow = _swallowing_flow("dswallow", False)
    start_runner(sqlite_store, [flow], distributed=True, concurrency=2)
    run = sqlite_store.jobs.enqueue("dswallow", {"input": None}, id="run-d")
    node = wait_for_node(sqlite_store, run)
    job = parked(sqlite_store, node.id, 1)
    assert job.run_at == clock() + HOUR_MS
    clock.advance(HOUR_MS)
    sqlite_store.jobs.enqueue("poke", None)
    assert wait_state(sqlite_store, run, "done").result == "slept"


def wait_for_node(store, run_id: str):
    def node():
        jobs = [j for j in store.jobs.page(kind="dswallow:node", limit=10).items]
        return jobs[0] if jobs else None
    return wait_for(node, 10, f"the node job of {run_id}")


def test_inline_reports_a_swallowed_step_as_parked(sqlite_store):
    from tenure.testing import inline

    app = tenure.App(store=sqlite_store)

    @app.task(name="nap")
    def nap(ctx) -> str:
        try:
            ctx.sleep(3600)
        except Exception:  # noqa: BLE001
            return "skipped"
        return "slept"

    with inline(app) as calls:
        handle = nap.enqueue()
    assert calls == [handle] and handle.value is None and isinstance(handle.error, Park)
    with pytest.raises(tenure.errors.JobDead, match="durable step"):
        handle.result()

