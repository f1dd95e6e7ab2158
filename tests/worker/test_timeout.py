"""Per-job timeouts (pg-boss ``expireInSeconds``): ``timeout=`` at enqueue, or the
worker's default. Past it, ``ctx.cancelled`` is set with a timeout reason and the attempt fails
with "job timed out". Timeouts are real time (they bound a handler's run, not a lease)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tenure.worker import TimeoutReason

from ._wk import Outcomes, wait_for


@pytest.mark.parametrize("where", ["enqueue", "worker-default"])
def test_timeout_sets_the_event_and_fails_the_attempt(any_store, make_worker, where):
    """A handler running past its timeout sees ctx.cancelled with a timeout reason; the attempt
    fails with "job timed out" (retried while attempts remain) and counts in ``timeouts``."""
    seen, reasons = Outcomes(), []

    def handler(payload, ctx):
        if ctx.attempt == 1:
            assert ctx.cancelled.wait(10)
            reasons.append(ctx.cancelled.reason)
            return "too late"
        return "quick"

    job_id = any_store.jobs.enqueue("k", timeout=0.2 if where == "enqueue" else None)
    w = make_worker(any_store, {"k": handler}, on_outcome=seen, backoff_base=0, poll_interval=0.01,
                    timeout=None if where == "enqueue" else 0.2)
    t0 = time.monotonic()
    w.start()
    events = seen.wait(2)
    assert 0.15 <= time.monotonic() - t0 < 5
    (reason,) = reasons
    assert isinstance(reason, TimeoutReason) and reason.code == "timeout" and reason.timeout_ms == 200
    assert (events[0]["outcome"], events[0]["reason"]) == ("failed", "job timed out")
    assert events[1]["outcome"] == "completed"
    job = any_store.jobs.get(job_id)
    assert (job.state, job.result, job.attempts, job.last_error) == ("done", "quick", 2, "job timed out")
    assert w.stats()["timeouts"] == 1 and w.stats()["failures"] == 1


def test_enqueue_timeout_wins_over_the_worker_default(any_store, make_worker):
    """A job's own timeout takes precedence over the worker's default."""
    seen = Outcomes()
    long_ok = any_store.jobs.enqueue("k", {"sleep": 0.3}, timeout=5)
    short = any_store.jobs.enqueue("k", {"sleep": 5}, timeout=0.1, max_attempts=1)

    def handler(payload, ctx):
        ctx.cancelled.wait(payload["sleep"])
        return "slept"

    w = make_worker(any_store, {"k": handler}, on_outcome=seen, concurrency=2, timeout=0.15)
    w.start()
    seen.wait(2)
    assert any_store.jobs.get(long_ok).state == "done"
    short_job = any_store.jobs.get(short)
    assert (short_job.state, short_job.last_error) == ("dead", "job timed out")


def test_a_hostile_handler_times_out_at_once_and_its_late_return_is_ignored(any_store, make_worker):
    """The attempt fails at its timeout even if the handler ignores the event; the handler keeps its
    slot until it returns, and its late result changes nothing."""
    release, returned = threading.Event(), threading.Event()
    seen = Outcomes()

    def hostile(payload, ctx):
        release.wait(10)
        returned.set()
        return "late"

    job_id = any_store.jobs.enqueue("k", timeout=0.1, max_attempts=1)
    w = make_worker(any_store, {"k": hostile}, on_outcome=seen)
    w.start()
    (event,) = seen.wait(1)
    assert (event["outcome"], event["reason"]) == ("failed", "job timed out")
    assert w.stats()["in_flight"] == 1  # the slot stays taken while the handler runs
    before = any_store.jobs.get(job_id)
    assert (before.state, before.last_error) == ("dead", "job timed out")
    release.set()
    assert returned.wait(5)
    wait_for(lambda: w.stats()["in_flight"] == 0, what="the slot to free")
    assert any_store.jobs.get(job_id) == before
    assert len(seen.events) == 1 and w.stats()["completions"] == 0


def test_an_async_handler_is_cancelled_at_its_timeout(any_store, make_worker):
    """An async handler past its timeout gets CancelledError (and its event is set)."""
    seen, got = Outcomes(), []

    async def handler(payload, ctx):
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            got.append(ctx.cancelled.reason)
            raise

    job_id = any_store.jobs.enqueue("k", timeout=0.1, max_attempts=1)
    w = make_worker(any_store, {"k": handler}, on_outcome=seen)
    w.start()
    (event,) = seen.wait(1)
    assert (event["outcome"], event["reason"]) == ("failed", "job timed out")
    wait_for(lambda: got, what="the cancellation")
    assert isinstance(got[0], TimeoutReason)
    assert any_store.jobs.get(job_id).last_error == "job timed out"


def test_a_handler_transaction_open_at_the_timeout_does_not_commit(any_store, make_worker):
    """A handler transaction still open when the timeout strikes is rolled back; the attempt fails
    with "job timed out"."""
    from ._wk import counter_table, counter_value, ph

    counter_table(any_store, "tn_w_timeout_counter")
    seen, inside = Outcomes(), threading.Event()

    def handler(payload, ctx):
        with ctx.transaction() as tx:
            tx.execute(f"UPDATE tn_w_timeout_counter SET n = n + {ph(any_store)} WHERE id = 1", (1,))
            inside.set()
            ctx.cancelled.wait(10)
            tx.result = "never"

    job_id = any_store.jobs.enqueue("k", timeout=0.1, max_attempts=1)
    w = make_worker(any_store, {"k": handler}, on_outcome=seen)
    w.start()
    (event,) = seen.wait(1)
    assert (event["outcome"], event["reason"]) == ("failed", "job timed out")
    assert inside.is_set()
    job = any_store.jobs.get(job_id)
    assert (job.state, job.result, job.last_error) == ("dead", None, "job timed out")
    assert counter_value(any_store, "tn_w_timeout_counter") == 0
