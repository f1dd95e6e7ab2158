"""Error history: every failed attempt leaves an entry on the job — attempt, when,
the exception's class path, its message and a bounded traceback — and the list is bounded (the
first entry and the most recent are kept). ``last_error`` still holds the last message."""

from __future__ import annotations

import pytest

import tenure
from tenure.attempt_history import MAX_ENTRIES, MAX_MESSAGE, MAX_TRACEBACK

from ..worker._wk import Outcomes


class Throttled(Exception):
    pass


def test_history_of_a_job_failed_three_ways(any_store, make_worker, clock):
    """Three attempts fail three ways (a KeyError, an application exception, a Discard):
    three entries in order with class paths, messages, tracebacks and owners; the job is dead and
    last_error is the last message."""
    jobs = any_store.jobs
    calls = []

    def handler(payload, ctx):
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            return {}["user_id"]
        if ctx.attempt == 2:
            raise Throttled("slow down")
        raise tenure.Discard("bad input, giving up")

    job_id = jobs.enqueue("k", {"n": 1}, max_attempts=5)
    outcomes = Outcomes()
    w = make_worker(
        any_store, {"k": handler}, poll_interval=0.01, on_outcome=outcomes, backoff_base=0, owner="worker-a"
    )
    w.start()  # backoff_base=0: each retry is due at once, on the injected clock that stands still
    assert [e["outcome"] for e in outcomes.wait(3)] == ["failed"] * 3
    job = jobs.get(job_id)
    assert job.state == "dead" and calls == [1, 2, 3]
    assert [e["attempt"] for e in job.errors] == [1, 2, 3]
    first, second, third = job.errors
    assert first["type"] == "builtins.KeyError" and first["message"] == "'user_id'"
    assert "KeyError: 'user_id'" in first["traceback"] and 'return {}["user_id"]' in first["traceback"]
    assert second["type"] == f"{__name__}.Throttled" and second["message"] == "slow down"
    assert "raise Throttled" in second["traceback"]
    assert third["type"] == "tenure.handler_control.Discard" and third["message"] == "bad input, giving up"
    assert all(
        e["owner"] == "worker-a" and isinstance(e["at"], int) and e["duration_ms"] >= 0 for e in job.errors
    )
    assert first["at"] <= second["at"] <= third["at"] == job.updated_at
    assert job.last_error == "bad input, giving up"


def test_fail_through_the_store_api_records_history(any_store, clock):
    """``jobs.fail(lease, exc)`` from the low-level API records the entry too; a plain message has
    no type and no traceback; a refused (stale) failure records nothing."""
    jobs = any_store.jobs
    job_id = jobs.enqueue("k", max_attempts=3)
    claim = jobs.claim(["k"], owner="me")
    try:
        raise ValueError("boom")
    except ValueError as exc:
        jobs.fail(claim.lease, exc)
    clock.advance(120_000)
    claim2 = jobs.claim(["k"], owner="me")
    jobs.fail(claim2.lease, "plain text")
    with pytest.raises(tenure.TenureError):
        jobs.fail(claim.lease, ValueError("stale"))  # the first attempt's lease is long gone
    errors = jobs.get(job_id).errors
    assert [(e["attempt"], e["type"], e["message"]) for e in errors] == [
        (1, "builtins.ValueError", "boom"),
        (2, None, "plain text"),
    ]
    assert errors[0]["at"] == clock() - 120_000 and errors[1]["at"] == clock()
    assert "ValueError: boom" in errors[0]["traceback"] and errors[1]["traceback"] is None
    assert jobs.get(job_id).last_error == "plain text"


def test_history_is_bounded_first_and_most_recent(any_store, clock):
    """Past MAX_ENTRIES failures the first entry and the most recent ones are kept; a huge
    traceback is cut to its end (where the raising frame is)."""
    jobs = any_store.jobs
    job_id = jobs.enqueue("k", max_attempts=50)
    total = MAX_ENTRIES + 5

    for _ in range(total):
        claim = jobs.claim(["k"], owner="me")
        try:
            raise RuntimeError("x" * 20_000 + "END")
        except RuntimeError as exc:
            jobs.fail(claim.lease, exc)
        clock.advance(120_000)
    errors = jobs.get(job_id).errors
    assert len(errors) == MAX_ENTRIES
    assert [e["attempt"] for e in errors] == [1, *range(total - MAX_ENTRIES + 2, total + 1)]
    tb, message = errors[-1]["traceback"], errors[-1]["message"]
    assert len(tb) <= MAX_TRACEBACK and tb.startswith("...") and tb.rstrip().endswith("xxEND")
    assert len(message) <= MAX_MESSAGE and message.startswith("xxx") and message.endswith("...")


def test_completion_and_requeue_keep_the_history(any_store, clock):
    """A later success or an operator requeue does not erase what failed before."""
    jobs = any_store.jobs
    job_id = jobs.enqueue("k", max_attempts=1)
    claim = jobs.claim(["k"], owner="me")
    jobs.fail(claim.lease, OSError("disk"))
    assert jobs.get(job_id).state == "dead"
    assert jobs.requeue(job_id)
    claim = jobs.claim(["k"], owner="me")
    jobs.complete(claim.lease, {"ok": True})
    job = jobs.get(job_id)
    assert job.state == "done" and [e["type"] for e in job.errors] == ["builtins.OSError"]
    fresh = jobs.get(jobs.enqueue("k"))
    assert fresh.errors == [] and fresh.cancel_requested_at is None


def test_jobs_show_prints_the_history(cli, engine_url):
    """``tenure jobs show ID`` prints every entry (attempt, type, message) and its traceback;
    ``--json`` carries the list as ``errors``."""
    store = tenure.connect(engine_url)
    try:
        job_id = store.jobs.enqueue("k", max_attempts=2)
        for _ in range(2):
            claim = store.jobs.claim(["k"], owner="host:1")
            try:
                {}["user_id"]
            except KeyError as exc:
                store.jobs.fail(claim.lease, exc, backoff_base_ms=0)
    finally:
        store.close()
    out = cli("jobs", "show", job_id).out
    assert "error history (2 failed attempt(s), oldest first):" in out
    assert "- attempt 1 at " in out and "by host:1: builtins.KeyError: 'user_id'" in out
    assert "- attempt 2 at " in out and "    KeyError: 'user_id'" in out
    data = cli("jobs", "show", job_id, "--json").json()
    assert [e["attempt"] for e in data["errors"]] == [1, 2] and data["state"] == "dead"
