"""Liveness under a job that crashes its worker (docs/guarantees.md,
"Liveness: bounded reclaim and dead letters").

A handler that kills its process (``os._exit``, like a segfault or the OOM killer) must not stall
the queue: it is reclaimed at most until its ``max_attempts`` are used, then the next claim settles
it dead (TN2084); and a job reclaimed from an expired lease runs alone in its worker, so it takes no
healthy job down with it. Both engines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import tenure
from tenure.errors import WorkerLost
from tests.worker._wk import wait_for

WORKER = textwrap.dedent("""
    import json, os, sys, time
    import tenure
    url, ledger = sys.argv[1], sys.argv[2]
    store = tenure.connect(url)
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    def crash(payload, ctx):
        os.write(fd, (json.dumps([ctx.job.id, ctx.attempt]) + "\\n").encode())
        os._exit(17)  # the worker process dies with every attempt it holds
    def healthy(payload, ctx):
        os.write(fd, (json.dumps([ctx.job.id, ctx.attempt]) + "\\n").encode())
        time.sleep(0.3)
        return {"attempt": ctx.attempt}
    w = store.jobs.create_worker({"crash": crash, "healthy": healthy}, concurrency=8, lease=1,
                                 poll_interval=0.05, maintenance=False)
    w.start()
    while True:
        time.sleep(1)
""")


@pytest.mark.timeout(120)
def test_a_crashing_job_dies_within_its_attempts_and_takes_no_hostages(engine_url, tmp_path):
    """A job whose handler kills the worker process (max_attempts=2) among six healthy jobs, under
    a worker process restarted each time it dies: the crasher runs exactly twice and ends dead with
    TN2084; every healthy job ends done. The healthy jobs also have max_attempts=2, so each one may
    lose at most one attempt to the crasher: the first run claims everything at once and dies with
    it; after that each reclaimed job runs alone (on old main the crasher was reclaimed forever,
    with whatever was claimed beside it)."""
    store = tenure.connect(engine_url)
    healthy = [f"h{i}" for i in range(6)]
    # Claim order is run_at, created_at, id: the crasher sits between healthy jobs.
    store.jobs.enqueue_many(
        [{"kind": "healthy", "id": h, "max_attempts": 2} for h in healthy[:3]]
        + [{"kind": "crash", "id": "h3-crasher", "max_attempts": 2}]
        + [{"kind": "healthy", "id": h, "max_attempts": 2} for h in healthy[3:]]
    )
    ledger = tmp_path / "ledger.jsonl"
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = dict(os.environ, PYTHONPATH=str(Path(tenure.__file__).resolve().parents[1]))

    def spawn() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, str(script), engine_url, str(ledger)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def settled() -> bool:
        states = {j: store.jobs.get(j).state for j in [*healthy, "h3-crasher"]}
        return all(s in ("done", "dead", "cancelled") for s in states.values())

    proc, restarts = spawn(), 0
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline and not settled():
            if proc.poll() is not None:  # the crasher took the process down: a supervisor restarts it
                assert proc.returncode == 17
                proc, restarts = spawn(), restarts + 1
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    crasher = store.jobs.get("h3-crasher")
    runs = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [a for j, a in runs if j == "h3-crasher"] == [1, 2], runs
    assert (crasher.state, crasher.attempts) == ("dead", 2), crasher
    assert crasher.last_error.startswith(f"{WorkerLost.code}: worker lost on its final attempt (2 of 2)")
    assert {j: store.jobs.get(j).state for j in healthy} == dict.fromkeys(healthy, "done"), runs
    assert restarts == 2
    store.close()


def test_a_reclaimed_job_runs_alone_in_its_worker(any_store, clock):
    """While a job reclaimed from an expired lease runs, its worker claims nothing else, though it
    has free slots and due jobs wait; when it ends, the worker claims again."""
    jobs = any_store.jobs
    jobs.enqueue("k", id="suspect")
    lost = jobs.claim("k", owner="lost-worker", lease_ms=1000)
    clock.set(lost.lease.expires_at)  # its worker vanished
    due = [jobs.enqueue("k", id=f"due{i}") for i in range(3)]
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def handler(payload, ctx):
        ran.append(ctx.job.id)
        if ctx.job.id == "suspect":
            started.set()
            release.wait(10)

    worker = jobs.create_worker({"k": handler}, concurrency=4, poll_interval=0.01, maintenance=False).start()
    try:
        assert started.wait(10)
        time.sleep(0.3)  # a window in which a batch-claiming worker would have taken the due jobs
        assert worker.stats()["in_flight"] == 1 and ran == ["suspect"]
        assert [jobs.get(d).state for d in due] == ["pending"] * 3
        release.set()
        wait_for(lambda: all(jobs.get(d).state == "done" for d in [*due, "suspect"]), what="every job done")
    finally:
        release.set()
        worker.stop()
    assert jobs.get("suspect").attempts == 2
