"""Progress: ``ctx.progress(fraction, note=None)`` is stored on the job as
``Job.progress``, throttled to one write per second per attempt with the last report always
written before the attempt settles, and fenced by the lease (a stale attempt writes nothing)."""

from __future__ import annotations

import threading

import pytest

import tenure


def test_progress_is_fenced_by_the_lease(any_store, clock):
    jobs = any_store.jobs
    job_id = jobs.enqueue("k")
    first = jobs.claim("k", owner="a", lease_ms=1_000)
    jobs.progress(first.lease, 0.25, note="a quarter")
    p = jobs.get(job_id).progress
    assert (p.fraction, p.note, p.attempt, p.at) == (0.25, "a quarter", 1, clock())
    clock.advance(2_000)  # the first lease expires; a second attempt takes the job
    second = jobs.claim("k", owner="b", lease_ms=60_000)
    assert second.job.id == job_id
    with pytest.raises(tenure.errors.LeaseSuperseded):
        jobs.progress(first.lease, 0.9, note="stale")
    assert jobs.get(job_id).progress.note == "a quarter"
    jobs.progress(second.lease, 0.5)
    assert (jobs.get(job_id).progress.fraction, jobs.get(job_id).progress.attempt) == (0.5, 2)
    jobs.complete(second.lease, 1)
    with pytest.raises(tenure.errors.LeaseNotHeld):
        jobs.progress(second.lease, 1.0)


@pytest.mark.parametrize(
    ("fraction", "exc", "code"),
    [
        (1.5, ValueError, "TN1001"),
        (-0.1, ValueError, "TN1001"),
        (float("nan"), ValueError, "TN1001"),
        ("half", TypeError, "TN1002"),
        (True, TypeError, "TN1002"),
    ],
)
def test_bad_progress_refused(any_store, fraction, exc, code):
    jobs = any_store.jobs
    jobs.enqueue("k")
    claim = jobs.claim("k", owner="a")
    with pytest.raises(exc) as info:
        jobs.progress(claim.lease, fraction)
    assert info.value.code == code and "progress" in str(info.value)


def test_ctx_progress_is_throttled_and_the_last_value_written_at_settle(any_store, make_worker, clock):
    jobs = any_store.jobs
    seen = {}
    release = threading.Event()

    def handler(payload, ctx):
        seen["w1"] = ctx.progress(0.1, note="start")
        seen["p1"] = jobs.get(ctx.job.id).progress.fraction
        seen["w2"] = ctx.progress(0.2)  # inside the window: kept, not written
        seen["w3"] = ctx.progress(0.3, note="almost")
        seen["p3"] = jobs.get(ctx.job.id).progress.fraction
        clock.advance(1_000)  # the window has passed
        seen["w4"] = ctx.progress(0.6, note="later")
        seen["p4"] = jobs.get(ctx.job.id).progress.fraction
        seen["w5"] = ctx.progress(0.9, note="last")
        release.wait(5)
        return "ok"

    job_id = jobs.enqueue("k")
    w = make_worker(any_store, {"k": handler}, poll_interval=0.01)
    w.start()
    release.set()
    w.stop(grace=5)
    job = jobs.get(job_id)
    assert job.state == "done"
    assert (seen["w1"], seen["w2"], seen["w3"], seen["w4"], seen["w5"]) == (True, False, False, True, False)
    assert (seen["p1"], seen["p3"], seen["p4"]) == (0.1, 0.1, 0.6)
    assert (job.progress.fraction, job.progress.note, job.progress.attempt) == (0.9, "last", 1)


def test_cli_show_prints_progress(cli, engine_url):
    store = tenure.connect(engine_url)
    try:
        job_id = store.jobs.enqueue("k")
        claim = store.jobs.claim("k", owner="t")
        store.jobs.progress(claim.lease, 0.42, note="copying files")
    finally:
        store.close()
    out = cli("jobs", "show", job_id).out
    assert "42%" in out and "copying files" in out
    assert cli("jobs", "show", job_id, "--json").json()["progress"]["fraction"] == 0.42
