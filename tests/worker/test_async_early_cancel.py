"""An async attempt whose cancellation is set before its task starts gets ``task.cancel()``, as
one set while it runs does (:meth:`tenure.worker.attempt.Attempt.cancel`): for a worker's
shutdown and for an operator's cancel request alike. Before, only a shutdown was passed on; an
early cancel request reached the handler only through polling ``ctx.cancelled``.

To make the request arrive first, a blocking async handler holds the worker's event loop while
the second job is claimed (its task is queued on that loop, not started), cancel-requested and
settled ``cancelled`` by the worker's cancel watch; then the loop is let go."""

from __future__ import annotations

import asyncio
import threading

from ._wk import wait_for


def test_a_cancel_request_before_the_task_started_cancels_the_task(live_store, make_worker):
    jobs = live_store.jobs
    holding, release = threading.Event(), threading.Event()
    seen: list[str] = []

    async def hold(payload, ctx):
        holding.set()
        release.wait(20)  # blocks the loop on purpose: the next attempt's task cannot start

    async def victim(payload, ctx):
        seen.append(f"started, cancelled={ctx.cancelled.is_set()}")
        try:
            for _ in range(300):  # at most ~3 s: what a handler that never polls would do
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            seen.append("CancelledError")
            raise
        seen.append("ran to its end")

    w = make_worker(live_store, {"hold": hold, "victim": victim}, concurrency=2, poll_interval=0.01)
    w.start()
    try:
        jobs.enqueue("hold")
        assert holding.wait(10), "the blocking handler never started"
        job_id = jobs.enqueue("victim")
        wait_for(lambda: jobs.get(job_id).state == "leased", what="the victim's claim")
        assert jobs.request_cancel(job_id) == "requested"
        wait_for(lambda: jobs.get(job_id).state == "cancelled", what="the cancel watch to settle it")
        assert seen == []  # its task has not started: the loop is still held
    finally:
        release.set()
    wait_for(lambda: len(seen) == 2, timeout=10, what="the victim to end")
    assert seen == ["started, cancelled=True", "CancelledError"]
    wait_for(lambda: w.stats()["in_flight"] == 0, what="both slots to free")
    assert jobs.get(job_id).state == "cancelled"
