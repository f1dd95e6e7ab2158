"""Zombie slots under the real ``tenure worker``, both engines: a worker whose
slots are held by handlers that ignored their timeout exits with status 75 (TN2090) instead of
serving on, wedged, with a live process and heartbeat; under the supervisor the child is replaced
and the fresh one works the queue."""

from __future__ import annotations

import signal
import subprocess
import textwrap
import time

import tenure

APP = textwrap.dedent("""
    import time

    import tenure

    app = tenure.App()

    @app.task(name="zapp.hang")
    def hang():
        time.sleep(3600)  # ignores its timeout and every cancellation

    @app.task(name="zapp.ok")
    def ok(n):
        return n
""")

HANG = {"kind": "zapp.hang", "payload": {"args": [], "kwargs": {}}, "timeout": 0.1}


def _enqueue(url: str, *jobs: dict) -> list[str]:
    store = tenure.connect(url)
    try:
        return store.jobs.enqueue_many(list(jobs))
    finally:
        store.close()


def _job(url: str, job_id: str):
    store = tenure.connect(url)
    try:
        return store.jobs.get(job_id)
    finally:
        store.close()


def test_an_unhealthy_worker_exits_75(cli, engine_url, tmp_path):
    """One slot, one job that hangs past its timeout: the worker stops and exits 75 with TN2090,
    within seconds (its zombie grace is --stop-grace)."""
    (tmp_path / "zapp.py").write_text(APP)
    (bad,) = _enqueue(engine_url, {**HANG, "max_attempts": 1})
    t0 = time.monotonic()
    res = cli("worker", "zapp:app", "--concurrency", "1", "--stop-grace", "0.2", expect=None, timeout=60)
    assert res.code == 75, res
    assert "TN2090" in res.err and "Traceback" not in res.err
    assert time.monotonic() - t0 < 30
    job = _job(engine_url, bad)
    assert (job.state, job.last_error) == ("dead", "job timed out")


def test_the_supervisor_replaces_an_unhealthy_child(cli, engine_url, tmp_path):
    """``--processes 1 --max-jobs-per-process`` runs one child under the supervisor: each attempt
    of the hanging job makes the child unhealthy; it exits 75 and a fresh child takes its place, so
    jobs enqueued afterwards are still worked. SIGTERM then stops everything with status 0."""
    (tmp_path / "zapp.py").write_text(APP)
    (bad,) = _enqueue(engine_url, {**HANG, "max_attempts": 2})
    proc = subprocess.Popen(
        [
            cli.bin,
            "worker",
            "zapp:app",
            "--url",
            engine_url,
            "--processes",
            "1",
            "--max-jobs-per-process",
            "1000",
            "--concurrency",
            "1",
            "--stop-grace",
            "0.2",
        ],
        cwd=tmp_path,
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while _job(engine_url, bad).state != "dead":
            assert time.monotonic() < deadline, "the hanging job never died"
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        ids = _enqueue(
            engine_url, *[{"kind": "zapp.ok", "payload": {"args": [i], "kwargs": {}}} for i in range(3)]
        )
        while not all(_job(engine_url, i).state == "done" for i in ids):
            assert time.monotonic() < deadline, "no replacement child worked the healthy jobs"
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert err.count("exited with status 75 (unhealthy: zombie slots)") == 2, err
    assert "TN2090" in err
    assert [_job(engine_url, i).result for i in ids] == [0, 1, 2]
