"""What a user coming from Celery, RQ or Oban types first, answered by the real console script
with tenure's word for it instead of a dead end (each test fails without its fix)."""

from __future__ import annotations

import pytest


def _one_line(res) -> str:
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.err, res.err
    return lines[0]


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("argv", "meant"), [
    (["jobs", "retry", "some-id"], "requeue"),     # Oban's retry_job, Sidekiq's "Retry now"
    (["jobs", "get", "some-id"], "show"),
    (["schedules", "delete", "nightly"], "remove"),
    (["status"], "stats"),
    (["work"], "worker"),
    (["queue", "list"], "queues"),                 # a close spelling
])
def test_an_unknown_command_names_tenures_word_for_it(cli, argv, meant):
    line = _one_line(cli(*argv, url=None, expect=2))
    assert f"(did you mean {meant!r}?)" in line, line
    assert "--help" in line, line


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_an_unknown_command_with_no_near_word_stays_plain(cli):
    line = _one_line(cli("jobs", "frobnicate", url=None, expect=2))
    assert "No such command 'frobnicate'." in line and "did you mean" not in line, line


def test_queues_delete_refuses_live_jobs_then_force_deletes_them(cli):
    """store.queues.delete had no command: a queue made by a typo could not be removed from the shell."""
    for n in range(2):
        cli("enqueue", "img.resize", "--payload", f'{{"image": {n}}}', "--queue", "imgs")
    line = _one_line(cli("queues", "delete", "imgs", expect=1))
    assert "[TN3002] queue 'imgs' still has 2 live job(s)" in line and "--force" in line, line
    res = cli("queues", "delete", "imgs", "--force", stdin="n\n", expect=1)
    assert "nothing changed" in res.out
    assert "imgs" in [q["name"] for q in cli("queues", "list", "--json").json()]
    assert cli("queues", "delete", "imgs", "--force", "--yes", "--json").json() == {"queue": "imgs", "deleted_jobs": 2}
    assert "imgs" not in [q["name"] for q in cli("queues", "list", "--json").json()]
    assert "[TN3001] no queue named 'imgs'" in _one_line(cli("queues", "delete", "imgs", expect=1))


TASKS = '''
import tenure

app = tenure.App("sqlite:///jobs.db")


@app.task
def send_email(to: str) -> dict:
    return {"sent": to}
'''

SCRIPT = '''
import pathlib

import tenure

pathlib.Path("ran").write_text("imported")
app = tenure.App("sqlite:///jobs.db")
'''


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("spec", "meant"), [
    ("mytasks", "mytasks:app"),          # celery -A proj worker finds the app by itself
    ("mytasks.py", "mytasks:app"),
    ("proj/tasks.py", "proj.tasks:app"),
])
def test_an_app_spec_without_attribute_names_the_app_it_holds(cli, spec, meant):
    (cli.cwd / "mytasks.py").write_text(TASKS)
    (cli.cwd / "proj").mkdir()
    (cli.cwd / "proj" / "__init__.py").write_text("")
    (cli.cwd / "proj" / "tasks.py").write_text(TASKS)
    line = _one_line(cli("worker", spec, expect=2))
    assert f"expected module:attribute (e.g. myproject.tasks:app), got {spec!r}: did you mean {meant!r}?" in line


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_the_hint_reads_the_module_and_never_runs_it(cli):
    (cli.cwd / "script.py").write_text(SCRIPT)
    line = _one_line(cli("worker", "script", expect=2))
    assert "did you mean 'script:app'?" in line, line
    assert not (cli.cwd / "ran").exists()


def test_runs_show_of_a_plain_job_says_it_has_no_workflow_nodes(cli):
    """It printed 'version 1 ... identity ... legacy False' as if a flow run were there, empty."""
    job_id = cli("enqueue", "email.send", "--payload", '{"to": "a@example.com"}').out.strip()
    out = cli("runs", "show", job_id).out
    assert f"no workflow nodes recorded for {job_id}: a plain job (not a flow run)" in out, out
    assert cli("runs", "show", job_id, "--json").json()["nodes"] == []   # scripts see the same data as before


def test_requeue_says_how_many_runs_a_requeued_job_has_left(cli):
    """Attempts are kept (spec 10.14): a dead job requeued runs once more, then shows 'attempt 4 of
    3'; the answer said only 'requeued ID'."""
    job_id = cli("enqueue", "email.send", "--payload", "{}", "--max-attempts", "3").out.strip()
    cli("jobs", "cancel", job_id)
    out = cli("jobs", "requeue", job_id).out
    assert out.strip() == (f"requeued {job_id}: pending now; 0 attempt(s) so far, max_attempts 3: "
                           "3 more run(s) before it is dead (attempts are kept)"), out
    assert cli("jobs", "requeue", job_id, "--json").json() == {"id": job_id, "requeued": False}


def test_schedules_add_of_an_existing_name_says_it_replaced_it(cli):
    """The name is a schedule's identity: a second `add nightly` for another job replaced the first
    one silently ('schedule nightly added' both times)."""
    assert cli("schedules", "add", "nightly", "0 3 * * *", "reports.build").out.strip() == \
        "schedule nightly added (0 3 * * * UTC -> reports.build)"
    assert cli("schedules", "add", "nightly", "0 3 * * *", "reports.build").out.strip() == \
        "schedule nightly unchanged (0 3 * * * UTC -> reports.build)"
    out = cli("schedules", "add", "nightly", "0 4 * * *", "billing.run", "--payload", '{"day": 1}').out.strip()
    assert out == ("schedule nightly replaced: now 0 4 * * * UTC -> billing.run "
                   "(was 0 3 * * * UTC -> reports.build, another payload)"), out
    assert [s["kind"] for s in cli("schedules", "list", "--json").json()] == ["billing.run"]


def test_worker_max_jobs_settles_that_many_then_exits(cli, engine_url):
    """`tenure worker APP --max-jobs N` (App.run_worker's max_jobs): it was refused with 'did you
    mean --max-jobs-per-process?', which recycles processes and never stops."""
    (cli.cwd / "mytasks.py").write_text(TASKS.replace('"sqlite:///jobs.db"', repr(engine_url)))
    for n in range(3):
        cli("enqueue", "mytasks.send_email", "--payload", f'{{"to": "u{n}@example.com"}}')
    cli("worker", "mytasks:app", "--max-jobs", "2", timeout=60)
    counts = cli("stats", "--json").json()["counts"]
    assert (counts["done"], counts["pending"]) == (2, 1), counts



@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("peer", "ours"), [("retryable", "failed"), ("completed", "done"), ("queued", "pending"),
                                            ("discarded", "dead"), ("started", "leased")])
def test_another_queues_state_name_suggests_tenures(cli, peer, ours):
    """Oban's 'retryable', RQ's 'queued', Celery's 'started' were refused with the list of states
    only; the list is kept, with tenure's name for the one meant first."""
    line = _one_line(cli("jobs", "list", "--state", peer, expect=2))
    assert f"'{peer}' is not a tenure job state (did you mean '{ours}'?); the states are pending, leased" in line
    line = _one_line(cli("jobs", "requeue", "--state", peer, expect=2))
    assert f"(did you mean '{ours}'?)" in line


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_worker_max_jobs_with_processes_is_a_cli_usage_error(cli):
    """It was refused in the supervisor's Python spelling ('max_jobs_per_process=, not max_jobs=')."""
    (cli.cwd / "mytasks.py").write_text(TASKS)
    line = _one_line(cli("worker", "mytasks:app", "--max-jobs", "2", "--processes", "2", expect=2))
    assert "--max-jobs stops a one-process worker; under --processes or --max-jobs-per-process" in line, line


def test_ctrl_c_ends_stats_watch_quietly(cli):
    """Ctrl-C is how a watch ends (as with watch(1) or top): it printed 'tenure: aborted' and
    exited 130, as if something had gone wrong."""
    import signal
    import subprocess

    proc = subprocess.Popen([cli.bin, "stats", "--watch", "--interval", "0.1", "--url", cli.url], cwd=cli.cwd,
                            env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("store ")  # the first refresh is out
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, (proc.returncode, err)
    assert "aborted" not in err and "Traceback" not in err, err
