"""spec §10: administration (page, cancel, requeue, sweep)."""

from __future__ import annotations

import random
import threading
import time

import pytest

import tenure

from ._support import claim1, refused

STATES = ("pending", "leased", "done", "failed", "dead", "cancelled")


def _six_states(jobs, clock):
    jobs.enqueue("k", id="dead", max_attempts=1)
    jobs.fail(claim1(jobs).lease, "x")
    jobs.enqueue("k", id="done")
    jobs.complete(claim1(jobs).lease, "r")
    jobs.enqueue("k", id="failed", max_attempts=3)
    jobs.fail(claim1(jobs).lease, "x")
    jobs.enqueue("k", id="leased")
    claim1(jobs)
    jobs.enqueue("k", id="cancelled")
    jobs.cancel("cancelled")
    jobs.enqueue("other", id="pending")
    assert {s: jobs.get(s).state for s in STATES} == {s: s for s in STATES}


# -- 10.1 --------------------------------------------------------------------------------------------


def test_10_1_admin_calls_are_root_only(store, clock):
    """spec 10.1: tx.jobs has no page, cancel, requeue or sweep; the root calls work."""
    with store.transaction() as tx:
        for name in ("page", "cancel", "requeue", "sweep"):
            assert not hasattr(tx.jobs, name), f"tx.jobs.{name} exists"
        assert callable(tx.jobs.enqueue) and callable(tx.jobs.get)
        tx.jobs.enqueue("k", id="a")
    jobs = store.jobs
    assert [j.id for j in jobs.page().items] == ["a"]
    assert jobs.cancel("a") is True
    assert jobs.requeue("a") is True
    assert jobs.sweep(settled_before=clock()).removed == 0


# -- 10.2 - 10.6: page ------------------------------------------------------------------------------


def test_10_2_keyset_pages_of_100(jobs):
    """spec 10.2: 250 jobs page as 100, 100, 50 via `after` (limit defaults to 100),
    in id order, with no gaps or duplicates."""
    ids = [f"j{i:04d}" for i in range(250)]
    shuffled = ids[:]
    random.Random(7).shuffle(shuffled)
    for job_id in shuffled:
        jobs.enqueue("k", id=job_id)
    seen, sizes, after = [], [], None
    while True:
        page = jobs.page(after=after)
        assert isinstance(page, tenure.Page)
        sizes.append(len(page.items))
        seen += [j.id for j in page.items]
        if page.next_after is None:
            break
        assert page.next_after == page.items[-1].id
        after = page.next_after
        assert len(sizes) < 10
    assert sizes[:3] == [100, 100, 50] and sum(sizes) == 250
    assert seen == ids


def test_10_2_limit_and_after(jobs):
    """spec 10.2: `limit` bounds a page and `after` continues strictly past an id."""
    for i in range(5):
        jobs.enqueue("k", id=f"j{i}")
    page = jobs.page(limit=2)
    assert [j.id for j in page.items] == ["j0", "j1"] and page.next_after == "j1"
    assert [j.id for j in jobs.page(after="j1", limit=2).items] == ["j2", "j3"]
    assert [j.id for j in jobs.page(after="j3").items] == ["j4"]
    assert jobs.page(after="j4").items == [] and jobs.page(after="j4").next_after is None
    assert [j.id for j in jobs.page(after="j1x").items] == ["j2", "j3", "j4"]  # after need not exist


@pytest.mark.parametrize(
    ("limit", "exc"), [(0, ValueError), (-1, ValueError), (True, TypeError), ("10", TypeError)]
)
def test_10_2_bad_limit_refused(jobs, limit, exc):
    """spec 10.2, D8: page(limit<=0) is a ValueError; a bool or a string
    is not an integer (TypeError)."""
    jobs.enqueue("k")
    with pytest.raises(exc) as ei:
        jobs.page(limit=limit)
    assert getattr(ei.value, "code", None) in {"TN1001", "TN1002"}


def test_10_3_filters_by_state_and_kind(jobs, clock):
    """spec 10.3: page filters by each of the six states and by kind."""
    _six_states(jobs, clock)
    for state in STATES:
        assert [j.id for j in jobs.page(state=state).items] == [state]
    assert [j.id for j in jobs.page(kind="other").items] == ["pending"]
    assert [j.id for j in jobs.page(kind="k", state="done").items] == ["done"]
    assert jobs.page(kind="other", state="done").items == []
    assert len(jobs.page().items) == 6


@pytest.mark.parametrize(("state", "exc"), [("bogus", ValueError), ("DONE", ValueError), (3, TypeError)])
def test_10_3_unknown_state_refused(jobs, state, exc):
    """spec 10.3: any state outside the six is refused."""
    jobs.enqueue("k")
    with pytest.raises((TypeError, ValueError)) as ei:
        jobs.page(state=state)
    assert isinstance(ei.value, exc)
    assert getattr(ei.value, "code", None) in {"TN1001", "TN1002"}


def test_10_4_page_items_are_get_records(jobs, clock):
    """spec 10.4: each page item is exactly the record get() returns (no token)."""
    _six_states(jobs, clock)
    items = jobs.page().items
    assert len(items) == 6
    for item in items:
        assert isinstance(item, tenure.Job)
        assert item == jobs.get(item.id)


def test_10_5_page_never_sees_uncommitted_rows(store, target):
    """spec 10.5: while a transaction is open the page waits (SQLite) or at least
    does not see its rows; after the commit it sees the committed row."""
    store.jobs.enqueue("k", id="a")
    result, done = {}, threading.Event()

    def reader():
        try:
            result["ids"] = [j.id for j in store.jobs.page().items]
        except Exception as exc:  # noqa: BLE001 - asserted below
            result["error"] = exc
        done.set()

    with store.transaction() as tx:
        tx.jobs.enqueue("k", id="b")
        t = threading.Thread(target=reader, daemon=True)
        t.start()
        finished_early = done.wait(0.3)
        if target.engine == "sqlite":
            assert not finished_early, "page ran inside the open transaction's window"
        elif finished_early:
            assert result.get("ids") == ["a"], result
    t.join(10)
    assert "error" not in result, result
    if not finished_early:
        assert result["ids"] == ["a", "b"]
    assert [j.id for j in store.jobs.page().items] == ["a", "b"]


def test_10_6_page_cancelled_by_event(jobs):
    """spec 10.6: a page whose cancellation event is already set raises
    PageCancelled (TN2072); an unset event changes nothing."""
    for i in range(3):
        jobs.enqueue("k", id=f"j{i}")
    event = threading.Event()
    assert len(jobs.page(cancel_event=event).items) == 3
    event.set()
    with refused("TN2072"):
        jobs.page(cancel_event=event)


def test_10_6_page_deadline(jobs, clock):
    """spec 10.6: a page whose deadline (store clock, epoch ms) has passed raises
    DeadlineExceeded (TN2075); a future deadline changes nothing."""
    jobs.enqueue("k")
    assert len(jobs.page(deadline=clock() + 10_000).items) == 1
    with refused("TN2075"):
        jobs.page(deadline=clock() - 1)


# -- 10.7 - 10.12: cancel ---------------------------------------------------------------------------


@pytest.mark.parametrize("queued", ["pending", "failed", "scheduled"])
def test_10_7_cancel_a_queued_job(jobs, clock, queued):
    """spec 10.7: cancel(id) on a queued job (pending or failed) settles it
    cancelled without a lease and returns True; a second cancel returns False."""
    job_id = jobs.enqueue("k", max_attempts=3, run_at=clock() + (5000 if queued == "scheduled" else 0))
    if queued == "failed":
        jobs.fail(claim1(jobs).lease, "x")
    before = jobs.get(job_id)
    clock.advance(3)
    assert jobs.cancel(job_id) is True
    job = jobs.get(job_id)
    assert (job.state, job.lease_until, job.lease_owner, job.updated_at) == ("cancelled", None, None, clock())
    assert (job.attempts, job.last_error, job.lease_generation) == (
        before.attempts, before.last_error, before.lease_generation,
    )  # fmt: skip
    clock.advance(3)
    assert jobs.cancel(job_id) is False
    assert jobs.get(job_id) == job


def test_10_8_cancel_refusals(jobs, clock):
    """spec 10.8: unknown or settled → TN2065; claimed without a lease → TN2068;
    stale lease → TN2066; each leaves the row unchanged."""
    with refused("TN2065"):
        jobs.cancel("nope")
    assert jobs.get("nope") is None

    jobs.enqueue("k", id="done")
    jobs.complete(claim1(jobs).lease)
    jobs.enqueue("k", id="dead", max_attempts=1)
    jobs.fail(claim1(jobs).lease, "x")
    for job_id in ("done", "dead"):
        before = jobs.get(job_id)
        with refused("TN2065"):
            jobs.cancel(job_id)
        assert jobs.get(job_id) == before

    jobs.enqueue("k", id="live")
    old = claim1(jobs, lease_ms=1000).lease
    before = jobs.get("live")
    with refused("TN2068"):
        jobs.cancel("live")
    assert jobs.get("live") == before

    renewed = jobs.renew(old)
    before = jobs.get("live")
    with refused("TN2066"):
        jobs.cancel("live", lease=old)  # retired by the renewal
    assert jobs.get("live") == before

    clock.set(renewed.expires_at)
    new = claim1(jobs, lease_ms=1000).lease
    before = jobs.get("live")
    with refused("TN2066"):
        jobs.cancel("live", lease=renewed)  # superseded by a reclaim
    with refused("TN2068"):
        jobs.cancel("live")
    assert jobs.get("live") == before
    assert new.generation == 2


def test_10_8_cancel_with_a_lease_of_another_job_is_refused(jobs):
    """spec 10.8: a lease only speaks for its own job."""
    jobs.enqueue("k", id="a")
    jobs.enqueue("k", id="b")
    la = claim1(jobs).lease
    claim1(jobs)
    before = jobs.get("b")
    with pytest.raises(Exception) as ei:  # any coded refusal
        jobs.cancel("b", lease=la)
    assert getattr(ei.value, "code", None) in {"TN2065", "TN2066", "TN2068", "TN1001"}, repr(ei.value)
    assert jobs.get("b") == before


def test_10_8_expired_lease_decision_4(jobs, clock):
    """spec 10.8 with D4: a leased job whose lease expired without a
    reclaim is cancelled like a queued job, without a lease; the dead attempt is fenced."""
    job_id = jobs.enqueue("k")
    lease = claim1(jobs, lease_ms=1000).lease
    clock.set(lease.expires_at)
    assert jobs.cancel(job_id) is True
    job = jobs.get(job_id)
    assert (job.state, job.lease_until, job.lease_owner) == ("cancelled", None, None)
    with refused("TN2065"):
        jobs.complete(lease, "from the dead attempt")
    assert jobs.get(job_id) == job


def test_10_8_expired_current_lease_passed_to_cancel(jobs, clock):
    """spec 10.8 / D4: cancel(id, lease=expired current lease) either
    settles it like a queued job (D4) or refuses TN2067 leaving the row unchanged."""
    job_id = jobs.enqueue("k")
    lease = claim1(jobs, lease_ms=1000).lease
    clock.set(lease.expires_at + 10)
    before = jobs.get(job_id)
    try:
        assert jobs.cancel(job_id, lease=lease) is True
        assert jobs.get(job_id).state == "cancelled"
    except Exception as exc:  # noqa: BLE001
        assert getattr(exc, "code", None) == "TN2067", repr(exc)
        assert jobs.get(job_id) == before


def test_10_9_cancel_with_the_current_lease(jobs, clock):
    """spec 10.9: cancel(id, lease=current) settles a claimed job cancelled and
    returns True; the attempt is fenced afterwards (TN2065)."""
    job_id = jobs.enqueue("k")
    lease = claim1(jobs).lease
    jobs.checkpoints(lease).save("a", 1)
    clock.advance(5)
    assert jobs.cancel(job_id, lease=lease) is True
    job = jobs.get(job_id)
    assert (job.state, job.lease_until, job.lease_owner, job.updated_at) == ("cancelled", None, None, clock())
    for call in (
        lambda: jobs.complete(lease, "after cancel"),
        lambda: jobs.fail(lease, "after cancel"),
        lambda: jobs.renew(lease),
        lambda: jobs.checkpoints(lease).save("b", 2),
    ):
        with refused("TN2065"):
            call()
    assert jobs.get(job_id) == job
    assert jobs.cancel(job_id) is False
    assert jobs.cancel(job_id, lease=lease) is False


def _worker_or_skip(jobs):
    if not hasattr(jobs, "create_worker"):
        pytest.skip("store.jobs.create_worker does not exist yet")


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return False


def _stat(stats, name):
    return stats[name] if isinstance(stats, dict) else getattr(stats, name)


def test_10_9_cancel_aborts_the_local_attempt_and_waits_for_it(jobs, clock):
    """spec 10.9 and 10.10: cancel(id, lease) aborts this process's attempt (its
    event's reason is TN2065, naming the cancel), returns True once the handler has wound up, and
    the worker reports outcome 'cancelled' and counts it in cancellations."""
    _worker_or_skip(jobs)
    started, exited, seen = threading.Event(), threading.Event(), {}
    outcomes = []

    def handler(payload, ctx):
        started.set()
        ctx.cancelled.wait(10)
        seen["reason"] = ctx.cancelled.reason
        time.sleep(0.05)  # wind-up work the cancel must wait for
        exited.set()
        return "ignored"

    job_id = jobs.enqueue("k")
    worker = jobs.create_worker({"k": handler}, on_outcome=outcomes.append)
    worker.start()
    try:
        assert started.wait(10)
        (lease,) = worker.leases()
        assert jobs.cancel(job_id, lease=lease) is True
        assert exited.is_set(), "cancel returned before the attempt wound up"
        reason = seen["reason"]
        assert getattr(reason, "code", None) == "TN2065", repr(reason)
        assert "cancel" in str(reason).lower()
        assert _wait_for(lambda: len(outcomes) == 1)
        stats = worker.stats()
    finally:
        worker.stop()
    job = jobs.get(job_id)
    assert (job.state, job.result) == ("cancelled", None)
    (outcome,) = outcomes
    assert (_stat(outcome, "outcome"), _stat(outcome, "job_id")) == ("cancelled", job_id)
    assert _stat(stats, "cancellations") == 1
    assert (_stat(stats, "completions"), _stat(stats, "failures"), _stat(stats, "lost_settlements")) == (
        0,
        0,
        0,
    )


def test_10_11_cancel_through_another_store_fences_the_attempt(jobs, open_store, clock):
    """spec 10.11: an attempt held through store A is cancelled through store B
    (another process's view); A meets the fence at its next settling call (TN2065)."""
    job_id = jobs.enqueue("k")
    lease = claim1(jobs, owner="A").lease
    other = open_store().jobs
    assert other.cancel(job_id, lease=lease) is True
    for call in (
        lambda: jobs.checkpoints(lease).save("n", 1),
        lambda: jobs.renew(lease),
        lambda: jobs.complete(lease, "A"),
        lambda: jobs.fail(lease, "A"),
    ):
        with refused("TN2065"):
            call()
    assert jobs.get(job_id).state == "cancelled"


def test_10_12_cancelled_is_terminal(jobs, clock):
    """spec 10.12: a cancelled job is counted and never claimed."""
    job_id = jobs.enqueue("k")
    jobs.cancel(job_id)
    assert jobs.counts()["cancelled"] == 1
    for step in (0, 10**6, 10**10):
        clock.advance(step)
        assert jobs.claim(["k"], owner="w") is None
    assert jobs.get(job_id).state == "cancelled"
    assert jobs.get(job_id).attempts == 0


# -- 10.13 - 10.16: requeue -------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["failed", "dead", "cancelled", "lease-expired"])
def test_10_13_requeue_to_pending_now(jobs, clock, state):
    """spec 10.13: requeue moves a failed, dead, cancelled or lease-expired job to
    pending with run_at = now and returns True; a second requeue returns False."""
    job_id = jobs.enqueue("k", max_attempts=1 if state == "dead" else 3)
    if state == "cancelled":
        jobs.cancel(job_id)
    else:
        lease = claim1(jobs, lease_ms=1000).lease
        if state == "lease-expired":
            clock.set(lease.expires_at)
        else:
            jobs.fail(lease, "x")
    assert jobs.get(job_id).state == ("leased" if state == "lease-expired" else state)
    before = jobs.get(job_id)
    clock.advance(77)
    assert jobs.requeue(job_id) is True
    job = jobs.get(job_id)
    assert (job.state, job.run_at, job.updated_at) == ("pending", clock(), clock())
    assert (job.lease_until, job.lease_owner) == (None, None)
    assert job.attempts == before.attempts
    assert jobs.requeue(job_id) is False
    assert jobs.get(job_id) == job
    assert claim1(jobs).job.id == job_id


def test_10_13_requeue_pending_returns_false(jobs, clock):
    """spec 10.13: requeue of a pending job returns False and changes nothing."""
    job_id = jobs.enqueue("k", run_at=clock() + 10_000)
    before = jobs.get(job_id)
    clock.advance(1)
    assert jobs.requeue(job_id) is False
    assert jobs.get(job_id) == before


def test_10_14_requeue_keeps_attempts(jobs, clock):
    """spec 10.14: max_attempts=2: dead → requeue → claim (attempts 3) → one fail
    → dead again."""
    job_id = jobs.enqueue("k", max_attempts=2)
    jobs.fail(claim1(jobs).lease, "1")
    clock.set(jobs.get(job_id).run_at)
    jobs.fail(claim1(jobs).lease, "2")
    assert (jobs.get(job_id).state, jobs.get(job_id).attempts) == ("dead", 2)
    assert jobs.requeue(job_id) is True
    assert jobs.get(job_id).attempts == 2
    claim = claim1(jobs)
    assert (claim.job.attempts, claim.lease.attempt) == (3, 3)
    jobs.fail(claim.lease, "3")
    job = jobs.get(job_id)
    assert (job.state, job.attempts, job.last_error) == ("dead", 3, "3")


def test_10_15_requeue_refusals(jobs, clock):
    """spec 10.15: requeue refuses a live lease (TN2068: not a steal) and an
    unknown or done job (TN2065); the row is unchanged."""
    with refused("TN2065"):
        jobs.requeue("nope")
    assert jobs.get("nope") is None
    jobs.enqueue("k", id="done")
    jobs.complete(claim1(jobs).lease, "r")
    before = jobs.get("done")
    with refused("TN2065"):
        jobs.requeue("done")
    assert jobs.get("done") == before
    jobs.enqueue("k", id="live")
    lease = claim1(jobs, lease_ms=1000).lease
    clock.set(lease.expires_at - 1)
    before = jobs.get("live")
    with refused("TN2068"):
        jobs.requeue("live")
    assert jobs.get("live") == before
    jobs.complete(lease, "still mine")


def test_10_16_requeue_fences_the_expired_attempt(jobs, clock):
    """spec 10.16: requeueing a lease-expired job fences its old attempt (TN2065)."""
    job_id = jobs.enqueue("k")
    old = claim1(jobs, lease_ms=1000).lease
    clock.set(old.expires_at)
    assert jobs.requeue(job_id) is True
    with refused("TN2065"):
        jobs.complete(old, "from the old attempt")
    with refused("TN2065"):
        jobs.renew(old)
    assert jobs.get(job_id).state == "pending"
    new = claim1(jobs).lease
    assert new.generation == old.generation + 1
    with refused("TN2066"):
        jobs.complete(old, "still stale")


# -- 10.17 - 10.19: sweep ---------------------------------------------------------------------------


def test_10_17_sweep_settled_oldest_first_with_checkpoints(jobs, clock, target):
    """spec 10.17: sweep deletes done/dead/cancelled jobs older than the horizon,
    oldest first, up to limit, with their checkpoints; a second identical sweep removes 0."""
    t0 = clock()
    jobs.enqueue("k", id="old-pending", max_attempts=1)  # never settled: survives
    jobs.enqueue("d", id="z-dead", max_attempts=1)
    jobs.enqueue("c", id="y-cancelled")
    jobs.enqueue("o", id="x-done")
    jobs.enqueue("o", id="a-done-late")

    clock.set(t0 + 100)
    lease = claim1(jobs, kinds=["d"]).lease
    jobs.checkpoints(lease).save("n", 1)
    jobs.fail(lease, "boom")  # z-dead settles first (oldest)
    clock.set(t0 + 200)
    lease = claim1(jobs, kinds=["c"]).lease
    jobs.checkpoints(lease).save("n", 2)
    assert jobs.cancel("y-cancelled", lease=lease) is True
    clock.set(t0 + 300)
    jobs.complete(claim1(jobs, kinds=["o"]).lease, "r")  # a-done-late is claimed first (id order)...
    clock.set(t0 + 400)
    jobs.complete(claim1(jobs, kinds=["o"]).lease, "r")  # ... so x-done settles last
    ages = {i: jobs.get(i).updated_at for i in ("z-dead", "y-cancelled", "a-done-late", "x-done")}
    assert ages == {"z-dead": t0 + 100, "y-cancelled": t0 + 200, "a-done-late": t0 + 300, "x-done": t0 + 400}
    assert target.checkpoint_rows("z-dead") == [("n", 1)]

    clock.set(t0 + 10_000)
    horizon = t0 + 350  # x-done is newer than the horizon
    result = jobs.sweep(settled_before=horizon, limit=2)
    assert isinstance(result, tenure.SweepResult) and result.removed == 2
    assert jobs.get("z-dead") is None and jobs.get("y-cancelled") is None
    assert target.checkpoint_rows("z-dead") == [] and target.checkpoint_rows("y-cancelled") == []
    assert jobs.get("a-done-late").state == "done"

    assert jobs.sweep(settled_before=horizon, limit=2).removed == 1
    assert jobs.get("a-done-late") is None
    assert jobs.sweep(settled_before=horizon, limit=2).removed == 0
    assert jobs.sweep(settled_before=horizon).removed == 0
    assert jobs.get("x-done").state == "done"
    assert jobs.get("old-pending").state == "pending"
    assert jobs.counts() == {**dict.fromkeys(jobs.counts(), 0), "done": 1, "pending": 1}


def test_10_17_sweep_without_limit_removes_everything_past_the_horizon(jobs, clock):
    """spec 10.17, D8: sweep(limit=None) removes every settled job past the
    horizon (in bounded batches internally)."""
    for i in range(150):
        jobs.enqueue("k", id=f"j{i:03d}")
        jobs.complete(claim1(jobs).lease)
    clock.advance(1)
    assert jobs.sweep(settled_before=clock()).removed == 150
    assert jobs.counts()["done"] == 0
    assert jobs.sweep(settled_before=clock()).removed == 0


@pytest.mark.parametrize("horizon", ["missing", None, "yesterday"])
def test_10_18_horizon_is_required(jobs, clock, horizon):
    """spec 10.18: sweep with no settled_before is a TypeError and removes nothing."""
    jobs.enqueue("k", id="j")
    jobs.complete(claim1(jobs).lease)
    clock.advance(10)
    with pytest.raises(TypeError):
        if horizon == "missing":
            jobs.sweep()
        else:
            jobs.sweep(settled_before=horizon)
    assert jobs.get("j").state == "done"


def test_10_19_sweep_never_touches_live_jobs(jobs, clock, target):
    """spec 10.19: old pending, failed and leased jobs and their checkpoints survive
    a far-future horizon."""
    jobs.enqueue("k", id="pending-with-cp", max_attempts=5)
    jobs.enqueue("k", id="failed-with-cp", max_attempts=5)
    jobs.enqueue("k", id="leased-with-cp", max_attempts=5)
    jobs.enqueue("k", id="settled")
    first = claim1(jobs, lease_ms=1000).lease  # failed-with-cp (id order)
    jobs.checkpoints(first).save("f", 1)
    jobs.fail(first, "x")
    second = claim1(jobs, lease_ms=1000).lease  # leased-with-cp
    jobs.checkpoints(second).save("l", 1)
    third = claim1(jobs, lease_ms=1000).lease  # pending-with-cp: save, expire, requeue
    jobs.checkpoints(third).save("p", 1)
    jobs.complete(claim1(jobs).lease)  # settled
    assert [x.job_id for x in (first, second, third)] == [
        "failed-with-cp",
        "leased-with-cp",
        "pending-with-cp",
    ]
    second = jobs.renew(second, lease_ms=10**9)  # keep it live however far the clock goes
    clock.set(third.expires_at)
    assert jobs.requeue("pending-with-cp") is True
    clock.advance(10**6)
    result = jobs.sweep(settled_before=clock() + 10**12)
    assert result.removed == 1 and jobs.get("settled") is None
    assert {i: jobs.get(i).state for i in ("pending-with-cp", "failed-with-cp", "leased-with-cp")} == {
        "pending-with-cp": "pending", "failed-with-cp": "failed", "leased-with-cp": "leased",
    }  # fmt: skip
    assert target.checkpoint_rows("pending-with-cp") == [("p", 1)]
    assert target.checkpoint_rows("failed-with-cp") == [("f", 1)]
    assert target.checkpoint_rows("leased-with-cp") == [("l", 1)]
    assert jobs.checkpoints(second).load() == {"l": 1}
