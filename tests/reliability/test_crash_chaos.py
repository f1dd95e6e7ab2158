"""Chaos: worker processes killed with SIGKILL at random points (before a claim commits, mid-
handler, between the handler's return and the completion's commit, mid-renewal), restarted, over
and over. In the end every job is done exactly once in the store, none is stuck, and the handlers'
side-effect ledger shows at-least-once execution (spec 3.16, 3.17, 5.1)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import tenure

WORKER = textwrap.dedent('''
    import json, os, random, sys, time
    import tenure
    url, ledger = sys.argv[1], sys.argv[2]
    store = tenure.connect(url)
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    def work(payload, ctx):
        os.write(fd, (json.dumps([ctx.job.id, ctx.attempt]) + "\\n").encode())
        time.sleep(random.random() * 0.004)
        return {"attempt": ctx.attempt, "n": payload["n"]}
    w = store.jobs.create_worker({"chaos": work}, concurrency=4, lease=0.4, poll_interval=0.05,
                                 maintenance=False)
    w.start()
    print("ready", flush=True)
    while True:
        time.sleep(1)
''')


@pytest.mark.timeout(180)
def test_random_sigkills_never_lose_or_double_settle(engine_url, tmp_path):
    n_jobs = 2000  # 4 worker processes x 2 000 jobs with random kill -9
    store = tenure.connect(engine_url)
    ids = store.jobs.enqueue_many([{"kind": "chaos", "payload": {"n": i}} for i in range(n_jobs)])
    ledger = tmp_path / "ledger.jsonl"
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = dict(os.environ, PYTHONPATH=str(Path(tenure.__file__).resolve().parents[1]))
    rng = random.Random(20261130)

    def spawn() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(script), engine_url, str(ledger)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    procs = [spawn() for _ in range(4)]
    kills = 0
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.05, 0.4))
            counts = store.jobs.counts()
            if counts["done"] == n_jobs:
                break
            if kills < 25:
                victim = rng.randrange(len(procs))
                procs[victim].send_signal(signal.SIGKILL)
                procs[victim].wait()
                procs[victim] = spawn()
                kills += 1
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait()
    counts = store.jobs.counts()
    assert counts["done"] == n_jobs, counts
    assert counts["leased"] == counts["pending"] == counts["failed"] == counts["dead"] == 0
    executions: dict[str, set[int]] = {}
    for line in ledger.read_text().splitlines():
        job_id, attempt = json.loads(line)
        executions.setdefault(job_id, set()).add(attempt)
    for job_id in ids:
        job = store.jobs.get(job_id)
        # the one settlement that landed is the last attempt's, and that attempt really ran
        assert job.result["attempt"] == job.attempts, job
        assert job.attempts in executions[job_id]
    assert kills >= 3  # the test really killed workers mid-flight
    reexecuted = sum(1 for s in executions.values() if len(s) > 1)
    store.close()
    print(f"kills={kills} re-executed jobs={reexecuted}")
