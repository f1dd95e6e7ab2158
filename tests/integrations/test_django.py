"""The django.tasks backend on a real Django project, on both engines.

Each engine runs in a fresh subprocess (Django's settings are configured once per process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("django")
try:
    import django.tasks  # noqa: F401
except ImportError:
    pytest.importorskip("django_tasks")

from ..conftest import PG_URL, require_pg

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent('''
    import os, sys, time, subprocess, signal
    import django
    django.setup()
    from django.db import transaction, connections
    from tests.integrations.djproject.shop import tasks
    alias = sys.argv[1]
    add = tasks.add if alias == "default" else tasks.add_pg
    try:
        from django.tasks import task_backends, TaskResultStatus
    except ImportError:
        from django_tasks import task_backends, TaskResultStatus
    backend = task_backends[alias]
    backend.store._reset_for_tests()
    with connections[alias].cursor() as c:
        c.execute("CREATE TABLE IF NOT EXISTS shop_order (id INTEGER PRIMARY KEY)")
        c.execute("DELETE FROM shop_order")

    # enqueue maps priority, queue and the result id
    r = add.enqueue(2, 3)
    job = backend.store.jobs.get(r.id)
    assert job.queue == "default" and job.priority == (5 if alias == "default" else 0), job
    assert r.status == TaskResultStatus.READY

    # transaction.atomic(): the job commits and rolls back with Django's transaction
    try:
        with transaction.atomic(using=alias):
            with connections[alias].cursor() as c:
                c.execute("INSERT INTO shop_order (id) VALUES (1)")
            rolled = add.enqueue(1, 1)
            raise RuntimeError("rollback")
    except RuntimeError:
        pass
    assert backend.store.jobs.get(rolled.id) is None
    with transaction.atomic(using=alias):
        kept = add.enqueue(10, 20)
    assert backend.store.jobs.get(kept.id) is not None

    # the worker (manage.py tenure_worker) runs them; results map back
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, "-m", "django", "tenure_worker", "--backend", alias,
                             "--concurrency", "2"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            res = backend.get_result(kept.id)
            if res.status == TaskResultStatus.SUCCESSFUL and backend.get_result(r.id).is_finished:
                break
            time.sleep(0.05)
        assert backend.get_result(kept.id).return_value == 30
        assert backend.get_result(r.id).return_value == 5
        if alias == "default":
            bad = tasks.explode.enqueue()
            deadline = time.time() + 60
            while backend.get_result(bad.id).status != TaskResultStatus.FAILED and time.time() < deadline:
                backend.store.jobs.requeue(bad.id) if backend.store.jobs.get(bad.id).state == "failed" else None
                time.sleep(0.05)
            res = backend.get_result(bad.id)
            assert res.status == TaskResultStatus.FAILED
            assert res.errors and res.errors[0].exception_class_path == "builtins.ValueError", res.errors
            assert "kaboom" in res.errors[0].traceback
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert "tenure worker stopped" in out, out
    print("OK")
''')


def run_project(python: str, tmp_path: Path, alias: str) -> None:
    """Run the end-to-end script of the test Django project with ``python``."""
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.integrations.djproject.settings",
               TENURE_DJ_SQLITE=str(tmp_path / "dj.sqlite3"), PYTHONPATH=str(ROOT))
    if alias == "pg":
        require_pg()
        env["TENURE_DJ_PG"] = "1"
        env["TENURE_DJ_PG_NAME"] = PG_URL.rsplit("/", 1)[1]
    proc = subprocess.run([python, "-c", SCRIPT, alias], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("alias", ["default", "pg"])
def test_django_backend_end_to_end(tmp_path, alias):
    """This interpreter's Django (5.2 with the django-tasks backport on Python 3.11)."""
    run_project(sys.executable, tmp_path, alias)
