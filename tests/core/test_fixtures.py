"""The test fixtures keep their promises (tests/conftest.py, docs/architecture.md "Tests"): the
session's PostgreSQL database is private from the first import on and dropped with the databases
made beside it; ``empty_pg`` leaves a database as a fresh SQLite file would be; one ``engine_url``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import tenure
from tests import conftest
from tests.conftest import BASE_PG_URL, PG_URL, empty_pg, require_pg, sqlite_path

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import os, sys
import psycopg
import tests.conftest as c
print(c.PG_URL, flush=True)
name = c.PG_URL.rsplit("/", 1)[1]
with psycopg.connect(c.PG_URL, autocommit=True) as conn:
    conn.execute(f'CREATE DATABASE "{name}_beside"')
assert os.environ["TENURE_TEST_PG_URL"] == c.PG_URL
"""


def _databases(prefix: str) -> set[str]:
    import psycopg

    with psycopg.connect(BASE_PG_URL, autocommit=True, connect_timeout=10) as conn:
        return {r[0] for r in conn.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (prefix,))}


def test_importing_the_root_conftest_makes_a_private_database_and_exit_drops_it():
    """What a conftest importing ``PG_URL`` sees is already the private database (not the given
    one), the environment names it for subprocesses, and it is dropped, with a database made
    beside it, when the process ends."""
    require_pg()
    if PG_URL == BASE_PG_URL:
        pytest.skip("this role may not create databases: the run uses the given one")
    env = {k: v for k, v in os.environ.items() if k != "TENURE_TEST_SESSION_DB"}
    env.update(TENURE_TEST_PG_URL=BASE_PG_URL, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    url = proc.stdout.strip()
    name = urlsplit(url).path.lstrip("/")
    assert name.startswith("tenure_test_") and url != BASE_PG_URL
    assert _databases(name) == set()  # the database and the one beside it are gone


def test_a_subprocess_of_the_session_reuses_its_database():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", "import tests.conftest as c; print(c.PG_URL)"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == PG_URL == os.environ["TENURE_TEST_PG_URL"]


def test_empty_pg_empties_tenure_tables_keeps_the_migrations_and_drops_app_tables():
    import psycopg

    require_pg()
    store = tenure.connect(PG_URL)
    try:
        store.jobs.enqueue("k", {"n": 1}, queue="q")  # a job, and its queue in the registry
    finally:
        store.close()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute("CREATE TABLE app_orders (id integer PRIMARY KEY)")
        migrations = conn.execute("SELECT count(*) FROM tenure_migrations").fetchone()[0]
        for table in ("tenure_jobs", "tenure_queues"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] >= 1, table
        empty_pg()
        tables = {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
        assert "app_orders" not in tables
        tenure_tables = {t for t in tables if t.startswith("tenure_") and t != "tenure_migrations"}
        assert {"tenure_jobs", "tenure_queues"} <= tenure_tables
        for table in tenure_tables:
            assert conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] == 0, table
        assert conn.execute("SELECT count(*) FROM tenure_migrations").fetchone()[0] == migrations > 0


def test_empty_pg_survives_its_connection_being_terminated():
    import psycopg

    require_pg()
    empty_pg()
    kept = conftest._kept[PG_URL]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (kept.info.backend_pid,))
    empty_pg()
    assert conftest._kept[PG_URL] is not kept


def test_engine_url_is_a_fresh_sqlite_file_or_the_sessions_emptied_database(engine_url, tmp_path):
    if engine_url.startswith("sqlite"):
        assert engine_url == f"sqlite:///{sqlite_path(tmp_path)}"
        assert not sqlite_path(tmp_path).exists()
    else:
        assert engine_url == PG_URL
    store = tenure.connect(engine_url)
    try:
        assert store.jobs.counts()["pending"] == 0
        store.jobs.enqueue("k", None)  # left behind on purpose: the next test starts empty anyway
    finally:
        store.close()


def test_no_conftest_below_the_root_defines_engine_url_or_a_store_fixture():
    """One engine fixture: suites get stores from tests/conftest.py, never from an override."""
    import re

    pattern = re.compile(r"^def (engine_url|any_store|live_store|store|other|other_store|_pg_reset|cli_url|"
                         r"store_url|pg_url)\(", re.M)
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("conftest.py")
                 if p.parent != ROOT / "tests" and pattern.search(p.read_text(encoding="utf-8"))]
    assert offenders == ["tests/conformance/conftest.py"]  # its `store` is open_store(): see there
