"""PostgreSQL faults: the server restarted (fast and immediate shutdown) under a running load, and
connection-pool exhaustion. Workers reconnect by themselves; no job is lost or settled
twice; an exhausted pool is a bounded wait and a coded error, never a hang.

The restarts happen on a private cluster this module starts for itself (:mod:`.pg_cluster`: initdb
into a temporary directory, a free port), stopped and removed when the module ends, also on
failure: the shared test server that other runs use is never stopped. The pool test needs no
server of its own and runs on the session's database."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import tenure
from tenure.errors import StoreUnavailable

from ..conftest import PG_URL, empty_pg, pg_available, require_pg
from . import pg_cluster

WORKER = textwrap.dedent('''
    import sys, time, tenure
    store = tenure.connect(sys.argv[1])
    def work(payload, ctx):
        time.sleep(0.002)
        return {"attempt": ctx.attempt}
    w = store.jobs.create_worker({"pgfault": work}, concurrency=8, lease=2, poll_interval=0.1,
                                 maintenance=False)
    w.start()
    while True:
        time.sleep(1)
''')


@pytest.fixture(scope="module")
def cluster():
    """A private PostgreSQL cluster for this module, removed at the end (also on failure)."""
    reason = pg_cluster.unavailable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the server-restart tests: {reason}")
        pytest.skip(f"SKIPPING SERVER RESTARTS: {reason}")
    made = pg_cluster.PrivateCluster()
    try:
        yield made.start()
    finally:
        made.remove()


def _shared_server_started_at() -> object:
    """When the shared test server started (None without one): the restarts must not move it."""
    if pg_available() is not None:
        return None
    import psycopg

    with psycopg.connect(PG_URL, connect_timeout=10) as conn:
        return conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_worker_survives_postgres_restart(cluster, mode, tmp_path):
    shared = _shared_server_started_at()
    empty_pg(cluster.url)
    store = tenure.connect(cluster.url)
    n = 1500
    ids = store.jobs.enqueue_many([{"kind": "pgfault", "payload": {"n": i}} for i in range(n)])
    script = tmp_path / "w.py"
    script.write_text(WORKER)
    env = dict(os.environ, PYTHONPATH=str(Path(tenure.__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, str(script), cluster.url], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while store.jobs.counts()["done"] < n // 5:
            assert time.monotonic() < deadline, "the worker never got going"
            time.sleep(0.05)
        before = cluster.started_at()
        cluster.restart(mode)
        assert cluster.started_at() > before  # the server under the worker really went away
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
    assert _shared_server_started_at() == shared  # the shared server was never restarted


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
