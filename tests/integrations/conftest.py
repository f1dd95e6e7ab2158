"""The Python 3.12 virtual environment with Django 6 that the Django tests share (one per run)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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


@pytest.fixture(scope="session")
def django6_python(tmp_path_factory) -> str:
    """A Python with Django 6 and this tenure: ``$TENURE_DJANGO6_PYTHON`` when set (a venv built
    before, to save the install), else a fresh venv for this run."""
    given = os.environ.get("TENURE_DJANGO6_PYTHON")
    if given:
        return given
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
