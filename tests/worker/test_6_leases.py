"""spec §6: renewal, lease loss, storage trouble during renewal, in-flight state by
token, and cancelling a running attempt (rows 6.10-6.15, 6.19, 6.23, 6.24, 10.9-10.11).

Leases never expire by waiting: tests move the injected clock (``any_store``) past ``expires_at``.
Only 6.10 and 6.24 run on the real clock (renewal keeping a real handler's job).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import pytest

import tenure
from tenure.worker import SHUTDOWN

from ._wk import Outcomes, wait_for


def test_6_10_renewal_keeps_long_handler(live_store, make_worker, other_store):
    """spec 6.10: leases are renewed at lease_ms/3 while a handler runs and each
    renewal replaces the lease: a 1 s handler with a 400 ms lease (the spec's example says 300; a little
    slack for loaded machines) is not stolen by a rival polling for it; renewals >= 2; the token in
    leases() changes."""
    tokens, stop_rival = [], threading.Event()

    def slow(payload, ctx):
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            tokens.append(ctx.lease.token)
            time.sleep(0.02)
        return "kept"

    job_id = live_store.jobs.enqueue("k")
    w = make_worker(live_store, {"k": slow}, lease=0.4)
    rival_jobs = other_store(clock=None).jobs
    stolen = []

    def rival():
        while not stop_rival.is_set():
            got = rival_jobs.claim(["k"], owner="rival", lease_ms=400)
            if got is not None:
                stolen.append(got)
            time.sleep(0.02)

    w.start()
    first = wait_for(lambda: w.leases(), what="the attempt")[0]
    t = threading.Thread(target=rival)
    t.start()
    try:
        later = wait_for(lambda: (ls := w.leases()) and ls[0].token != first.token and ls[0], what="a renewal")
        wait_for(lambda: live_store.jobs.get(job_id).state == "done", timeout=10, what="the job")
    finally:
        stop_rival.set()
        t.join()
    assert stolen == []
    job = live_store.jobs.get(job_id)
    assert (job.result, job.attempts, job.lease_generation) == ("kept", 1, 1)
    assert w.stats()["renewals"] >= 2 and w.stats()["lost_settlements"] == 0
    assert later.generation == first.generation and later.expires_at > first.expires_at
    assert len(set(tokens)) >= 3  # ctx.lease follows every renewal


@pytest.mark.parametrize("late", ["return", "raise"])
def test_6_11_6_15_stalled_attempt_without_renewal_is_lost(any_store, make_worker, other_store, clock, late):
    """spec 6.11 and 6.15: with renew=False a handler that outlives its lease loses
    the job to a rival's claim; its outcome is ``lost`` (TN2066); its later return or raise leaves
    the row, completions and failures unchanged."""
    seen = Outcomes()
    entered, release = threading.Event(), threading.Event()

    def stalled(payload, ctx):
        entered.set()
        release.wait(10)
        if late == "raise":
            raise RuntimeError("late failure")
        return "late result"

    job_id = any_store.jobs.enqueue("k")
    w = make_worker(any_store, {"k": stalled}, renew=False, lease=1, on_outcome=seen,
                    poll_interval=60, watch=False)
    rival_jobs = other_store().jobs
    w.start()
    assert entered.wait(10)
    clock.advance(999)
    assert rival_jobs.claim(["k"], owner="rival") is None  # still leased at expires_at - 1
    clock.advance(1)
    rival = rival_jobs.claim(["k"], owner="rival")
    assert rival is not None and rival.lease.generation == 2
    before = any_store.jobs.get(job_id)
    release.set()
    (event,) = seen.wait(1)
    assert (event["outcome"], event["code"], event["generation"]) == ("lost", "TN2066", 1)
    assert "1" in event["reason"] and "2" in event["reason"]
    assert any_store.jobs.get(job_id) == before  # nothing written by the stale attempt
    stats = w.stats()
    assert (stats["completions"], stats["failures"], stats["lost_settlements"]) == (0, 0, 1)
    rival_jobs.complete(rival.lease, "rival")
    job = any_store.jobs.get(job_id)
    assert (job.state, job.result, job.last_error) == ("done", "rival", None)


@pytest.mark.parametrize("style", ["sync", "async"])
def test_6_14_6_23_lost_lease_sets_the_event_with_the_fence_code(any_store, make_worker, other_store, clock,
                                                                 style):
    """spec 6.14 and 6.23: after a rival's reclaim, the next renewal is refused and
    the attempt's event is set with the coded refusal as its reason (TN2066, not the shutdown
    marker); the attempt ends ``lost``."""
    seen, reasons = Outcomes(), []

    def on_cancel(ctx):
        reasons.append(ctx.cancelled.reason)
        return "too late"

    if style == "sync":
        def handler(payload, ctx):
            assert ctx.cancelled.wait(10)
            return on_cancel(ctx)
    else:
        async def handler(payload, ctx):
            await asyncio.wait_for(ctx.cancelled.wait_async(0.005), 10)
            return on_cancel(ctx)

    job_id = any_store.jobs.enqueue("k")
    w = make_worker(any_store, {"k": handler}, lease=1.5, on_outcome=seen, poll_interval=60, watch=False)
    rival_jobs = other_store().jobs
    w.start()
    # Right after a renewal the next one is 0.5 s away: the clock moves and the rival claims in
    # that quiet window, so the refusal the keeper meets is the supersession, not the expiry.
    wait_for(lambda: w.stats()["renewals"] >= 1, what="a first renewal")
    clock.advance(1500)
    rival = rival_jobs.claim(["k"], owner="rival")
    assert rival is not None and rival.lease.generation == 2
    (event,) = seen.wait(1)
    (reason,) = reasons
    assert reason is not SHUTDOWN and reason.code == "TN2066"
    assert isinstance(reason, tenure.errors.LeaseSuperseded)
    assert (event["outcome"], event["code"]) == ("lost", "TN2066")
    assert any_store.jobs.get(job_id).lease_generation == 2
    assert w.stats()["completions"] == 0


def _sqlite_only(engine_url):
    if not engine_url.startswith("sqlite"):
        pytest.skip("an external write lock on the database file is a SQLite situation")


def _locked_store(engine_url, clock):
    """A store whose storage calls give up after 50 ms behind another connection's write lock."""
    return tenure.connect(engine_url, clock=clock, busy_timeout=0.05)


def test_6_12_renewal_storage_trouble_is_not_loss(engine_url, clock, make_worker):
    """spec 6.12: renewals that fail for a storage reason (an external write lock
    held for less than a lease) are not loss: the lease stands, the event stays clear, the next
    renewal is armed; the outcome is ``completed``."""
    _sqlite_only(engine_url)
    store = _locked_store(engine_url, clock)
    seen = Outcomes()
    entered, release = threading.Event(), threading.Event()
    contexts = []

    def handler(payload, ctx):
        contexts.append(ctx)
        entered.set()
        release.wait(10)
        return "survived"

    job_id = store.jobs.enqueue("k")
    w = make_worker(store, {"k": handler}, lease=0.3, on_outcome=seen, poll_interval=0.02)
    w.start()
    assert entered.wait(10)
    lock = sqlite3.connect(engine_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        lock.execute("BEGIN IMMEDIATE")
        wait_for(lambda: w.stats()["renewal_errors"] >= 2, what="renewals failing behind the lock")
        clock.advance(200)  # the lock lasts 200 ms of store time: less than the 300 ms lease
        assert not contexts[0].cancelled.is_set()
        assert w.stats()["lost_settlements"] == 0
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    renewals = w.stats()["renewals"]
    wait_for(lambda: w.stats()["renewals"] > renewals, what="a renewal after the lock")
    assert not contexts[0].cancelled.is_set()
    release.set()
    (event,) = seen.wait(1)
    assert event["outcome"] == "completed"
    job = store.jobs.get(job_id)
    assert (job.state, job.result, job.attempts) == ("done", "survived", 1)
    w.stop()
    store.close()


def test_6_12_settlement_storage_trouble_is_retried_while_the_lease_lasts(engine_url, clock, make_worker,
                                                                         caplog):
    """spec 6.12, for the settling call: a completion that fails for a storage
    reason (the external write lock) is retried while the lease stands, and lands once the lock
    is gone: outcome ``completed``, never ``lost``."""
    _sqlite_only(engine_url)
    store = _locked_store(engine_url, clock)
    seen, go = Outcomes(), threading.Event()
    job_id = store.jobs.enqueue("k")
    w = make_worker(store, {"k": lambda p, ctx: go.wait(10) and "landed"}, on_outcome=seen, maintenance=False)
    w.start()
    wait_for(lambda: w.stats()["in_flight"] == 1, what="the attempt")
    lock = sqlite3.connect(engine_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        with caplog.at_level("WARNING", logger="tenure.worker"):
            lock.execute("BEGIN IMMEDIATE")
            go.set()
            wait_for(lambda: any("retrying while their leases last" in r.getMessage() for r in caplog.records),
                     what="the completion to be retried behind the lock")
            assert seen.events == []
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    (event,) = seen.wait(1)
    assert event["outcome"] == "completed"
    assert (store.jobs.get(job_id).state, store.jobs.get(job_id).result) == ("done", "landed")
    assert w.stats()["settle_errors"] == 0 and w.stats()["lost_settlements"] == 0
    w.stop()
    store.close()


def test_6_13_expiry_during_storage_trouble_is_the_single_loss(engine_url, clock, make_worker):
    """spec 6.13: only a fence code proves loss: with the lock held past the lease,
    the failed renewals are not loss, and the renewal after the lock meets the expiry: exactly one
    ``lost`` with TN2067, no ``failed``. The job is then recovered by the next claim."""
    _sqlite_only(engine_url)
    store = _locked_store(engine_url, clock)
    seen = Outcomes()
    reasons = []

    def handler(payload, ctx):
        if ctx.attempt == 1:
            assert ctx.cancelled.wait(10)
            reasons.append(ctx.cancelled.reason)
        return f"attempt {ctx.attempt}"

    job_id = store.jobs.enqueue("k")
    w = make_worker(store, {"k": handler}, lease=0.3, on_outcome=seen, poll_interval=0.02)
    w.start()
    wait_for(lambda: w.stats()["in_flight"] == 1, what="the attempt")
    lock = sqlite3.connect(engine_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        lock.execute("BEGIN IMMEDIATE")
        wait_for(lambda: w.stats()["renewal_errors"] >= 2, what="renewals failing behind the lock")
        assert seen.events == [] and reasons == []
        clock.advance(301)  # the lock outlasts the lease
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    events = seen.wait(2)
    lost = seen.of("lost")
    assert len(lost) == 1 and lost[0]["code"] == "TN2067" and lost[0]["attempt"] == 1
    assert seen.of("failed") == []
    assert reasons[0].code == "TN2067"
    assert [e["outcome"] for e in events] == ["lost", "completed"]
    job = store.jobs.get(job_id)
    assert (job.state, job.result, job.attempts) == ("done", "attempt 2", 2)
    assert w.stats()["failures"] == 0
    w.stop()
    store.close()


def test_6_19_in_flight_state_is_keyed_by_token(any_store, make_worker, clock):
    """spec 6.19: the worker reclaims its own stalled job: two tokens for one job id
    in leases(), and the outcomes are ``lost`` (the stalled attempt) and ``completed``."""
    seen = Outcomes()
    first_in, first_go, second_in, second_go = (threading.Event() for _ in range(4))

    def handler(payload, ctx):
        if ctx.attempt == 1:
            first_in.set()
            first_go.wait(10)
            return "first"
        second_in.set()
        second_go.wait(10)
        return "second"

    job_id = any_store.jobs.enqueue("k")
    w = make_worker(any_store, {"k": handler}, renew=False, lease=1, concurrency=2, poll_interval=0.01,
                    on_outcome=seen)
    w.start()
    assert first_in.wait(10)
    clock.advance(1000)
    assert second_in.wait(10), "the worker did not reclaim its own expired job"
    leases = w.leases()
    assert [lease.job_id for lease in leases] == [job_id, job_id]
    assert len({lease.token for lease in leases}) == 2
    assert sorted(lease.generation for lease in leases) == [1, 2]
    assert all(lease.owner == w.owner for lease in leases)  # the owner guards nothing (3.7)
    second_go.set()
    seen.wait(1)
    first_go.set()
    events = seen.wait(2)
    assert [(e["outcome"], e["attempt"]) for e in events] == [("completed", 2), ("lost", 1)]
    assert events[1]["code"] == "TN2065"  # the live attempt had settled it by then (D2)
    job = any_store.jobs.get(job_id)
    assert (job.state, job.result) == ("done", "second")


def test_6_23_shutdown_reason_is_a_marker_not_a_fence_code(any_store, make_worker):
    """spec 6.23: after stop() the attempt's reason is the shutdown marker (the
    loss half is in test_6_14_6_23_...)."""
    reasons = []

    def handler(payload, ctx):
        ctx.cancelled.wait(10)
        reasons.append(ctx.cancelled.reason)

    any_store.jobs.enqueue("k")
    w = make_worker(any_store, {"k": handler})
    w.start()
    wait_for(lambda: w.stats()["in_flight"] == 1, what="the attempt")
    assert w.stop(grace=5).drained
    (reason,) = reasons
    assert reason is SHUTDOWN and reason.code == "shutdown"
    assert getattr(reason, "code", None) not in {"TN2065", "TN2066", "TN2067"}


def test_6_24_checkpoints_follow_the_current_lease(live_store, make_worker):
    """spec 6.24: ctx.checkpoints is bound to the attempt and follows its current
    lease: a save made after two renewals succeeds (the first lease's token is retired by then)."""
    out = {}

    def handler(payload, ctx):
        first = ctx.lease
        ctx.checkpoints.save("before", 1)
        wait_for(lambda: w.stats()["renewals"] >= 2, what="two renewals")
        assert ctx.lease.token != first.token
        ctx.checkpoints.save("after", 2)
        out["seen"] = ctx.checkpoints.load()
        try:
            live_store.jobs.checkpoints(first).save("stale", 3)
        except tenure.TenureError as exc:
            out["stale"] = exc.code
        return "ok"

    job_id = live_store.jobs.enqueue("k")
    w = make_worker(live_store, {"k": handler}, lease=0.6)
    w.start()
    wait_for(lambda: live_store.jobs.get(job_id).state == "done", what="the job")
    assert out == {"seen": {"before": 1, "after": 2}, "stale": "TN2066"}


@pytest.mark.parametrize("style", ["sync", "async"])
def test_10_9_10_10_cancel_with_the_current_lease_stops_the_local_attempt(any_store, make_worker, style):
    """spec 10.9 and 10.10: cancel(id, lease=current) on a running attempt settles
    the job cancelled, sets the attempt's event (TN2065, naming the cancel), returns True once the
    handler wound up; the worker reports ``cancelled`` and counts it in cancellations."""
    seen, wound_up, reasons = Outcomes(), threading.Event(), []

    def after(ctx):
        reasons.append(ctx.cancelled.reason)
        time.sleep(0.05)  # wind-up work cancel() waits for
        wound_up.set()
        return "ignored"

    if style == "sync":
        def handler(payload, ctx):
            ctx.cancelled.wait(10)
            return after(ctx)
    else:
        async def handler(payload, ctx):
            await ctx.cancelled.wait_async(0.005)
            return after(ctx)

    job_id = any_store.jobs.enqueue("k")
    w = make_worker(any_store, {"k": handler}, on_outcome=seen)
    w.start()
    (lease,) = wait_for(lambda: w.leases(), what="the attempt")
    assert any_store.jobs.cancel(job_id, lease=lease) is True
    assert wound_up.is_set(), "cancel returned before the attempt wound up"
    assert reasons[0].code == "TN2065" and "cancel" in str(reasons[0]).lower()
    (event,) = seen.wait(1)
    assert (event["outcome"], event["code"]) == ("cancelled", "TN2065")
    stats = w.stats()
    assert (stats["cancellations"], stats["completions"], stats["failures"], stats["lost_settlements"]) == \
        (1, 0, 0, 0)
    job = any_store.jobs.get(job_id)
    assert (job.state, job.result) == ("cancelled", None)
    assert any_store.jobs.cancel(job_id) is False


def test_10_9_cancel_with_a_retired_lease_is_refused_and_the_attempt_runs_on(any_store, make_worker):
    """spec 10.9 (with 10.8): only the CURRENT lease cancels a running attempt; a
    lease retired by a renewal is refused TN2066 and the attempt is not disturbed."""
    release = threading.Event()
    job_id = any_store.jobs.enqueue("k")
    w = make_worker(any_store, {"k": lambda p, ctx: release.wait(10) and "finished"}, lease=0.15)
    w.start()
    # The first lease SEEN is retired once another is seen: read right after start(), the attempt
    # may already hold a renewed lease (a renewal every 50 ms; a loaded machine reads late), and
    # cancelling with the current one succeeds (then waits out the handler: TN2062, not TN2066).
    (first,) = wait_for(lambda: w.leases(), what="the attempt")
    wait_for(lambda: [le for le in w.leases() if le.token != first.token], what="a renewal after the first lease seen")
    with pytest.raises(tenure.TenureError) as ei:
        any_store.jobs.cancel(job_id, lease=first)
    assert ei.value.code == "TN2066"
    release.set()
    wait_for(lambda: any_store.jobs.get(job_id).state == "done", what="the job")
    assert any_store.jobs.get(job_id).result == "finished"


def test_10_11_cancel_through_another_store_is_a_loss_for_the_worker(any_store, make_worker, other_store):
    """spec 10.11: an attempt held by a worker on store A (another process's
    view) is cancelled through store B with its lease: the worker meets the fence at its next
    settling call and records ``lost`` with TN2065."""
    seen, release = Outcomes(), threading.Event()
    job_id = any_store.jobs.enqueue("k")
    w = make_worker(any_store, {"k": lambda p, ctx: release.wait(10) and "done anyway"}, renew=False,
                    on_outcome=seen)
    w.start()
    (lease,) = wait_for(lambda: w.leases(), what="the attempt")
    assert other_store().jobs.cancel(job_id, lease=lease) is True
    release.set()
    (event,) = seen.wait(1)
    assert (event["outcome"], event["code"]) == ("lost", "TN2065")
    assert w.stats()["lost_settlements"] == 1 and w.stats()["cancellations"] == 0
    job = any_store.jobs.get(job_id)
    assert (job.state, job.result) == ("cancelled", None)
