"""The mistakes a new user makes first, each answered by the real console script in one line that
says what to fix, never a traceback: a store that cannot be opened (a SQLite file whose directory
is missing; a PostgreSQL database that does not exist), an APP that names a task or a module whose
own import fails, an App without tasks, a typo'd URL scheme."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import pytest

TASKS = '''
import tenure

app = tenure.App("sqlite:///jobs.db")


@app.task
def send_email(to: str) -> dict:
    return {"sent": to}
'''


def _one_line(res) -> str:
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.err, res.err
    return lines[0]


def _unopenable(engine_url: str, tmp_path) -> tuple[str, str]:
    """A URL on the engine that cannot be opened, and what its error must name."""
    if engine_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path}/no/such/dir/jobs.db", f"its directory '{tmp_path}/no/such/dir' does not exist"
    parts = urlsplit(engine_url)
    return urlunsplit(parts._replace(path="/tenure_no_such_database")), 'database "tenure_no_such_database"'


def test_a_store_that_cannot_be_opened_is_one_coded_line(cli, engine_url, tmp_path):
    url, names = _unopenable(engine_url, tmp_path)
    line = _one_line(cli("stats", url=url, expect=1))
    assert line.startswith("tenure: [TN0005] ") and names in line, line


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_a_typod_url_scheme_is_one_coded_line(cli):
    line = _one_line(cli("stats", url="postgress://app@db/app", expect=2))
    assert "[TN0007] unknown store URL scheme 'postgress'" in line


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_an_app_spec_naming_a_task_says_to_name_the_app(cli):
    (cli.cwd / "mytasks.py").write_text(TASKS)
    line = _one_line(cli("worker", "mytasks:send_email", expect=2))
    assert "'mytasks:send_email' is a Task, not a tenure.App" in line and "mytasks:app" in line, line
    line = _one_line(cli("enqueue", "mytasks.send_email", "--payload", '{"to": "a"}', "--app", "mytasks:send_email",
                         expect=2))
    assert "is a Task, not a tenure.App" in line, line


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_an_app_module_whose_own_import_fails_is_told_apart_from_a_missing_module(cli):
    (cli.cwd / "brokentasks.py").write_text("import tenure\nimport no_such_dependency_xyz\napp = tenure.App()\n")
    line = _one_line(cli("worker", "brokentasks:app", expect=2))
    assert "importing 'brokentasks' failed: No module named 'no_such_dependency_xyz'" in line, line
    line = _one_line(cli("worker", "no_such_module_xyz:app", expect=2))
    assert "cannot import 'no_such_module_xyz'" in line, line


def test_an_app_without_tasks_says_how_to_give_it_some(cli):
    (cli.cwd / "emptyapp.py").write_text("import tenure\napp = tenure.App()\n")
    line = _one_line(cli("worker", "emptyapp:app", expect=2))
    assert "[TN1001] this app has no tasks to run: declare one with @app.task" in line, line
    assert "--include" in line
