"""Cancel from anywhere (D11): ``store.jobs.request_cancel(id)``.

A queued job is cancelled at once; a running one is flagged, its holder — in this process or
another — sets ``ctx.cancelled`` (reason code ``cancel_requested``) and settles the attempt
``cancelled`` with its own lease within a second; a holder that was SIGKILLed is replaced by the
next claim, which settles the job ``cancelled`` instead of running it. ``cancel()`` is unchanged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tenure
from tenure.errors import LeaseNotHeld, LeaseRequired

from ..worker._wk import Outcomes, wait_for

HERE = Path(__file__).resolve().parent
SRC = Path(tenure.__file__).resolve().parents[1]
ROOT = HERE.parents[1]


def ledger(path: Path) -> list[list]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def spawn(url: str, path: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), str(ROOT)]), TENURE_LOG_LEVEL="INFO")
    log = open(path.with_suffix(".log"), "wb")  # the child owns it
    try:
        return subprocess.Popen(
            [sys.executable, str(HERE / "_cancel_child.py"), url, str(path), *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    finally:
        log.close()


@pytest.fixture
def procs():
    made: list[subprocess.Popen] = []
    yield made
    for p in made:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_a_queued_job_is_cancelled_at_once(any_store, clock):
    jobs = any_store.jobs
    pending, failed, expired = jobs.enqueue("k"), jobs.enqueue("k"), jobs.enqueue("k", priority=-1)
    claim = jobs.claim(["k"], owner="me")
    assert claim.job.id in (pending, failed)
    jobs.fail(claim.lease, "once")
    claim = jobs.claim(["k"], owner="me", lease_ms=1_000)
    clock.advance(1_000)  # its lease expired: queued, like cancel() treats it (D4)
    for job_id in {pending, failed, expired}:
        assert jobs.request_cancel(job_id) == "cancelled"
        assert jobs.get(job_id).state == "cancelled"
        assert jobs.request_cancel(job_id) == "unchanged"
    done = jobs.enqueue("k")
    c = jobs.claim(["k"], owner="me")
    jobs.complete(c.lease, None)
    with pytest.raises(LeaseNotHeld):
        jobs.request_cancel(done)
    with pytest.raises(LeaseNotHeld):
        jobs.request_cancel("no-such-job")


def test_a_running_job_is_flagged_and_cancel_keeps_its_rules(any_store, clock):
    """Without a worker: the leased job is flagged (cancel_requested_at), stays leased, and
    cancel(id) still refuses it without the lease (TN2068). The flagged job's holder settles it
    with its own lease; a stale lease cannot."""
    jobs = any_store.jobs
    job_id = jobs.enqueue("k")
    claim = jobs.claim(["k"], owner="holder")
    assert jobs.request_cancel(job_id) == "requested"
    job = jobs.get(job_id)
    assert (job.state, job.cancel_requested_at) == ("leased", clock())
    assert jobs.request_cancel(job_id) == "requested"  # idempotent: the first time is kept
    with pytest.raises(LeaseRequired):
        jobs.cancel(job_id)
    assert jobs.cancel(job_id, lease=claim.lease) is True
    assert jobs.get(job_id).state == "cancelled"


def test_the_claim_never_runs_a_flagged_job_whose_holder_is_gone(any_store, clock):
    """A flagged job whose lease expired is not claimed again: the next claim settles it cancelled
    (and the fence refuses the old holder)."""
    jobs = any_store.jobs
    job_id = jobs.enqueue("k")
    other = jobs.enqueue("k", priority=-5)
    claim = jobs.claim(["k"], owner="holder", lease_ms=1_000)
    assert claim.job.id == job_id
    assert jobs.request_cancel(job_id) == "requested"
    clock.advance(1_000)
    any_store._abandoned_next = 0.0  # this process's claims clean up at most once a second
    got = jobs.claim(["k"], owner="next")
    assert got.job.id == other
    job = jobs.get(job_id)
    assert (job.state, job.attempts, job.lease_owner) == ("cancelled", 1, None)
    with pytest.raises(LeaseNotHeld):
        jobs.complete(claim.lease, None)


def test_a_failure_racing_the_request_ends_cancelled(any_store):
    """The holder failed before it saw the flag: the job ends cancelled, never retried."""
    jobs = any_store.jobs
    job_id = jobs.enqueue("k", max_attempts=5)
    claim = jobs.claim(["k"], owner="holder")
    jobs.request_cancel(job_id)
    assert jobs.fail(claim.lease, RuntimeError("x")).state == "cancelled"
    assert jobs.claim(["k"], owner="next") is None


def test_request_cancel_stops_a_local_handler(live_store, make_worker):
    """In this process: the handler sees ctx.cancelled with the cancel_requested reason, the
    attempt is reported cancelled once, the job is cancelled, and its late return changes nothing."""
    jobs = live_store.jobs
    seen = []

    def handler(payload, ctx):
        ctx.cancelled.wait(30)
        seen.append(ctx.cancelled.reason.code)
        return "late result"

    outcomes = Outcomes()
    w = make_worker(live_store, {"k": handler}, poll_interval=0.01, on_outcome=outcomes)
    w.start()
    job_id = jobs.enqueue("k")
    wait_for(lambda: jobs.get(job_id).state == "leased", what="the claim")
    t0 = time.monotonic()
    assert jobs.request_cancel(job_id) == "requested"
    [event] = outcomes.wait(1)
    wait_for(lambda: seen, what="the handler to return")
    assert time.monotonic() - t0 < 1.0
    assert (event["outcome"], event["code"]) == ("cancelled", "cancel_requested")
    assert seen == ["cancel_requested"]
    wait_for(lambda: w.stats()["in_flight"] == 0, what="the slot to free")
    job = jobs.get(job_id)
    assert (job.state, job.result, job.attempts) == ("cancelled", None, 1)
    assert w.stats()["cancellations"] == 1 and len(outcomes) == 1


def test_request_cancel_from_another_process_stops_the_handler_within_a_second(engine_url, tmp_path, procs):
    """The worker runs in a child process; this process asks. The child's handler sees the
    request within a second and the job ends cancelled, after exactly one run."""
    store = tenure.connect(engine_url)
    try:
        path = tmp_path / "ledger.jsonl"
        job_id = store.jobs.enqueue("long", {"args": [60], "kwargs": {}})
        procs.append(spawn(engine_url, path))
        wait_for(lambda: ledger(path), timeout=30, what="the child to start the job")
        t0 = time.monotonic()
        assert store.jobs.request_cancel(job_id) == "requested"
        wait_for(lambda: len(ledger(path)) >= 2, timeout=5, what="the handler to stop")
        took = time.monotonic() - t0
        wait_for(lambda: store.jobs.get(job_id).state == "cancelled", timeout=5, what="cancelled")
        assert took < 1.0, took
        started, stopped = ledger(path)
        assert started[:2] == ["started", 1] and stopped[:2] == ["stopped", "cancel_requested"]
        procs[0].send_signal(signal.SIGTERM)
        assert procs[0].wait(20) == 0
        job = store.jobs.get(job_id)
        assert (job.state, job.attempts, job.result) == ("cancelled", 1, None)
        assert len(ledger(path)) == 2  # never ran again
    finally:
        store.close()


def test_request_cancel_after_the_worker_was_sigkilled(engine_url, tmp_path, procs, make_worker):
    """The holder is SIGKILLed first; the request flags the job; the next worker's claim (its
    clock past the dead holder's lease) settles it cancelled instead of running it."""
    store = tenure.connect(engine_url)
    try:
        path = tmp_path / "ledger.jsonl"
        job_id = store.jobs.enqueue("long", {"args": [60], "kwargs": {}})
        procs.append(spawn(engine_url, path))
        wait_for(lambda: ledger(path), timeout=30, what="the child to start the job")
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(10)
        assert store.jobs.request_cancel(job_id) == "requested"
        assert store.jobs.get(job_id).state == "leased"
    finally:
        store.close()
    later = tenure.connect(engine_url, clock=lambda: int(time.time() * 1000) + 60_000)  # past the 3 s lease
    try:
        ran = []
        outcomes = Outcomes()
        w = make_worker(
            later, {"long": lambda p, ctx: ran.append(1)}, poll_interval=0.01, on_outcome=outcomes
        )
        w.start()
        wait_for(
            lambda: later.jobs.get(job_id).state == "cancelled", timeout=5, what="cancelled by the claim"
        )
        w.stop(grace=1)
        job = later.jobs.get(job_id)
        assert (job.state, job.attempts) == ("cancelled", 1) and ran == [] and len(outcomes) == 0
        assert len(ledger(path)) == 1  # started once, never finished, never ran again
    finally:
        later.close()


def test_cli_cancel_asks_the_worker_of_a_running_job(cli, engine_url):
    """``tenure jobs cancel ID`` is request_cancel: a running job is flagged (still leased, its
    holder settles it), a queued one is cancelled at once, a done one is refused with TN2065."""
    store = tenure.connect(engine_url)
    try:
        running = store.jobs.enqueue("video.encode", {"id": 1})
        held = store.jobs.claim(["video.encode"], owner="encoder:1", lease_ms=600_000)
        assert held is not None and held.job.id == running
        assert cli("jobs", "cancel", running, "--json").json() == {"id": running, "cancelled": False,
                                                                   "requested": True}
        job = store.jobs.get(running)
        assert job.state == "leased" and job.cancel_requested_at is not None
        assert cli("jobs", "cancel", running).out.strip().startswith(f"cancel requested for {running}")
        queued = store.jobs.enqueue("video.encode", {"id": 2})
        assert cli("jobs", "cancel", queued).out.strip() == f"cancelled {queued}"
        store.jobs.cancel(running, held.lease)  # the holder settles it with its own lease
        assert store.jobs.get(running).state == "cancelled"
        done = store.jobs.enqueue("video.encode", {"id": 3})
        store.jobs.complete(store.jobs.claim(["video.encode"], owner="encoder:1").lease, "ok")
        refused = cli("jobs", "cancel", done, expect=1)
        assert "TN2065" in refused.err and store.jobs.get(done).state == "done"
    finally:
        store.close()
