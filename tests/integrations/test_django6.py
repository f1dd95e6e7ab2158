"""The same end-to-end Django project on Django 6's built-in ``django.tasks`` (issue 11).

Django 6 needs Python 3.12+, and this suite runs on 3.11: the test builds a Python 3.12 virtual
environment (Django 6, psycopg, tenure from this checkout) and runs the project there. Without a
Python 3.12+ interpreter on the machine it is skipped, saying so."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .test_django import ROOT, run_project


def _python312() -> str | None:
    """A working Python 3.12+ (pyenv shims exist for versions that are not selected: try each)."""
    candidates = [str(p) for p in sorted(Path("/root/.pyenv/versions").glob("3.1[2-9]*/bin/python3"))]
    candidates += [c for c in (shutil.which("python3.13"), shutil.which("python3.12")) if c]
    for candidate in candidates:
        r = subprocess.run([candidate, "-c", "import sys, venv; assert sys.version_info >= (3, 12)"],
                           capture_output=True)
        if r.returncode == 0:
            return candidate
    return None


@pytest.fixture(scope="module")
def django6_python(tmp_path_factory) -> str:
    base = _python312()
    if base is None:
        pytest.skip("SKIPPING DJANGO 6: no Python 3.12+ interpreter here (Django 6 requires it)")
    venv = tmp_path_factory.mktemp("django6") / "venv"
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    r = subprocess.run([py, "-m", "pip", "install", "-q", "django>=6,<7", "psycopg[binary]>=3.1",
                        "psycopg-pool>=3.2", "-e", str(ROOT)], env=env, capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"could not install Django 6 in a Python 3.12 venv:\n{r.stderr[-2000:]}")
        pytest.skip(f"SKIPPING DJANGO 6: install failed: {r.stderr[-500:]}")
    check = subprocess.run([py, "-c", "import django, django.tasks; print(django.VERSION[0])"],
                           capture_output=True, text=True, env=env)
    assert check.stdout.strip() == "6", check.stdout + check.stderr
    return py


@pytest.mark.timeout(900)
@pytest.mark.parametrize("alias", ["default", "pg"])
def test_django6_backend_end_to_end(django6_python, tmp_path, alias):
    run_project(django6_python, tmp_path, alias)
