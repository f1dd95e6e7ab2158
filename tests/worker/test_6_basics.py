"""spec §6, the worker's shape: options, concurrency, handler results, backoff,
outcomes, stats, restarts (rows 6.1-6.8, 6.16-6.18, 6.20, 6.22, 6.27; 3.21, 9.2, 9.6).

Every test runs on both engines with real threads. Tests that look at time stamps use the injected
clock (``any_store``); the clock is frozen unless a test moves it.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import tenure
from tenure.worker import StopResult

from ._wk import Outcomes, sampled_drain, wait_for

STATS_KEYS = {"claims", "completions", "failures", "wakes", "polls", "renewals", "lost_settlements",
              "cancellations", "in_flight", "claim_errors"}


def test_6_1_create_worker_with_every_option(any_store, make_worker):
    """spec 6.1: create_worker takes every option and answers an object with
    start, stop, stats and leases."""
    seen = Outcomes()
    w = make_worker(any_store, {"k": lambda p, ctx: p}, concurrency=2, poll_interval=0.05, lease=5,
                    owner="w-6.1", renew=True, on_outcome=seen, backoff_base=0.5, backoff_cap=2.0,
                    stop_grace=1.0)
    for method in ("start", "stop", "stats", "leases"):
        assert callable(getattr(w, method))
    assert (w.concurrency, w.poll_interval, w.lease_ms, w.owner, w.renew, w.stop_grace) == \
        (2, 0.05, 5000, "w-6.1", True, 1.0)
    job_id = any_store.jobs.enqueue("k", {"x": 1})
    assert w.start() is w
    seen.wait(1)
    assert w.leases() == []
    result = w.stop()
    assert isinstance(result, StopResult) and (result.drained, result.in_flight) == (True, 0)
    job = any_store.jobs.get(job_id)
    assert (job.state, job.result, job.lease_owner) == ("done", {"x": 1}, None)


@pytest.mark.parametrize("bad,exc", [(0, ValueError), (-1, ValueError), (1.5, TypeError), ("2", TypeError),
                                     (True, TypeError), (None, TypeError)])
def test_6_2_concurrency_must_be_a_positive_int(any_store, bad, exc):
    """spec 6.2: concurrency defaults to 1; 0, -1, 1.5, "2" (and bool) raise at
    construction."""
    assert any_store.jobs.create_worker({"k": print}).concurrency == 1
    with pytest.raises(exc):
        any_store.jobs.create_worker({"k": print}, concurrency=bad)


def test_6_3_at_most_concurrency_attempts_at_once(any_store, make_worker):
    """spec 6.3: concurrency=N runs at most N attempts at once; in_flight stops at N."""
    release = threading.Event()
    lock = threading.Lock()
    running, peak = [0], [0]

    def handler(payload, ctx):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        release.wait(10)
        with lock:
            running[0] -= 1

    any_store.jobs.enqueue_many([{"kind": "k"} for _ in range(7)])
    w = make_worker(any_store, {"k": handler}, concurrency=3, poll_interval=0.01)
    w.start()
    wait_for(lambda: w.stats()["in_flight"] == 3, what="three attempts in flight")
    # Several more dispatcher turns with every slot full: a fourth claim would happen in one of them.
    assert w.events.wait_more("turns", 3, timeout=10)
    assert w.stats()["in_flight"] == 3 and len(w.leases()) == 3 and peak[0] == 3
    assert any_store.jobs.counts()["leased"] == 3
    release.set()
    wait_for(lambda: any_store.jobs.counts()["done"] == 7, what="all jobs done")
    assert peak[0] == 3


@pytest.mark.parametrize("style", ["sync", "async"])
def test_6_4_handler_gets_payload_and_ctx_and_its_return_is_the_result(any_store, make_worker, style):
    """spec 6.4 (and 2.4): a handler gets (payload, ctx) with ctx.job,
    ctx.cancelled and ctx.checkpoints; its return value becomes the result; a None payload stays None."""
    seen = {}

    def look(payload, ctx):
        seen[ctx.job.id] = (payload, ctx.job.kind, ctx.cancelled.is_set(), ctx.checkpoints.load(),
                            ctx.lease.job_id, ctx.attempt)
        return {"ok": 1, "echo": payload}

    if style == "sync":
        handler = look
    else:
        async def handler(payload, ctx):
            await asyncio.sleep(0)
            return look(payload, ctx)

    a = any_store.jobs.enqueue("k", {"n": 1})
    b = any_store.jobs.enqueue("k", None)
    w = make_worker(any_store, {"k": handler})
    w.start()
    wait_for(lambda: any_store.jobs.counts()["done"] == 2, what="both jobs done")
    assert any_store.jobs.get(a).result == {"ok": 1, "echo": {"n": 1}}
    assert any_store.jobs.get(b).result == {"ok": 1, "echo": None}
    assert seen[a] == ({"n": 1}, "k", False, {}, a, 1)
    assert seen[b][0] is None


def test_6_5_idle_loop_polls_every_poll_interval(live_store, make_worker):
    """spec 6.5 (the polling half; the cross-process pickup is in
    test_processes.py): an idle worker polls once per poll_interval."""
    w = make_worker(live_store, {"k": print}, poll_interval=0.05, watch=False, maintenance=False)
    w.start()
    time.sleep(0.1)
    before = w.stats()
    time.sleep(0.5)
    after = w.stats()
    polls = after["polls"] - before["polls"]
    assert 5 <= polls <= 12, f"{polls} polls in 0.5 s at poll_interval=0.05"
    assert after["claims"] == 0 and after["wakes"] == before["wakes"]


@pytest.mark.parametrize("style", ["sync", "async"])
def test_6_6_same_store_enqueue_wakes_idle_loops_at_once(live_store, make_worker, style):
    """spec 6.6: with poll_interval=60 s (and no cross-process watcher), an enqueue
    on the same store starts the handler by a wake-up, not a poll (``polls`` stays 0, ``wakes``
    increases): within ~1 ms on a quiet host. The time bounds are loose (a shared 2-core host
    deschedules threads for tens of ms); the poll counter is the proof."""
    started = threading.Event()
    at = {}

    def mark(payload, ctx):
        at["start"] = time.perf_counter()
        started.set()

    if style == "sync":
        handler = mark
    else:
        async def handler(payload, ctx):
            mark(payload, ctx)

    w = make_worker(live_store, {"k": handler}, poll_interval=60, watch=False, maintenance=False)
    w.start()
    assert w.events.wait("idle", 1, timeout=10)  # the first (empty) claim is done: the enqueues below meet an idle loop
    wakes = w.stats()["wakes"]
    latencies = []
    for _ in range(3):
        started.clear()
        t0 = time.perf_counter()
        live_store.jobs.enqueue("k")
        assert started.wait(5), "the handler never started"
        latencies.append(at["start"] - t0)
        wait_for(lambda: w.stats()["in_flight"] == 0, what="the attempt to settle")
    assert min(latencies) < 0.5, latencies  # against the 60 s poll interval
    assert max(latencies) < 2.0, latencies
    assert w.stats()["wakes"] > wakes
    assert w.stats()["polls"] == 0


@pytest.mark.parametrize("rand_value,share", [(0.0, 0.5), (0.999999, 1.0)])
def test_6_7_worker_backoff_is_jittered_between_half_and_all(any_store, make_worker, clock, rand,
                                                             rand_value, share):
    """spec 6.7: the worker's backoff is min(cap, base*2^(attempts-1)), jittered
    between 1/2 and 1 times; here base 2 s and cap 3 s."""
    rand.value = rand_value

    def boom(payload, ctx):
        raise RuntimeError("boom")

    job_id = any_store.jobs.enqueue("k", max_attempts=5)
    w = make_worker(any_store, {"k": boom}, backoff_base=2.0, backoff_cap=3.0, poll_interval=0.01)
    w.start()
    expected = []
    for attempt in (1, 2, 3):
        wait_for(lambda a=attempt: (j := any_store.jobs.get(job_id)).state == "failed" and j.attempts == a,
                 what=f"attempt {attempt} to fail")
        job = any_store.jobs.get(job_id)
        delay = job.run_at - clock()
        expected.append(int(min(3000, 2000 * 2 ** (attempt - 1)) * (0.5 + rand_value / 2)))
        assert delay == expected[-1], (attempt, delay, expected)
        assert job.last_error == "boom"
        clock.advance(delay)
        any_store.jobs.enqueue("wake")  # a same-store enqueue wakes the loop at once (6.6)
    assert abs(expected[0] - 2000 * share) <= 1 and abs(expected[1] - 3000 * share) <= 1
    assert expected[1] == expected[2]  # capped


def test_6_7_default_backoff_is_one_second_base(any_store, make_worker, clock, rand):
    """spec 6.7: the defaults are a 1 s base (and a 60 s cap)."""
    rand.value = 0.0
    job_id = any_store.jobs.enqueue("k")
    w = make_worker(any_store, {"k": lambda p, ctx: 1 / 0})
    w.start()
    wait_for(lambda: any_store.jobs.get(job_id).state == "failed", what="the failure")
    assert any_store.jobs.get(job_id).run_at - clock() == 500


def test_6_8_max_attempts_belongs_to_the_job(any_store, make_worker):
    """spec 6.8: max_attempts=2 → dead after exactly 2 attempts, whatever the
    worker's settings."""
    calls = []

    def boom(payload, ctx):
        calls.append(ctx.attempt)
        raise ValueError(f"attempt {ctx.attempt}")

    job_id = any_store.jobs.enqueue("k", max_attempts=2)
    w = make_worker(any_store, {"k": boom}, backoff_base=0, poll_interval=0.01)
    w.start()
    wait_for(lambda: any_store.jobs.get(job_id).state == "dead", what="the job to die")
    assert w.events.wait_more("turns", 3, timeout=10)  # a third attempt would be claimed by now
    job = any_store.jobs.get(job_id)
    assert (job.attempts, job.max_attempts, job.last_error) == (2, 2, "attempt 2")
    assert calls == [1, 2]
    # the settler counts a failure just after its commit: the dead row can show first
    wait_for(lambda: w.stats()["failures"] >= 2, what="both failures counted")
    assert w.stats()["failures"] == 2


def test_6_16_on_outcome_once_per_settled_attempt(any_store, make_worker, other_store, clock):
    """spec 6.16: on_outcome runs once per settled attempt with outcome, job_id,
    kind, attempt, generation (code and reason when there are some): completed, failed, lost and
    cancelled in one run."""
    seen = Outcomes()
    gate, in_cancel = threading.Event(), threading.Event()

    def handler(payload, ctx):
        what = payload["what"]
        if what == "flaky" and ctx.attempt == 1:
            raise RuntimeError("flaky")
        if what == "stall" and ctx.attempt == 1:
            gate.wait(10)
        if what == "cancel":
            in_cancel.set()
            ctx.cancelled.wait(10)
        return what

    jobs = any_store.jobs
    ok = jobs.enqueue("k", {"what": "ok"}, id="ok")
    flaky = jobs.enqueue("k", {"what": "flaky"}, id="flaky")
    # No polling and no watcher: only same-store enqueues (and retries) wake the worker, so the
    # rival below claims the stalled job before the worker could reclaim it itself (6.19).
    w = make_worker(any_store, {"k": handler}, on_outcome=seen, renew=False, lease=1,
                    backoff_base=0, concurrency=4, poll_interval=60, watch=False)
    w.start()
    seen.wait(3)  # ok, flaky (failed), flaky (completed)
    stall = jobs.enqueue("k", {"what": "stall"}, id="stall")
    wait_for(lambda: any(lease.job_id == stall for lease in w.leases()), what="the stalled attempt")
    rival_jobs = other_store().jobs
    clock.advance(1000)
    rival = rival_jobs.claim(["k"], owner="rival")
    assert rival is not None and rival.job.id == stall
    gate.set()
    seen.wait(4)
    rival_jobs.complete(rival.lease, "rival")
    cancel = jobs.enqueue("k", {"what": "cancel"}, id="cancel")
    assert in_cancel.wait(10)
    (lease,) = [lease for lease in w.leases() if lease.job_id == cancel]
    assert jobs.cancel(cancel, lease=lease) is True
    events = seen.wait(5)
    time.sleep(0.05)
    assert len(seen.events) == 5, seen.events
    by = {(e["job_id"], e["attempt"]): e for e in events}
    assert len(by) == 5
    assert by[(ok, 1)]["outcome"] == "completed"
    assert (by[(flaky, 1)]["outcome"], by[(flaky, 1)]["reason"]) == ("failed", "flaky")
    assert by[(flaky, 2)]["outcome"] == "completed"
    assert (by[(stall, 1)]["outcome"], by[(stall, 1)]["code"]) == ("lost", "TN2066")
    assert (by[(cancel, 1)]["outcome"], by[(cancel, 1)]["code"]) == ("cancelled", "TN2065")
    for e in events:
        assert {"outcome", "job_id", "kind", "attempt", "generation"} <= set(e)
        assert e["kind"] == "k" and e["generation"] == e["attempt"]
    stats = w.stats()
    assert (stats["completions"], stats["failures"], stats["lost_settlements"], stats["cancellations"]) == \
        (2, 1, 1, 1)


def test_6_16_a_failure_reports_the_handlers_own_code(any_store, make_worker):
    """spec 6.16 with D6: a handler failing with a coded error (a refused
    workflow resume, TN2069) is reported ``failed`` with that ``code``; an uncoded one has none."""
    seen = Outcomes()

    def handler(payload, ctx):
        if payload == "coded":
            raise tenure.errors.ResumeMismatch("revision changed")
        raise RuntimeError("plain")

    any_store.jobs.enqueue("k", "coded", max_attempts=1)
    any_store.jobs.enqueue("k", "plain", max_attempts=1)
    w = make_worker(any_store, {"k": handler}, on_outcome=seen)
    w.start()
    events = sorted(seen.wait(2), key=lambda e: e["reason"])
    assert [(e["outcome"], e.get("code"), e["reason"]) for e in events] == [
        ("failed", "TN2069", "[TN2069] revision changed"), ("failed", None, "plain")]


def test_6_17_a_raising_observer_never_affects_the_loop(any_store, make_worker):
    """spec 6.17: with an on_outcome observer that raises, every job still gets done."""
    calls = []

    def observer(event):
        calls.append(event)
        raise RuntimeError("observer exploded")

    any_store.jobs.enqueue_many([{"kind": "k", "payload": i} for i in range(20)])
    w = make_worker(any_store, {"k": lambda p, ctx: p * 2}, on_outcome=observer, concurrency=4)
    w.start()
    wait_for(lambda: any_store.jobs.counts()["done"] == 20, what="all 20 jobs done")
    wait_for(lambda: len(calls) == 20, what="20 observer calls")
    assert w.stats()["completions"] == 20
    assert w.stop().drained


def test_6_18_leases_lists_the_leases_held_now(any_store, make_worker):
    """spec 6.18: two blocking handlers → two leases (one per attempt); afterwards none."""
    release = threading.Event()
    a = any_store.jobs.enqueue("k", id="a")
    b = any_store.jobs.enqueue("k", id="b")
    w = make_worker(any_store, {"k": lambda p, ctx: release.wait(10)}, concurrency=2, lease=60)
    w.start()
    leases = wait_for(lambda: len(w.leases()) == 2 and w.leases(), what="two leases")
    assert sorted(lease.job_id for lease in leases) == [a, b]
    for lease in leases:
        job = any_store.jobs.get(lease.job_id)
        assert (job.state, job.lease_generation, job.lease_until) == ("leased", lease.generation, lease.expires_at)
        assert lease.owner == w.owner
    release.set()
    wait_for(lambda: any_store.jobs.counts()["done"] == 2, what="both done")
    wait_for(lambda: w.leases() == [], what="no lease left")


def test_6_20_stats_report_every_counter(any_store, make_worker):
    """spec 6.20: stats() has claims, completions, failures, wakes, polls,
    renewals, lost settlements, cancellations, in-flight and claim_errors, matching the run."""
    w = make_worker(any_store, {"ok": lambda p, ctx: 1, "bad": lambda p, ctx: 1 / 0}, poll_interval=0.02,
                    concurrency=2)
    assert STATS_KEYS <= set(w.stats()) and w.stats()["healthy"] is True
    assert {val for key, val in w.stats().items() if key != "healthy"} == {0}
    w.start()
    any_store.jobs.enqueue_many([{"kind": "ok"}] * 3 + [{"kind": "bad", "max_attempts": 1}] * 2)
    wait_for(lambda: w.stats()["completions"] + w.stats()["failures"] == 5, what="five settlements")
    # Idle now: a poll comes within poll_interval of a free dispatcher (waited for, bounded, since
    # a loaded machine can delay it past any fixed sleep) ...
    wait_for(lambda: w.stats()["polls"] >= 1, what="an idle poll")
    # ... and a job enqueued to the idle worker wakes it (the five above may all have been taken
    # while every slot was busy, which consumes their wake-up without counting one).
    any_store.jobs.enqueue("ok")
    s = wait_for(lambda: (st := w.stats())["completions"] == 4 and st["wakes"] >= 1 and st["in_flight"] == 0
                 and st, what="the sixth job's completion and a wake")
    assert STATS_KEYS <= set(s)
    assert (s["claims"], s["completions"], s["failures"], s["in_flight"]) == (6, 4, 2, 0)
    assert (s["lost_settlements"], s["cancellations"], s["claim_errors"], s["renewals"]) == (0, 0, 0, 0)
    assert s["wakes"] >= 1 and s["polls"] >= 1


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ exploded")


class _Custom(BaseException):
    pass


@pytest.mark.parametrize("case", ["non-json", "nan", "str-raises", "base-exception", "system-exit",
                                  "async-non-json", "async-str-raises"])
def test_6_22_no_handler_outcome_breaks_the_loop(any_store, make_worker, case):
    """spec 6.22: a non-JSON result, or an exception whose str() raises (or a
    BaseException), becomes an ordinary failed attempt with a message; the next job still runs."""
    def bad(payload, ctx):
        if case in ("non-json", "async-non-json"):
            return {"when": object()}
        if case == "nan":
            return float("nan")
        if case in ("str-raises", "async-str-raises"):
            raise _Unprintable()
        if case == "base-exception":
            raise _Custom("custom base")
        raise SystemExit(3)

    handler = bad
    if case.startswith("async"):
        async def handler(payload, ctx):
            return bad(payload, ctx)

    job_id = any_store.jobs.enqueue("bad", max_attempts=1)
    w = make_worker(any_store, {"bad": handler, "good": lambda p, ctx: "fine"})
    w.start()
    wait_for(lambda: any_store.jobs.get(job_id).state == "dead", what="the bad job to die")
    job = any_store.jobs.get(job_id)
    assert job.last_error, job
    if "json" in case or case == "nan":
        assert "JSON" in job.last_error and job.result is None
    elif "str-raises" in case:
        assert job.last_error == "_Unprintable"
    good = any_store.jobs.enqueue("good")
    wait_for(lambda: any_store.jobs.get(good).state == "done", what="the next job")
    assert any_store.jobs.get(good).result == "fine"
    assert w.stats()["failures"] == 1 and w.running


def test_6_27_a_restart_builds_fresh_loops(any_store, make_worker):
    """spec 6.27: a later start() builds fresh loops, re-registers the wake hook and
    the close-time stop; a cancelled loop is never revived: concurrent claims stay <= concurrency."""
    lock = threading.Lock()
    running, peak = [0], [0]

    def handler(payload, ctx):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1

    w = make_worker(any_store, {"k": handler}, concurrency=2, poll_interval=0.01)
    for _ in range(3):
        w.start()
        w.stop()
    assert not w.running and w not in any_store._workers
    w.start()
    dispatchers = [t for t in threading.enumerate() if t.name == "tenure-dispatch" and t.is_alive()]
    assert len(dispatchers) == 1
    assert any_store._wake_hooks.count(w._on_local_enqueue) == 1 and any_store._workers.count(w) == 1
    any_store.jobs.enqueue_many([{"kind": "k"} for _ in range(30)])
    wait_for(lambda: any_store.jobs.counts()["done"] == 30, what="30 jobs done")
    assert peak[0] <= 2
    assert w.stats()["claims"] == 30
    any_store.close()  # the close-time stop reaches the restarted worker
    assert not w.running


def test_3_21_a_worker_made_in_a_transaction_is_root_owned(any_store):
    """spec 3.21: a worker created through tx.jobs is not bound to that transaction:
    roll it back, start the worker, and jobs are processed."""
    with pytest.raises(RuntimeError):
        with any_store.transaction() as tx:
            w = tx.jobs.create_worker({"k": lambda p, ctx: "done"})
            tx.jobs.enqueue("k", id="rolled-back")
            raise RuntimeError("roll back")
    job_id = any_store.jobs.enqueue("k")
    w.start()
    try:
        wait_for(lambda: any_store.jobs.get(job_id).state == "done", what="the job")
        assert any_store.jobs.get("rolled-back") is None
        assert w.store is any_store
    finally:
        w.stop()


def test_9_2_a_worker_started_twice_is_a_type_error(any_store, make_worker):
    """spec 9.2: a malformed handler map and a second start() raise TypeError."""
    for handlers in ({"k": 1}, {3: print}, ["k"], {}):
        with pytest.raises(TypeError):
            any_store.jobs.create_worker(handlers)
    w = make_worker(any_store, {"k": print})
    w.start()
    with pytest.raises(TypeError):
        w.start()
    assert w.running
    w.stop()
    w.start()  # a stopped worker may start again
    assert w.running


def test_9_6_a_job_failure_is_data_never_raised(any_store, make_worker):
    """spec 9.6: with an always-raising handler, start and stop raise nothing; the
    failure lands in last_error and the §4 states."""
    def always(payload, ctx):
        raise KeyError("always")

    job_id = any_store.jobs.enqueue("k", max_attempts=3)
    w = make_worker(any_store, {"k": always}, backoff_base=0, poll_interval=0.01)
    w.start()
    wait_for(lambda: any_store.jobs.get(job_id).state == "dead", what="dead")
    result = w.stop()
    assert result.drained
    job = any_store.jobs.get(job_id)
    assert (job.attempts, job.last_error) == (3, "'always'")


def test_settle_and_refill_keeps_concurrency_and_max_jobs(any_store, make_worker):
    """Under a backlog the settler claims the slots a batch frees in the settlement's own
    transaction. spec 6.3 still holds exactly: no handler ever sees more than
    ``concurrency`` attempts in flight; ``max_jobs`` caps the claims of both claimers together;
    every job runs once."""
    jobs = any_store.jobs
    jobs.enqueue_many([{"kind": "k", "payload": {"i": i}} for i in range(300)])
    calls = []
    orig = jobs.complete_and_claim

    def spy(*args, **kwargs):
        calls.append(kwargs["limit"])
        return orig(*args, **kwargs)

    jobs.complete_and_claim = spy  # counts the combined calls; the store underneath is real
    seen, in_flight = [], []

    def handler(payload, ctx):
        seen.append(payload["i"])
        in_flight.append(w.stats()["in_flight"])

    w = make_worker(any_store, {"k": handler}, concurrency=4, poll_interval=0.01, max_jobs=200)
    w.start()
    assert w.wait(30)
    assert calls, "the settler never claimed in its own transaction"
    assert max(in_flight) <= 4
    assert w.stats()["claims"] == 200 and len(seen) == len(set(seen)) == 200
    assert jobs.counts()["done"] == 200 and jobs.counts()["pending"] == 100


def test_claim_sizes_never_exceed_the_free_slots_and_come_from_a_small_set():
    """Each claim size is its own statement on PostgreSQL (its LIMIT is in the text so its prepared
    plan is reused): the worker claims from a fixed set of sizes, never more than it has free."""
    from tenure.worker.producer import _claim_size

    sizes = {_claim_size(n) for n in range(1, 101)}
    assert all(0 < _claim_size(n) <= n for n in range(1, 10_001))
    assert sizes == {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96}


def test_two_settlers_on_postgresql_keep_concurrency_exact(any_store, make_worker):
    """On PostgreSQL two settler threads settle (and refill) at once, each about half the slots, so
    one half's round trip overlaps the other half's handlers; SQLite keeps one (its
    single writer would only queue them). spec 6.3 holds exactly with both claiming: the
    attempts in flight, sampled by a watcher thread throughout, never exceed ``concurrency``, and
    every job runs and settles once."""
    d = sampled_drain(any_store, make_worker, 600, slow_share=0.3, slow_s=0.001, timeout=60, concurrency=8,
                      poll_interval=0.01)
    assert 0 < d.peak <= 8
    assert len(d.seen) == len(set(d.seen)) == 600 and d.stats["completions"] == 600
    assert any_store.jobs.counts().get("done", 0) == 600
    expected = {"tenure-settle-0"} if any_store.engine.exclusive_gate else {"tenure-settle-0", "tenure-settle-1"}
    assert d.settled_on == expected


def test_stop_from_on_outcome_returns_with_settlers_busy(any_store, make_worker):
    """An ``on_outcome`` observer may stop its own worker (say, at the first failure) while the other
    settler is mid-batch and about to report too: stop() neither deadlocks on the settlers nor
    waits for itself, the worker stops, and nothing is settled twice."""
    jobs = any_store.jobs
    jobs.enqueue_many([{"kind": "k", "payload": {"i": i}} for i in range(400)])
    results, stopper_done = [], threading.Event()

    def observer(event):
        if event["outcome"] == "completed" and not results:
            results.append(w.stop(grace=0.5))
            stopper_done.set()
        elif results:
            w.stop(grace=0.5)  # a second observer call while (or after) the first stop runs

    w = make_worker(any_store, {"k": lambda payload, ctx: time.sleep(0.0005)}, concurrency=8,
                    poll_interval=0.01, on_outcome=observer)
    w.start()
    assert stopper_done.wait(30), "stop() from on_outcome never returned"
    wait_for(lambda: not w.running, what="the worker stopped")
    wait_for(lambda: not any(t.is_alive() for t in w._threads), what="every worker thread ended")
    counts = jobs.counts()
    assert counts.get("leased", 0) + counts.get("done", 0) + counts.get("pending", 0) == 400
    assert counts.get("done", 0) == w.stats()["completions"] >= 1


def test_a_failed_settle_and_claim_returns_its_slot_credits(any_store, make_worker):
    """When the combined settle-and-claim fails (rolled back), the batch is settled alone and its
    attempts stop funding the claim that never happened: in flight still never exceeds
    ``concurrency``, every job runs once, and no credit is left over once the worker is idle."""
    jobs = any_store.jobs
    jobs.enqueue_many([{"kind": "k", "payload": {"i": i}} for i in range(400)])
    orig, calls, seen, peak = jobs.complete_and_claim, [0], [], [0]

    def flaky(*args, **kwargs):
        calls[0] += 1
        if calls[0] % 2:
            raise RuntimeError("injected: the combined call failed and rolled back")
        return orig(*args, **kwargs)

    jobs.complete_and_claim = flaky  # every other combined call fails; the store underneath is real
    alone = jobs.complete_many

    def slow_alone(*args, **kwargs):
        time.sleep(0.02)  # the batch settled alone still holds its slots: a window to over-claim in
        return alone(*args, **kwargs)

    jobs.complete_many = slow_alone

    def handler(payload, ctx):
        seen.append(payload["i"])
        peak[0] = max(peak[0], w.stats()["in_flight"])

    w = make_worker(any_store, {"k": handler}, concurrency=6, poll_interval=0.005)
    w.start()
    wait_for(lambda: jobs.counts().get("done", 0) == 400, what="all done", timeout=60)
    assert calls[0] >= 2, "the combined call was never tried twice"
    assert peak[0] <= 6
    assert len(seen) == len(set(seen)) == 400
    wait_for(lambda: w.stats()["in_flight"] == 0 and w._credit == 0, what="idle, every credit returned")
    assert w.stop().drained


def test_an_enqueue_while_every_slot_is_taken_wakes_the_dispatcher_once_one_frees(live_store, make_worker):
    """With every slot taken the dispatcher has nothing to claim for: a wake-up (a local enqueue,
    the cross-process watcher seeing the store's own commits) is deferred, not delivered, and is
    delivered as soon as a slot frees, so the job enqueued meanwhile starts without a poll
    (poll_interval=60 s here)."""
    release = threading.Event()
    started: list[str] = []

    def hold(payload, ctx):
        started.append(ctx.job.id)
        assert release.wait(10)

    w = make_worker(live_store, {"hold": hold, "k": lambda payload, ctx: None}, concurrency=1, poll_interval=60,
                    watch=False, maintenance=False)
    first = live_store.jobs.enqueue("hold")
    w.start()
    wait_for(lambda: started == [first], what="the first job to start")
    second = live_store.jobs.enqueue("k")  # the hook runs in this call, with the only slot taken
    assert w._wake_deferred and not w._wake.is_set()
    release.set()
    wait_for(lambda: live_store.jobs.get(second).state == "done", what="the second job to run")
    assert w.stats()["polls"] == 0


@pytest.mark.parametrize("free", [5, 44, 100])
def test_a_worker_claims_every_free_slot_at_once_where_any_claim_size_costs_the_same(any_store, make_worker,
                                                                                      free):
    """SQLite binds a claim's LIMIT: one claim takes every free slot (up to claim_batch), and a
    settle-and-claim leaves no remainder for the dispatcher to claim in a second transaction.
    PostgreSQL keeps to the sizes of _claim_size (one prepared statement each)."""
    from tenure.worker.producer import _claim_size

    w = make_worker(any_store, {"k": lambda payload, ctx: None}, concurrency=free)
    w._reserved, w._credit, w._quarantine, w._attempts = 0, 0, None, {}
    want = w._reserve()
    if getattr(any_store.engine, "any_claim_size", False):
        assert want == min(free, w.claim_batch)
    else:
        assert want == _claim_size(min(free, w.claim_batch))
    assert w._reserved == want
