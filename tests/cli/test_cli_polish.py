"""CLI polish: ids in tables are never folded, ``tenure maintain`` runs until a signal
without ``--once``, and ``migrate --check`` on a file that does not exist says migrations are
pending."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import time
import uuid

import pytest

import tenure
from tenure import cli


def test_rich_table_keeps_ids_whole_on_a_narrow_terminal():
    from rich.console import Console

    job_id = str(uuid.uuid4())
    buf = io.StringIO()
    cli.render_table(["id", "kind", "state", "last error"],
                     [(job_id, "img.resize", "failed", "boom " * 40)],
                     console=Console(file=buf, force_terminal=False, width=60))
    lines = buf.getvalue().splitlines()
    assert any(job_id in line for line in lines), "\n".join(lines)  # one line holds the whole id
    assert sum(job_id[:8] in line for line in lines) == 1
    assert any("boom" in line for line in lines[3:])  # the error column folds instead


def test_migrate_check_on_a_new_file_says_migrations_pending(cli, tmp_path):
    db = tmp_path / "new.db"
    res = cli("migrate", "--check", url=f"sqlite:///{db}", expect=1)
    assert "migrations pending" in res.err and "does not exist yet" in res.err and "TN0005" not in res.err
    as_json = cli("migrate", "--check", "--json", url=f"sqlite:///{db}", expect=1).json()
    assert as_json["current"] is False and as_json["version"] == 0
    assert not db.exists()  # the check created nothing
    cli("migrate", url=f"sqlite:///{db}")
    assert cli("migrate", "--check", "--json", url=f"sqlite:///{db}").json()["current"] is True


def test_maintain_without_once_runs_until_a_signal(cli, engine_url):
    store = tenure.connect(engine_url)
    try:
        job = store.jobs.enqueue("k", {}, delete_after=0)  # deleted by maintenance once settled
        claim = store.jobs.claim(["k"], owner="t")
        store.jobs.complete(claim.lease, None)
        proc = subprocess.Popen([cli.bin, "maintain", "--url", engine_url, "--interval", "0.1", "--json"],
                                cwd=cli.cwd, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while store.jobs.get(job) is not None:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "maintenance never deleted the settled job"
                time.sleep(0.05)
            assert proc.poll() is None  # still running: it does not stop after one pass
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        totals = json.loads(out)
        assert totals["passes"] >= 1 and totals["deleted"] >= 1
    finally:
        store.close()


@pytest.mark.parametrize("flag", ["--once"])
def test_maintain_once_still_prints_one_pass(cli, flag):
    data = cli("maintain", flag, "--json").json()
    assert "passes" not in data and "deleted" in data


def test_schedules_run_enqueues_the_job_now(cli, engine_url):
    cli("schedules", "add", "nightly", "0 3 * * *", "reports.build", "--payload", '{"to": "ops"}', "--queue", "reports")
    job_id = cli("schedules", "run", "nightly").out.strip()
    store = tenure.connect(engine_url)
    try:
        job = store.jobs.get(job_id)
        assert (job.kind, job.payload, job.queue, job.state) == ("reports.build", {"to": "ops"}, "reports", "pending")
        assert store.schedules.get("nightly").last_fire_at is None
    finally:
        store.close()
    missing = cli("schedules", "run", "nope", expect=1)
    assert "no schedule 'nope'" in missing.err
    assert cli("schedules", "run", "nope", "--json", expect=1).json()["job_id"] is None
