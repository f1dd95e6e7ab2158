"""Shutdown: ``tenure worker --grace SECONDS`` gives running jobs that long on SIGTERM
(default 30 s, where it was a fixed 5 s); a job still running then is released at once (pending,
its retries left unchanged) rather than left leased until its lease runs out; a second signal
stops at once and releases the in-flight jobs the same way. Real processes on both engines."""

from __future__ import annotations

import json
import signal
import subprocess
import textwrap
import time

import tenure

from ..worker._wk import wait_for

APP = textwrap.dedent("""
    import json, os, time

    import tenure

    app = tenure.App()

    @app.task(name="slow")
    def slow(seconds, ledger):
        # Ignores its cancellation: a job that needs its time, whatever the signal says.
        with open(ledger, "a") as f:
            f.write(json.dumps(["started", os.getpid()]) + "\\n")
        time.sleep(seconds)
        with open(ledger, "a") as f:
            f.write(json.dumps(["finished"]) + "\\n")
        return "finished"
""")


def _start(cli, engine_url, tmp_path, seconds: float, *args: str):
    (tmp_path / "graceapp.py").write_text(APP)
    ledger = tmp_path / "ledger.jsonl"
    store = tenure.connect(engine_url)
    job_id = store.jobs.enqueue("slow", {"args": [seconds, str(ledger)], "kwargs": {}}, max_attempts=3)
    proc = subprocess.Popen(
        [
            cli.bin,
            "worker",
            "graceapp:app",
            "--url",
            engine_url,
            "--log-format",
            "json",
            "--log-level",
            "INFO",
            *args,
        ],
        cwd=tmp_path,
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: ledger.exists() and ledger.read_text(), timeout=30, what="the job to start")
    return store, job_id, proc, ledger


def test_grace_is_honoured_then_the_job_is_released(cli, engine_url, tmp_path):
    """--grace 1 with a job that needs 60 s: the worker exits about 1 s after SIGTERM, and the job
    is pending again at once, not leased until its lease expires."""
    store, job_id, proc, ledger = _start(cli, engine_url, tmp_path, 60, "--grace", "1")
    try:
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
        assert proc.returncode == 0, err
        assert 0.9 <= took < 5.0, took
        job = store.jobs.get(job_id)
        assert (job.state, job.attempts, job.max_attempts, job.lease_owner) == ("pending", 1, 4, None)
        released = [json.loads(line) for line in err.splitlines() if '"released"' in line]
        assert released and released[0]["job_id"] == job_id and released[0]["level"] == "INFO"
    finally:
        if proc.poll() is None:
            proc.kill()
        store.close()


def test_the_default_grace_outlasts_the_old_five_seconds(cli, engine_url, tmp_path):
    """No --grace: a job that needs 6 s after the SIGTERM still finishes and is stored done."""
    store, job_id, proc, ledger = _start(cli, engine_url, tmp_path, 6)
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=40)
        assert proc.returncode == 0, err
        assert store.jobs.get(job_id).state == "done"
        assert ledger.read_text().count("finished") == 1
    finally:
        if proc.poll() is None:
            proc.kill()
        store.close()


def test_a_second_signal_stops_at_once_and_releases(cli, engine_url, tmp_path):
    store, job_id, proc, ledger = _start(cli, engine_url, tmp_path, 60)
    try:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)  # the first signal's graceful stop is under way
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert time.monotonic() - t0 < 4.0
        job = store.jobs.get(job_id)
        assert (job.state, job.max_attempts) == ("pending", 4), err
    finally:
        if proc.poll() is None:
            proc.kill()
        store.close()
