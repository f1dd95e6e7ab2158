"""Fixtures for the CLI tests: the REAL console script, run as a subprocess against both engines.

``cli`` runs against the root ``engine_url`` fixture (a fresh SQLite file, or the session's
emptied PostgreSQL database). ``tenure`` runs the installed ``tenure`` entry point (the one next to
this interpreter, so a pyenv shim is not in the way) with a clean environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest


def tenure_bin() -> str:
    here = Path(sys.executable).parent / "tenure"
    if here.exists():
        return str(here)
    found = shutil.which("tenure")
    if found is None:
        pytest.fail("the tenure console script is not installed (pip install -e '.[test]')")
    return found


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        import json

        return json.loads(self.out)


class CLI:
    """``cli("jobs", "list", "--json")`` runs ``tenure jobs list --json --url <url>``."""

    def __init__(self, url: str, cwd: Path) -> None:
        self.url = url
        self.cwd = cwd
        self.bin = tenure_bin()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TENURE_")}
        self.env.update({"TENURE_LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1", "COLUMNS": "200"})

    def __call__(self, *args: str, url: str | None = "default", expect: int | None = 0, stdin: str | None = None,
                 timeout: float = 60, env: dict[str, str] | None = None) -> Result:
        argv = [self.bin, *args]
        if url is not None:
            argv += ["--url", self.url if url == "default" else url]
        proc = subprocess.run(argv, cwd=self.cwd, env={**self.env, **(env or {})}, input=stdin,
                              capture_output=True, text=True, timeout=timeout)
        res = Result(proc.returncode, proc.stdout, proc.stderr)
        if expect is not None:
            assert res.code == expect, f"tenure {' '.join(args)} exited {res.code}, wanted {expect}:\n{res.err}{res.out}"
        return res


@pytest.fixture
def cli(engine_url, tmp_path) -> CLI:
    return CLI(engine_url, tmp_path)


def needs_queue_registry() -> None:
    """Skip (loudly) while the queue registry (``store.queues.create/get/pause/resume``)
    has not landed in this checkout; the test runs as soon as it has."""
    from tenure.queues import Queues

    if not all(hasattr(Queues, name) for name in ("create", "get", "pause", "resume")):
        pytest.skip("SKIPPING: the queue registry (store.queues.create/pause/resume) is not in this "
                    "checkout yet")
