"""The fence at its corners, on both engines: a checkpoint save with a
forged generation (2.13, 7.4), one batch holding the same lease twice (3.14, D1), a
``cancel(id, lease)`` whose attempt does not wind up within ``stop_grace`` (D5), a lock held
past the lease while the attempt SETTLES (6.13), and renewal off (6.14).

Leases expire by moving the injected clock, never by sleeping. The storage-trouble variants hold a
real lock on the database (SQLite: another connection's write transaction; PostgreSQL: another
connection's row lock, with a short ``lock_timeout``), and the store under test gives up on it
after 50 ms with StoreBusy (TN0003).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time

import pytest

import tenure
from tenure.errors import HandlersLeftRunning, LeaseExpired, LeaseSuperseded

from ._support import claim1, refused

# -- 2.13 / 7.4: a checkpoint save is fenced on the generation too ----------------------------------


@pytest.mark.parametrize("forged", [0, 2, 7, 2**40])
def test_2_13_checkpoint_with_a_forged_generation_is_refused(jobs, clock, target, forged):
    """spec 2.13 and 7.4: checkpoints are stamped with the WRITER's generation, so
    a Lease whose token is valid but whose generation is not the attempt's is refused (TN2066) and
    writes nothing: no row stamped with the forged generation exists to survive the completion's
    prune (generations <= own). The attempt's own lease still saves and completes normally."""
    job_id = jobs.enqueue("k")
    lease = claim1(jobs, lease_ms=1000).lease
    assert lease.generation == 1
    forged_lease = dataclasses.replace(lease, generation=forged)
    with refused("TN2066") as ei:
        jobs.checkpoints(forged_lease).save("n", "forged")
    assert isinstance(ei.value, LeaseSuperseded)
    assert str(forged) in str(ei.value) and "1" in str(ei.value)
    assert target.checkpoint_rows(job_id) == []
    jobs.checkpoints(lease).save("n", "own")
    assert target.checkpoint_rows(job_id) == [("n", 1)]
    with refused("TN2066"):  # the forged lease cannot overwrite the attempt's row either
        jobs.checkpoints(forged_lease).save("n", "forged again")
    assert jobs.checkpoints(lease).load() == {"n": "own"}
    jobs.complete(lease, "done")
    assert target.checkpoint_rows(job_id) == []  # pruned: nothing outlives the completion
    assert jobs.get(job_id).state == "done"


def test_2_13_forged_generation_after_a_renewal_is_refused(jobs, clock, target):
    """spec 2.13 with 3.15: the renewed lease's token with a generation of its own
    choosing is refused as well; the renewed lease itself saves under generation 1."""
    job_id = jobs.enqueue("k")
    first = claim1(jobs, lease_ms=1000).lease
    clock.advance(100)
    renewed = jobs.renew(first, lease_ms=1000)
    with refused("TN2066"):
        jobs.checkpoints(dataclasses.replace(renewed, generation=3)).save("n", "forged")
    jobs.checkpoints(renewed).save("n", "renewed")
    assert target.checkpoint_rows(job_id) == [("n", 1)]


# -- 3.14 / D1: the same lease twice in one batch -------------------------------------------


def _twice(jobs, call: str, clock):
    """Claim one job and settle it with a batch holding its lease twice (different values)."""
    job_id = jobs.enqueue("k", id="a", max_attempts=3)
    other_id = jobs.enqueue("k", id="b")
    lease = claim1(jobs, lease_ms=1000).lease
    other = claim1(jobs, lease_ms=1000).lease
    assert (lease.job_id, other.job_id) == (job_id, other_id)
    if call == "complete_many":
        answers = jobs.complete_many([(lease, {"r": "first"}), (other, "other"), (lease, {"r": "second"})])
    elif call == "fail_many":
        answers = jobs.fail_many([(lease, "first error"), (other, "other error"), (lease, "second error")])
    else:  # the worker's settle-and-refill: results already JSON text, then a claim
        jobs.enqueue("k", id="next")
        answers, claims = jobs.complete_and_claim(
            [(lease, '{"r": "first"}'), (other, '"other"'), (lease, '{"r": "second"}')],
            ["k"],
            owner="w",
            limit=1,
            lease_ms=1000,
        )
        assert [c.job.id for c in claims] == ["next"]
    return job_id, other_id, answers


@pytest.mark.parametrize("call", ["complete_many", "fail_many", "complete_and_claim"])
def test_3_14_same_lease_twice_in_one_batch_first_stands(jobs, clock, call):
    """spec 3.14 and D1, within ONE batch: the first item settles the job,
    the later item with the same lease is a repeat from the same attempt, so it changes nothing and
    is no error (answered as the first was). Identical on both engines (before: SQLite stored the
    SECOND result, PostgreSQL the first)."""
    job_id, other_id, answers = _twice(jobs, call, clock)
    job = jobs.get(job_id)
    if call == "fail_many":
        assert (job.state, job.last_error, job.attempts) == ("failed", "first error", 1)
        assert [type(a) for a in answers] == [tenure.Job, tenure.Job, tenure.Job]
        assert answers[0] == answers[2] == job
        assert jobs.get(other_id).last_error == "other error"
    else:
        assert (job.state, job.result) == ("done", {"r": "first"})
        assert answers == [None, None, None]
        assert jobs.get(other_id).result == "other"


def test_3_14_same_lease_twice_after_expiry_both_refused_alike(jobs, clock):
    """Decision 1 with the lease already expired: the first item is refused (TN2067) and the repeat
    gets the same answer; nothing is written."""
    job_id = jobs.enqueue("k")
    lease = claim1(jobs, lease_ms=1000).lease
    clock.set(lease.expires_at)
    before = jobs.get(job_id)
    answers = jobs.complete_many([(lease, 1), (lease, 2)])
    assert [getattr(a, "code", None) for a in answers] == ["TN2067", "TN2067"]
    answers = jobs.fail_many([(lease, "a"), (lease, "b")])
    assert [getattr(a, "code", None) for a in answers] == ["TN2067", "TN2067"]
    assert jobs.get(job_id) == before


# -- D5: cancel(id, lease) says whether the attempt wound up --------------------------------


def _wait_for(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError("timed out waiting for the condition")
        time.sleep(0.002)


class _Outcomes(list):
    def __call__(self, event: dict) -> None:
        self.append(dict(event))


@pytest.mark.parametrize("handler_style", ["winds-up", "ignores-the-event"])
def test_d5_cancel_reports_whether_the_attempt_wound_up(jobs, handler_style):
    """Decision 5 (spec D5): cancel(id, lease) waits for the local attempt at most the worker's
    stop_grace. The row is cancelled either way; the call answers True when the attempt wound up,
    and raises HandlersLeftRunning (TN2062) when it was still running after the grace (it used to
    answer True then too). The late handler writes nothing and its outcome is 'cancelled'."""
    started, release, reasons, outcomes = threading.Event(), threading.Event(), [], _Outcomes()

    def handler(payload, ctx):
        started.set()
        if handler_style == "winds-up":
            ctx.cancelled.wait(10)
        else:
            release.wait(10)  # hostile: ignores ctx.cancelled
        reasons.append(ctx.cancelled.reason)
        return "ignored"

    job_id = jobs.enqueue("k")
    worker = jobs.create_worker({"k": handler}, stop_grace=0.2, on_outcome=outcomes, maintenance=False)
    worker.start()
    try:
        assert started.wait(10)
        (lease,) = worker.leases()
        if handler_style == "winds-up":
            assert jobs.cancel(job_id, lease=lease) is True
            assert len(reasons) == 1
        else:
            t0 = time.monotonic()
            with refused("TN2062") as ei:
                jobs.cancel(job_id, lease=lease)
            assert isinstance(ei.value, HandlersLeftRunning)
            assert 0.15 <= time.monotonic() - t0 < 5
            assert job_id in str(ei.value) and "stop_grace" in str(ei.value)
            assert reasons == []  # it really was still running
            assert jobs.get(job_id).state == "cancelled"  # the row is settled either way
            release.set()
        _wait_for(lambda: len(outcomes) == 1)
    finally:
        release.set()
        worker.stop()
    assert reasons[0].code == "TN2065"
    assert (outcomes[0]["outcome"], outcomes[0]["code"]) == ("cancelled", "TN2065")
    job = jobs.get(job_id)
    assert (job.state, job.result) == ("cancelled", None)
    assert worker.stats()["cancellations"] == 1
    assert jobs.cancel(job_id) is False


def test_d5_cancel_with_the_current_lease_after_a_renewal_reaches_the_attempt(jobs):
    """Spec 10.9 with 3.15: after a renewal, the attempt's CURRENT lease (what leases() and
    ctx.lease show) cancels it, and the local attempt is told and waited for: its reason is set
    before cancel() returns True (it used to look the attempt up by its first token only, so the
    handler was never told)."""
    started, reasons = threading.Event(), []

    def handler(payload, ctx):
        started.set()
        ctx.cancelled.wait(10)
        reasons.append(ctx.cancelled.reason)

    job_id = jobs.enqueue("k")
    worker = jobs.create_worker({"k": handler}, lease=0.15, maintenance=False)
    worker.start()
    try:
        assert started.wait(10)
        first = worker.leases()[0]
        _wait_for(lambda: worker.stats()["renewals"] >= 1)
        for _ in range(10):
            (current,) = worker.leases()
            assert current.token != first.token
            try:
                assert jobs.cancel(job_id, lease=current) is True
                break
            except LeaseSuperseded:  # a renewal retired it just now: the next one is current
                continue
        assert len(reasons) == 1 and reasons[0].code == "TN2065"
    finally:
        worker.stop()
    assert jobs.get(job_id).state == "cancelled"


@pytest.mark.parametrize("style", ["sync", "async"])
def test_d5_a_handler_cancelling_its_own_job_is_answered_at_once(jobs, style):
    """Decision 5 from inside: a handler that cancels its own job (with ctx.lease) cannot wind up
    while its own call waits, so the call does not wait for stop_grace (it used to block the
    handler, or the whole event loop, for the full grace): the job is cancelled, the call reports
    HandlersLeftRunning (TN2062) at once, and the attempt ends ``cancelled``."""
    seen, outcomes = [], _Outcomes()

    def cancel_own(ctx):
        t0 = time.monotonic()
        try:
            jobs.cancel(ctx.job.id, lease=ctx.lease)
        except HandlersLeftRunning as exc:
            seen.append((exc.code, time.monotonic() - t0, ctx.cancelled.reason.code))
        return "ignored"

    if style == "sync":

        def handler(payload, ctx):
            return cancel_own(ctx)

    else:

        async def handler(payload, ctx):
            return cancel_own(ctx)

    job_id = jobs.enqueue("k")
    worker = jobs.create_worker({"k": handler}, stop_grace=3, on_outcome=outcomes, maintenance=False)
    worker.start()
    try:
        _wait_for(lambda: len(outcomes) == 1)
    finally:
        worker.stop()
    ((code, waited, reason),) = seen
    assert (code, reason) == ("TN2062", "TN2065")
    assert waited < 1.5, f"the call waited {waited:.2f} s for its own handler"
    assert (outcomes[0]["outcome"], outcomes[0]["code"]) == ("cancelled", "TN2065")
    assert (jobs.get(job_id).state, jobs.get(job_id).result) == ("cancelled", None)


# -- 6.13: a lock held past the lease while the attempt SETTLES -------------------------------------


def _busy_store(target, clock, rand):
    """A store over the same database whose calls give up after 50 ms behind another connection's
    lock with StoreBusy (TN0003): SQLite's busy timeout, PostgreSQL's lock_timeout."""
    if target.engine == "sqlite":
        return tenure.connect(target.url, clock=clock, random=rand, busy_timeout=0.05)
    sep = "&" if "?" in target.url else "?"
    return tenure.connect(f"{target.url}{sep}options=-c%20lock_timeout%3D50", clock=clock, random=rand)


class _Lock:
    """Another connection holding a write lock: SQLite's write transaction on the file,
    PostgreSQL's EXCLUSIVE lock on the jobs table (reads pass, every write waits) in an open
    transaction. (A row lock would not do: PostgreSQL does not wait for a locked row that the
    fence's WHERE already rules out, so an expired lease would be answered at once.)"""

    def __init__(self, target) -> None:
        self.conn = target.raw()
        if target.engine == "sqlite":
            self.conn.isolation_level = None
            self.conn.execute("BEGIN IMMEDIATE")
        else:
            self.conn.autocommit = False
            self.conn.execute("LOCK TABLE tenure_jobs IN EXCLUSIVE MODE")

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()


def test_6_13_lock_held_past_the_lease_while_the_attempt_settles(store, target, clock, rand):
    """spec 6.13 at settle time: the handler returns while another connection holds
    a lock, and the lock outlasts the lease. The completion is retried while the store is busy, past
    the lease, until the store answers; then the fence decides: exactly one ``lost`` with TN2067
    (it used to give up at the lease and record ``lost`` with StoreBusy, TN0003), no ``failed``, no
    settle error. The next claim recovers the job."""
    busy = _busy_store(target, clock, rand)
    outcomes, go = _Outcomes(), threading.Event()

    def handler(payload, ctx):
        if ctx.attempt == 1:
            go.wait(10)
        return f"attempt {ctx.attempt}"

    job_id = busy.jobs.enqueue("k")
    # One slot: the worker cannot reclaim the job before attempt 1's settlement is answered.
    worker = busy.jobs.create_worker(
        {"k": handler}, lease=0.2, on_outcome=outcomes, poll_interval=0.02, maintenance=False
    )
    worker.start()
    try:
        _wait_for(lambda: worker.stats()["in_flight"] == 1)
        lock = _Lock(target)
        try:
            go.set()  # the handler returns; its completion meets the lock
            t0 = time.monotonic()
            clock.advance(201)  # the lock outlasts the lease (store time)
            while time.monotonic() - t0 < 0.6:  # ... and the worker's own reckoning of it (200 ms)
                assert outcomes == [], outcomes
                time.sleep(0.02)
        finally:
            lock.release()
        _wait_for(lambda: len(outcomes) == 2)
        stats = worker.stats()
    finally:
        worker.stop()
        busy.close()
    assert [(e["outcome"], e["attempt"], e.get("code")) for e in outcomes] == [
        ("lost", 1, "TN2067"),
        ("completed", 2, None),
    ]
    assert (stats["failures"], stats["settle_errors"], stats["lost_settlements"]) == (0, 0, 1)
    job = store.jobs.get(job_id)
    assert (job.state, job.result, job.attempts) == ("done", "attempt 2", 2)


def test_6_13_lock_shorter_than_the_lease_at_settle_time_completes(store, target, clock, rand):
    """The same lock released while the lease still stands: the retried completion lands
    (``completed``, never ``lost``) on both engines."""
    busy = _busy_store(target, clock, rand)
    outcomes, go = _Outcomes(), threading.Event()
    job_id = busy.jobs.enqueue("k")
    worker = busy.jobs.create_worker(
        {"k": lambda p, ctx: go.wait(10) and "landed"}, lease=5, on_outcome=outcomes, maintenance=False
    )
    worker.start()
    try:
        _wait_for(lambda: worker.stats()["in_flight"] == 1)
        lock = _Lock(target)
        try:
            go.set()
            time.sleep(0.2)  # a few retries behind the lock
            assert outcomes == []
        finally:
            lock.release()
        _wait_for(lambda: len(outcomes) == 1)
    finally:
        worker.stop()
        busy.close()
    assert (outcomes[0]["outcome"], outcomes[0].get("code")) == ("completed", None)
    assert store.jobs.get(job_id).result == "landed"


# -- 6.14: renewal off, the lease expires under a running handler -----------------------------------


@pytest.mark.parametrize("recovery", ["by-the-worker", "by-another-claim"])
@pytest.mark.parametrize("style", ["sync", "async"])
def test_6_14_renewal_off_expiry_sets_the_event_with_lease_expired(jobs, clock, style, recovery):
    """spec 6.14 with renew=False: a handler that outlives its lease is told: its
    ctx.cancelled is set with LeaseExpired (TN2067) as the reason once the lease expires on the
    store's clock, not before (it used to stay clear until the handler returned). Its settlement
    then meets the fence: ``lost`` with TN2067, nothing written. The job is recovered by the
    worker's own next claim (made in the same transaction as that refused settlement, which still
    answers TN2067, not TN2066) or, with ``max_jobs=1``, by another claimer."""
    outcomes, entered, reasons, early = _Outcomes(), threading.Event(), [], []

    def after(ctx):
        reasons.append(ctx.cancelled.reason)
        return "too late"

    if style == "sync":

        def handler(payload, ctx):
            if ctx.attempt > 1:
                return "second"
            entered.set()
            assert ctx.cancelled.wait(10)
            return after(ctx)

    else:

        async def handler(payload, ctx):
            if ctx.attempt > 1:
                return "second"
            entered.set()
            await asyncio.wait_for(ctx.cancelled.wait_async(0.005), 10)
            return after(ctx)

    job_id = jobs.enqueue("k")
    worker = jobs.create_worker(
        {"k": handler},
        renew=False,
        lease=1,
        on_outcome=outcomes,
        maintenance=False,
        poll_interval=0.02,
        max_jobs=1 if recovery == "by-another-claim" else None,
    )
    worker.start()
    try:
        assert entered.wait(10)
        clock.advance(999)  # the lease still stands at expires_at - 1
        assert worker.events.wait_more("keeper_ticks", 3, timeout=10)  # several keeper passes
        early.extend(reasons)
        assert worker.leases() and reasons == []
        clock.advance(1)
        _wait_for(lambda: len(outcomes) == (2 if recovery == "by-the-worker" else 1))
    finally:
        worker.stop()
    assert early == []
    (reason,) = reasons
    assert isinstance(reason, LeaseExpired) and reason.code == "TN2067"
    assert job_id in str(reason) and "renew" in str(reason)
    got = [(e["outcome"], e["attempt"], e.get("code")) for e in outcomes]
    if recovery == "by-the-worker":
        assert got == [("lost", 1, "TN2067"), ("completed", 2, None)]
        assert (jobs.get(job_id).state, jobs.get(job_id).result) == ("done", "second")
    else:
        assert got == [("lost", 1, "TN2067")]
        assert jobs.get(job_id).state == "leased"  # nothing written: the next claim recovers it
        assert claim1(jobs).lease.attempt == 2


def test_6_14_renewal_off_an_open_handler_transaction_holds_the_lease(jobs, clock):
    """Renewal off, but the handler is inside ``ctx.transaction()`` when the lease ends: the open
    block holds the lease (its row is locked and its completion is judged at the open), so the
    attempt is NOT told it expired, and the block commits: ``completed``."""
    in_block, go, flags, outcomes = threading.Event(), threading.Event(), [], _Outcomes()

    def handler(payload, ctx):
        with ctx.transaction() as tx:
            in_block.set()
            go.wait(10)
            flags.append(ctx.cancelled.is_set())
            tx.result = "committed"
        return "ignored: tx.result is the result"

    job_id = jobs.enqueue("k")
    worker = jobs.create_worker(
        {"k": handler}, renew=False, lease=1, on_outcome=outcomes, maintenance=False, max_jobs=1
    )
    worker.start()
    try:
        assert in_block.wait(10)
        clock.advance(1500)
        assert worker.events.wait_more("keeper_ticks", 3, timeout=10)  # several keeper passes past the lease
        go.set()
        _wait_for(lambda: len(outcomes) == 1)
    finally:
        go.set()
        worker.stop()
    assert flags == [False]
    assert outcomes[0]["outcome"] == "completed"
    assert (jobs.get(job_id).state, jobs.get(job_id).result) == ("done", "committed")


def test_6_13_settle_and_claim_reclaiming_its_own_expired_job_answers_expired(jobs, clock):
    """Spec 6.13 with D2, for the worker's settle-and-claim: a completion refused because its lease
    expired, in the same transaction as a claim that then takes that very job, is answered as the
    refusal it met, TN2067 (it was answered TN2066 from the row as the claim left it). A reclaim by
    another claimer before the call is still a supersession (TN2066)."""
    job_id = jobs.enqueue("k")
    lease = claim1(jobs, lease_ms=1000).lease
    clock.set(lease.expires_at)
    answers, claims = jobs.complete_and_claim([(lease, '"late"')], ["k"], owner="w", limit=1, lease_ms=1000)
    assert [(c.job.id, c.lease.generation) for c in claims] == [(job_id, 2)]
    assert isinstance(answers[0], LeaseExpired) and answers[0].code == "TN2067"
    assert jobs.get(job_id).result is None
    clock.set(claims[0].lease.expires_at)
    rival = claim1(jobs, owner="rival")
    answers, claims = jobs.complete_and_claim(
        [(claims[0].lease, '"late"')], ["k"], owner="w", limit=1, lease_ms=1000
    )
    assert claims == [] and answers[0].code == "TN2066"
    jobs.complete(rival.lease, "rival")
    assert jobs.get(job_id).result == "rival"
