"""Control from inside a handler: ``raise tenure.Retry(delay=...)``, ``Snooze`` and
``Discard``, and the ``retry_on`` / ``discard_on`` task options. Each settles through the fence."""

from __future__ import annotations

import pytest

import tenure

from ..worker._wk import Outcomes


def _run(store, make_worker, handler, **options):
    outcomes = Outcomes()
    w = make_worker(store, {"k": handler}, poll_interval=0.01, on_outcome=outcomes, **options)
    w.start()
    return w, outcomes


def test_snooze_keeps_retries_left_and_reruns_at_the_time(any_store, make_worker, clock):
    """A snoozed job is pending at now + delay with its retries left unchanged (max_attempts grows
    by one, attempts still counts the run); it is not claimable a millisecond early and runs at
    the time."""
    jobs = any_store.jobs
    seen = []

    def handler(payload, ctx):
        seen.append(ctx.attempt)
        if ctx.attempt == 1:
            raise tenure.Snooze(delay=600)
        return "ran"

    job_id = jobs.enqueue("k", max_attempts=3)
    t0 = clock()
    w, outcomes = _run(any_store, make_worker, handler)
    [event] = outcomes.wait(1)
    assert event["outcome"] == "snoozed" and event["reason"] == "snoozed for 600 s"
    job = jobs.get(job_id)
    assert (job.state, job.run_at, job.attempts, job.max_attempts) == ("pending", t0 + 600_000, 1, 4)
    assert job.max_attempts - job.attempts == 3  # retries left, as before the snoozed run
    assert job.errors == [] and job.last_error is None
    clock.advance(599_999)
    assert jobs.claim(["k"], owner="probe") is None  # not due yet
    clock.advance(1)
    w._wake.set()
    outcomes.wait(2)
    job = jobs.get(job_id)
    assert (job.state, job.result, seen) == ("done", "ran", [1, 2])
    assert w.stats()["snoozes"] == 1 and w.stats()["failures"] == 0


def test_discard_is_dead_after_one_attempt(any_store, make_worker):
    jobs = any_store.jobs
    job_id = jobs.enqueue("k", max_attempts=5)
    w, outcomes = _run(
        any_store, make_worker, lambda p, ctx: (_ for _ in ()).throw(tenure.Discard("never valid"))
    )
    [event] = outcomes.wait(1)
    job = jobs.get(job_id)
    assert (job.state, job.attempts, job.last_error) == ("dead", 1, "never valid")
    assert event["outcome"] == "failed" and isinstance(event["exception"], tenure.Discard)


def test_retry_uses_the_handlers_delay_and_still_counts(any_store, make_worker, clock):
    """Retry(delay=10): failed with run_at exactly now + 10 s (no backoff, no jitter, over the
    queue's own retry policy too); with no attempts left it is dead."""
    jobs = any_store.jobs
    job_id = jobs.enqueue("k", max_attempts=2, retry_delay=1_000)

    def handler(payload, ctx):
        raise tenure.Retry(delay=10)

    t0 = clock()
    w, outcomes = _run(any_store, make_worker, handler)
    outcomes.wait(1)
    job = jobs.get(job_id)
    assert (job.state, job.run_at, job.attempts) == ("failed", t0 + 10_000, 1)
    assert job.errors[0]["type"] == "tenure.handler_control.Retry"
    clock.advance(10_000)
    w._wake.set()
    outcomes.wait(2)
    assert jobs.get(job_id).state == "dead"


def test_retry_on_and_discard_on_task_options(engine_url, clock, make_worker):
    """discard_on: dead at once, the history naming the original exception; retry_on: a listed
    exception is retried, an unlisted one is dead at once."""
    store = tenure.connect(engine_url, clock=clock)
    app = tenure.App(store=store)
    try:

        @app.task(name="parse", discard_on=(ValueError,), max_attempts=5)
        def parse(text):
            return int(text)

        @app.task(name="fetch", retry_on=(TimeoutError,), max_attempts=5)
        def fetch(kind):
            if kind == "timeout":
                raise TimeoutError("upstream slow")
            raise PermissionError("forbidden")

        bad = parse.enqueue("abc").id
        slow = fetch.enqueue("timeout").id
        denied = fetch.enqueue("denied").id
        outcomes = Outcomes()
        w = make_worker(store, app.handlers(), poll_interval=0.01, on_outcome=outcomes, concurrency=3)
        w.start()
        outcomes.wait(3)
        j_bad, j_slow, j_denied = (store.jobs.get(i) for i in (bad, slow, denied))
        assert (j_bad.state, j_bad.attempts) == ("dead", 1)
        assert (
            j_bad.errors[0]["type"] == "builtins.ValueError" and "int(text)" in j_bad.errors[0]["traceback"]
        )
        assert "discard_on ValueError" in j_bad.last_error
        assert j_slow.state == "failed" and j_slow.errors[0]["type"] == "builtins.TimeoutError"
        assert (j_denied.state, j_denied.errors[0]["type"]) == ("dead", "builtins.PermissionError")
        assert "not in retry_on" in j_denied.last_error
        w.stop(grace=1)
    finally:
        store.close()


def test_options_are_validated():
    app = tenure.App("sqlite:///unused.db")
    with pytest.raises(TypeError):
        app.task(retry_on=("ValueError",))(lambda: None)
    with pytest.raises(TypeError):
        app.task(discard_on=42)(lambda: None)


def test_snooze_and_control_are_fenced(any_store, clock):
    """A stale lease cannot snooze (the coded refusal), and snooze(lease) through the store API
    answers the record."""
    jobs = any_store.jobs
    job_id = jobs.enqueue("k")
    claim = jobs.claim(["k"], owner="me", lease_ms=1_000)
    clock.advance(1_000)
    with pytest.raises(tenure.TenureError) as info:
        jobs.snooze(claim.lease, 5)
    assert info.value.code == "TN2067"
    claim = jobs.claim(["k"], owner="me")
    job = jobs.snooze(claim.lease, 5)
    assert (job.id, job.state, job.run_at) == (job_id, "pending", clock() + 5_000)
