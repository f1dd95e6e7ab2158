"""``tenure worker APP --metrics-port`` as a real process on both engines: it works the jobs, serves
Prometheus metrics (worker counters, the duration histogram, queue depth) and stops cleanly on
SIGTERM."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import textwrap
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import tenure

APP = textwrap.dedent("""
    import tenure

    app = tenure.App()

    @app.task(name="cli.double")
    def double(n):
        return n * 2

    @app.task(name="cli.boom", max_attempts=1)
    def boom():
        raise RuntimeError("always")
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int) -> dict:
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    except httpx.HTTPError:
        return {}
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_worker_serves_metrics_and_stops_on_sigterm(cli, engine_url, tmp_path):
    (tmp_path / "opsapp.py").write_text(APP)
    store = tenure.connect(engine_url)
    try:
        store.jobs.enqueue_many([{"kind": "cli.double", "payload": {"args": [i], "kwargs": {}}} for i in range(6)]
                                + [{"kind": "cli.boom", "payload": {"args": [], "kwargs": {}}, "max_attempts": 1}])
    finally:
        store.close()
    port = _free_port()
    proc = subprocess.Popen([cli.bin, "worker", "opsapp:app", "--url", engine_url, "--concurrency", "2",
                             "--metrics-port", str(port)], cwd=tmp_path, env=cli.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 45
        s: dict = {}
        while time.monotonic() < deadline:
            s = _scrape(port)
            if s.get(("tenure_worker_completions_total", ())) == 6 and \
                    s.get(("tenure_worker_failures_total", ())) == 1:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        assert s.get(("tenure_worker_completions_total", ())) == 6, s
        count = "tenure_job_duration_seconds_count"
        assert s[(count, (("kind", "cli.double"), ("outcome", "ok")))] == 6
        assert s[(count, (("kind", "cli.boom"), ("outcome", "error")))] == 1
        assert s[("tenure_worker_claims_total", ())] == 7
        # The store gauges are cached briefly; they converge to the settled counts.
        deadline = time.monotonic() + 10
        # Wait for both gauges: the dead job may settle in a later batch than the done ones.
        while (s.get(("tenure_jobs", (("queue", "default"), ("state", "done")))),
               s.get(("tenure_jobs", (("queue", "default"), ("state", "dead"))))) != (6, 1):
            assert time.monotonic() < deadline, s
            time.sleep(0.2)
            s = _scrape(port)
        assert s[("tenure_jobs", (("queue", "default"), ("state", "dead")))] == 1
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        # The only tracebacks are the failed job's, logged by tenure.jobs: the worker
        # itself never crashed.
        records = re.split(r"\n(?=\d{4}-\d\d-\d\d )", err)
        assert all(re.search(r" tenure\.jobs:? ", r) for r in records if "Traceback" in r), err
        assert any("cli.boom" in r and "Traceback" in r for r in records), err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    store = tenure.connect(engine_url)
    try:
        assert store.jobs.counts()["done"] == 6
        done = store.jobs.page(state="done", limit=10).items
        assert sorted(j.result for j in done) == [0, 2, 4, 6, 8, 10]
    finally:
        store.close()


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_worker_rejects_a_bad_app_in_one_line(cli):
    res = cli("worker", "no_such_module:app", expect=2)
    assert "cannot import 'no_such_module'" in res.err and len(res.err.strip().splitlines()) == 1
    res = cli("worker", "justamodule", expect=2)
    assert "module:attribute" in res.err


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_worker_processes_under_the_supervisor(cli, engine_url, tmp_path):
    """``--processes 2``: children work the jobs; the parent's --metrics-port serves the store's
    gauges (the children's counters are theirs); SIGTERM stops everything with status 0."""
    (tmp_path / "opsapp.py").write_text(APP)
    store = tenure.connect(engine_url)
    try:
        store.jobs.enqueue_many([{"kind": "cli.double", "payload": {"args": [i], "kwargs": {}}} for i in range(8)])
    finally:
        store.close()
    port = _free_port()
    proc = subprocess.Popen([cli.bin, "worker", "opsapp:app", "--url", engine_url, "--processes", "2",
                             "--concurrency", "2", "--metrics-port", str(port)], cwd=tmp_path, env=cli.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        s: dict = {}
        while s.get(("tenure_jobs", (("queue", "default"), ("state", "done")))) != 8:
            assert time.monotonic() < deadline, s
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
            s = _scrape(port)
        assert ("tenure_worker_completions_total", ()) not in s or s[("tenure_worker_completions_total", ())] == 0
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


LEASE_APP = textwrap.dedent("""
    import tenure

    app = tenure.App()

    @app.task(name="cli.lease")
    def lease(ctx):
        return ctx.job.lease_until - ctx.job.updated_at  # the claim stamps both from one clock reading
""")


@pytest.mark.parametrize("processes", [1, 2])
def test_worker_lease_option_sets_the_lease_of_every_claim(cli, engine_url, tmp_path, processes):
    """``tenure worker --lease 7s``: the kill -9 recovery time is the operator's choice,
    in one process and under the supervisor; a lease that is not a duration is refused in one line."""
    (tmp_path / "leaseapp.py").write_text(LEASE_APP)
    store = tenure.connect(engine_url)
    try:
        store.jobs.enqueue_many([{"kind": "cli.lease", "payload": {"args": [], "kwargs": {}}} for _ in range(4)])
        proc = subprocess.Popen([cli.bin, "worker", "leaseapp:app", "--url", engine_url, "--lease", "7s",
                                 "--processes", str(processes)], cwd=tmp_path, env=cli.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while store.jobs.counts()["done"] < 4:
                assert time.monotonic() < deadline, "the jobs were not done"
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.1)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert [j.result for j in store.jobs.page(state="done").items] == [7000] * 4
    finally:
        store.close()
    res = cli("worker", "leaseapp:app", "--lease", "soon", expect=2)
    assert "--lease" in res.err and "'soon' is not a duration" in res.err


@pytest.mark.parametrize("flag,value,says", [("--lease", "0", "lease must be more than 0"),
                                             ("--stop-grace", "-1s", "not a duration"),
                                             ("--grace", "later", "not a duration"),
                                             ("--concurrency", "0", "concurrency must be a positive integer"),
                                             ("--zombie-share", "2", "zombie_share must be a number in (0, 1]"),
                                             ("--poll-interval", "nan", "not a duration")])
def test_worker_flags_are_checked_by_the_worker_s_own_table(cli, flag, value, says):
    """Each flag of ``tenure worker`` is read by the same table as ``WorkerConfig``: a bad value is
    a usage error (exit 2) naming the flag, before the app is even loaded."""
    res = cli("worker", "no_such_module_xyz:app", flag, value, expect=2)
    assert flag in res.err and says in res.err, res.err


def test_worker_flags_are_the_worker_options_that_have_a_text_form(cli):
    """``tenure worker --help`` lists one flag per worker option with a text form (derived from
    ``WorkerConfig``), each with a help line."""
    from tenure.worker.config import text_options

    out = cli("worker", "--help").out
    for name in text_options():  # max_jobs too: --max-jobs-per-process recycles, --max-jobs stops
        assert f"--{name.replace('_', '-')}" in out, name
