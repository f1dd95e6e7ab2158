"""PostgreSQL faults: the server restarted (fast and immediate shutdown) under a running load, and
connection-pool exhaustion. Workers reconnect by themselves; no job is lost or settled
twice; an exhausted pool is a bounded wait and a coded error, never a hang."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import tenure
from tenure.errors import StoreUnavailable

from ..conftest import PG_URL, require_pg

WORKER = textwrap.dedent('''
    import sys, time, tenure
    store = tenure.connect(sys.argv[1])
    def work(payload, ctx):
        time.sleep(0.002)
        return {"attempt": ctx.attempt}
    w = store.jobs.create_worker({"pgfault": work}, concurrency=8, lease_ms=2000, poll_interval=0.1,
                                 maintenance=False)
    w.start()
    while True:
        time.sleep(1)
''')


def _cluster() -> str | None:
    if not shutil.which("pg_ctlcluster") or not os.path.isdir("/etc/postgresql"):
        return None
    versions = sorted(os.listdir("/etc/postgresql"))
    return versions[0] if versions else None


def _restart(mode: str) -> None:
    version = _cluster()
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart", "-m", mode],
                   check=True, capture_output=True, timeout=60)
    for _ in range(60):
        if subprocess.run(["pg_isready", "-h", "127.0.0.1", "-p", "5432", "-q"]).returncode == 0:
            return
        time.sleep(0.5)
    raise AssertionError("PostgreSQL did not come back")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_worker_survives_postgres_restart(mode, tmp_path):
    require_pg()
    if _cluster() is None or os.geteuid() != 0:
        pytest.skip("needs the local PostgreSQL cluster and root to restart it")
    store = tenure.connect(PG_URL)
    store._reset_for_tests()
    n = 1500
    ids = store.jobs.enqueue_many([{"kind": "pgfault", "payload": {"n": i}} for i in range(n)])
    script = tmp_path / "w.py"
    script.write_text(WORKER)
    env = dict(os.environ, PYTHONPATH=str(Path(tenure.__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, str(script), PG_URL], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while store.jobs.counts()["done"] < n // 5:
            assert time.monotonic() < deadline, "the worker never got going"
            time.sleep(0.05)
        _restart(mode)
        deadline = time.monotonic() + 120
        while True:
            try:
                counts = store.jobs.counts()
            except StoreUnavailable:
                counts = None
            if counts and counts["done"] == n:
                break
            assert proc.poll() is None, proc.stderr.read()[-2000:]
            assert time.monotonic() < deadline, counts
            time.sleep(0.2)
    finally:
        proc.kill()
        proc.wait()
    assert store.jobs.counts()["leased"] == 0
    for job_id in ids[:: max(1, n // 100)]:
        job = store.jobs.get(job_id)
        assert job.state == "done" and job.result["attempt"] == job.attempts
    store.close()


def test_pool_exhaustion_is_a_bounded_wait_and_a_coded_error():
    require_pg()
    store = tenure.connect(PG_URL + ("&" if "?" in PG_URL else "?") + "pool_max=2&pool_timeout=0.5")
    store.jobs  # noqa: B018
    release = threading.Event()
    entered = threading.Barrier(3)

    def hold():
        with store.transaction() as tx:
            tx.execute("SELECT 1")
            entered.wait(5)
            release.wait(10)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for t in holders:
        t.start()
    entered.wait(5)
    t0 = time.monotonic()
    with pytest.raises(StoreUnavailable) as info:
        store.jobs.enqueue("k", None)
    waited = time.monotonic() - t0
    release.set()
    for t in holders:
        t.join()
    assert info.value.code == "TN0005" and 0.3 < waited < 5
    assert store.jobs.enqueue("k", None)  # the pool recovers
    store.close()
