"""docs/integrations.md's Django project runs as printed: its four files are written
out and ``manage.py test`` runs its tests, on SQLite and PostgreSQL, with Django 6 (the Python
3.12 venv) and Django 5.2 with the backport (where ``django.tasks`` is ``django_tasks``, as the
page says). Afterwards the DEVELOPMENT database holds none of the jobs the tests enqueued: they
landed in the test database only."""

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
from ..docs_snippets import DOCS

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## Django (`django.tasks`)"


def project_files() -> dict[str, str]:
    """The page's Django block, split at its ``# path/to/file.py`` lines."""
    text = (DOCS / "integrations.md").read_text(encoding="utf-8")
    section = text[text.index(HEADING):]
    block = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    files: dict[str, str] = {}
    current = None
    for line in block.splitlines(keepends=True):
        m = re.match(r"# ([\w/]+\.py)\n", line)
        if m:
            current = m.group(1)
            files[current] = ""
        elif current is not None:
            files[current] += line
    assert set(files) == {"mysite/settings.py", "shop/models.py", "shop/tasks.py", "shop/tests.py"}, files
    return files


def write_project(where: Path, django6: bool, engine: str) -> None:
    for name, body in project_files().items():
        path = where / name
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        if not django6:
            body = body.replace("from django.tasks import", "from django_tasks import")
        path.write_text(body, encoding="utf-8")
    if engine == "pg":  # the same settings on this suite's PostgreSQL server
        with open(where / "mysite" / "settings.py", "a", encoding="utf-8") as f:
            f.write(f'\nDATABASES = {{"default": {{"ENGINE": "django.db.backends.postgresql", '
                    f'"NAME": {PG_URL.rsplit("/", 1)[1]!r}, "USER": "postgres", "HOST": "127.0.0.1", '
                    f'"PORT": "5432"}}}}\n')
    if not django6:
        with open(where / "mysite" / "settings.py", "a", encoding="utf-8") as f:
            f.write('\nINSTALLED_APPS = ["django_tasks", *INSTALLED_APPS]\n')


def dev_jobs(where: Path, engine: str) -> int:
    if engine == "sqlite":
        db = where / "db.sqlite3"
        if not db.exists():
            return 0
        with sqlite3.connect(db) as c:
            if c.execute("SELECT 1 FROM sqlite_master WHERE name = 'tenure_jobs'").fetchone() is None:
                return 0
            return c.execute("SELECT count(*) FROM tenure_jobs WHERE kind LIKE 'shop.%'").fetchone()[0]
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as c:
        if c.execute("SELECT to_regclass('tenure_jobs')").fetchone()[0] is None:
            return 0
        return c.execute("SELECT count(*) FROM tenure_jobs WHERE kind LIKE 'shop.%'").fetchone()[0]


def run_docs_project(python: str, django6: bool, engine: str, where: Path) -> None:
    if engine == "pg":
        require_pg()
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "test_{PG_URL.rsplit("/", 1)[1]}"')
            if c.execute("SELECT to_regclass('tenure_jobs')").fetchone()[0] is not None:
                c.execute("DELETE FROM tenure_jobs WHERE kind LIKE 'shop.%'")
    write_project(where, django6, engine)
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}:{where}", DJANGO_SETTINGS_MODULE="mysite.settings")
    proc = subprocess.run([python, "-m", "django", "test", "shop", "-v", "2"], env=env, cwd=where,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert re.search(r"^Ran 3 tests", out, re.M) and re.search(r"^OK$", out, re.M), out[-3000:]
    assert "Destroying test database" in out, out[-2000:]
    assert dev_jobs(where, engine) == 0  # every enqueue of the run landed in the test database


@pytest.mark.timeout(600)
@pytest.mark.parametrize("engine", ["sqlite", "pg"])
def test_docs_django_project_on_django_5(tmp_path, engine):
    pytest.importorskip("django_tasks")
    run_docs_project(sys.executable, False, engine, tmp_path)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("engine", ["sqlite", "pg"])
def test_docs_django_project_on_django_6(django6_python, tmp_path, engine):
    run_docs_project(django6_python, True, engine, tmp_path)
