"""Django's own task-backend tests, run against TenureBackend with a real worker.

tests/integrations/django_upstream/ vendors Django 6.0's ``tests/tasks`` and django-tasks 0.12's
backport suite (README.md there: what was vendored, the one-line adaptations, and the tests a
durable worker legitimately answers differently, each replaced by a test of what tenure does).
They run under Django's own test runner (``python -m django test``, as ``manage.py test`` does),
on Django 6 (the Python 3.12 venv) and on Django 5.2 with the backport (this interpreter), on
SQLite and on PostgreSQL; with them run tenure's own Django tests (``tenure_semantics.py``,
``durable_differences.py``). Each run also proves the test-database rule: afterwards the
development database holds none of the jobs the run enqueued."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("django")

from ..conftest import PG_URL, require_pg

ROOT = Path(__file__).resolve().parents[2]
PKG = "tests.integrations.django_upstream"
#: The upstream tests each suite skips as a documented difference (README.md), plus tenure's own
#: skips (the backport's view test has no Django 6 counterpart).
EXPECTED_SKIPS = {"django6": 5 + 1, "backport": 5}
MIN_RAN = {"django6": 60, "backport": 65}


def _dev_jobs(engine: str, sqlite_path: Path) -> int:
    """Jobs of these suites' tasks in the DEVELOPMENT database (the one Django's runner swaps out)."""
    if engine == "sqlite":
        if not sqlite_path.exists():
            return 0
        with sqlite3.connect(sqlite_path) as c:
            if c.execute("SELECT 1 FROM sqlite_master WHERE name = 'tenure_jobs'").fetchone() is None:
                return 0
            return c.execute("SELECT count(*) FROM tenure_jobs WHERE kind LIKE ?", (f"{PKG}.%",)).fetchone()[0]
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as c:
        if c.execute("SELECT to_regclass('tenure_jobs')").fetchone()[0] is None:
            return 0
        return c.execute("SELECT count(*) FROM tenure_jobs WHERE kind LIKE %s", (f"{PKG}.%",)).fetchone()[0]


def run_suite(python: str, suite: str, engine: str, tmp_path: Path) -> str:
    """Run one vendored suite with tenure's Django tests under Django's runner; its output."""
    dev_sqlite = tmp_path / "dev.sqlite3"
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}:{ROOT}", TENURE_UP_SUITE=suite, TENURE_UP_ENGINE=engine,
               TENURE_UP_SQLITE=str(dev_sqlite), DJANGO_SETTINGS_MODULE=f"{PKG}.settings")
    if engine == "pg":
        require_pg()
        env["TENURE_UP_PG_NAME"] = PG_URL.rsplit("/", 1)[1]
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as c:  # a test database left by a killed run
            c.execute(f'DROP DATABASE IF EXISTS "test_{env["TENURE_UP_PG_NAME"]}"')
            if c.execute("SELECT to_regclass('tenure_jobs')").fetchone()[0] is not None:
                c.execute("DELETE FROM tenure_jobs WHERE kind LIKE %s", (f"{PKG}.%",))  # the suite's scratch DB
    before = _dev_jobs(engine, dev_sqlite)
    proc = subprocess.run([python, "-m", "django", "test", "--noinput", "-v", "2", f"{PKG}.{suite}",
                           f"{PKG}.durable_differences", f"{PKG}.tenure_semantics"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    ran = int(re.search(r"^Ran (\d+) tests?", out, re.M).group(1))
    skipped = re.search(r"^OK(?: \(skipped=(\d+)\))?$", out, re.M)
    assert skipped is not None, out[-3000:]
    assert int(skipped.group(1) or 0) == EXPECTED_SKIPS[suite], out[-3000:]
    assert ran >= MIN_RAN[suite], ran
    assert "Destroying test database" in out, out[-2000:]  # the drop was not refused
    assert _dev_jobs(engine, dev_sqlite) == before == 0  # nothing reached the development database
    return out


@pytest.mark.timeout(900)
@pytest.mark.parametrize("engine", ["sqlite", "pg"])
def test_backport_suite_on_django_5(tmp_path, engine):
    """django-tasks 0.12's suite on this interpreter's Django (5.2 on Python 3.11)."""
    pytest.importorskip("django_tasks")
    run_suite(sys.executable, "backport", engine, tmp_path)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("engine", ["sqlite", "pg"])
def test_django6_suite(django6_python, tmp_path, engine):
    """Django 6.0's tests/tasks on Django 6 (the Python 3.12 venv)."""
    run_suite(django6_python, "django6", engine, tmp_path)
