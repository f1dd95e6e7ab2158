"""The Django backend connects with Django's OWN connection parameters: a Unix-socket
host, ``OPTIONS`` (``sslmode``, ``options``) and a password holding ``/ @ : % ?`` reach libpq
unchanged, and no surface shows the password (the store's repr, a coded error).

Each case runs in a fresh interpreter (Django's settings are configured once per process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("django")
pytest.importorskip("psycopg")

from ..conftest import PG_URL, require_pg
from ..core.test_redaction_surfaces import PW

ROOT = Path(__file__).resolve().parents[2]
SOCKET_DIR = "/var/run/postgresql"

SCRIPT = textwrap.dedent('''
    import os, sys
    import django
    from django.conf import settings
    dbname, password, socket_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    base = {"ENGINE": "django.db.backends.postgresql", "NAME": dbname, "USER": "postgres", "PASSWORD": password}
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "tenure.contrib.django"], USE_TZ=True,
        DATABASES={
            "default": {**base, "HOST": socket_dir, "OPTIONS": {"sslmode": "disable",
                                                                "options": "-c statement_timeout=12345"}},
            "tls": {**base, "HOST": "127.0.0.1", "PORT": "5432", "OPTIONS": {"sslmode": "require"}},
            "down": {**base, "HOST": "127.0.0.1", "PORT": "1"},
        },
        TASKS={alias: {"BACKEND": "tenure.contrib.django.TenureBackend", "OPTIONS": {"DATABASE": alias}}
               for alias in ("default", "tls", "down")},
    )
    django.setup()
    from psycopg.conninfo import conninfo_to_dict
    import tenure
    from tenure.contrib.django import database_url
    from tenure.contrib.django._compat import task_backends

    def clean(text):
        assert password not in text and "s3cret" not in text, text

    # the URL carries Django's parameters exactly
    params = conninfo_to_dict(database_url("default"))
    assert params["host"] == socket_dir and params["password"] == password, params
    assert params["sslmode"] == "disable" and params["options"] == "-c statement_timeout=12345", params
    assert params["dbname"] == dbname and params["user"] == "postgres", params

    # and the store connects with them: through the socket, with the session option applied
    store = task_backends["default"].store
    with store.transaction() as tx:
        assert tx.execute("SHOW statement_timeout").fetchone()[0] == "12345ms"
        assert tx.execute("SELECT inet_server_addr()").fetchone()[0] is None  # a Unix socket
    job_id = store.jobs.enqueue("k", {"n": 1})
    assert store.jobs.get(job_id).payload == {"n": 1}
    clean(repr(store)); clean(store.engine.describe())
    assert "***" in repr(store)
    store.jobs.delete(job_id)

    # sslmode reaches libpq: this server has no TLS, so "require" is refused, never ignored
    try:
        task_backends["tls"].store.jobs
    except tenure.errors.StoreUnavailable as exc:
        assert "SSL" in str(exc), str(exc)
        clean(str(exc))
    else:
        raise AssertionError("sslmode=require was not applied")

    # an unreachable server: a coded error naming the store, password hidden
    try:
        task_backends["down"].store.jobs
    except tenure.errors.StoreUnavailable as exc:
        clean(str(exc))
        assert "***" in str(exc), str(exc)
    else:
        raise AssertionError("port 1 answered")
    print("OK")
''')


def test_django_connection_parameters_reach_libpq_and_the_password_never_shows(tmp_path):
    require_pg()
    if not Path(SOCKET_DIR, ".s.PGSQL.5432").exists():
        pytest.skip(f"SKIPPING: the PostgreSQL server has no Unix socket in {SOCKET_DIR}")
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}:{ROOT}")
    env.pop("DJANGO_SETTINGS_MODULE", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, PG_URL.rsplit("/", 1)[1], PW, SOCKET_DIR],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr


GUARD_SCRIPT = textwrap.dedent('''
    import sys
    import django
    from django.conf import settings
    path = sys.argv[1]
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "tenure.contrib.django"], USE_TZ=True,
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": path},
                   "memory": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        TASKS={"default": {"BACKEND": "tenure.contrib.django.TenureBackend"},
               "memory": {"BACKEND": "tenure.contrib.django.TenureBackend", "OPTIONS": {"DATABASE": "memory"}}},
    )
    django.setup()
    from django.test.utils import setup_test_environment, teardown_test_environment
    import tenure
    from tenure.contrib.django import database_url
    from tenure.contrib.django._compat import task_backends

    assert database_url("default").endswith(path), database_url("default")
    try:
        database_url("memory")
    except tenure.errors.InvalidURL as exc:
        assert "in-memory" in str(exc) and "TEST" in str(exc), str(exc)
    else:
        raise AssertionError("an in-memory database was accepted")
    # under the test runner, a database that is not a test database is refused, nothing written
    setup_test_environment()
    try:
        task_backends["default"].store
    except tenure.errors.InvalidURL as exc:
        assert "not a test database" in str(exc), str(exc)
    else:
        raise AssertionError("a test reached the real database")
    teardown_test_environment()
    assert task_backends["default"].store.jobs.counts()["pending"] == 0
    print("OK")
''')


def test_a_test_never_reaches_a_real_or_in_memory_database(tmp_path):
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}:{ROOT}")
    env.pop("DJANGO_SETTINGS_MODULE", None)
    proc = subprocess.run([sys.executable, "-c", GUARD_SCRIPT, str(tmp_path / "real.sqlite3")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr
