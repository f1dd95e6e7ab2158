"""The type checker runs clean over ``src/tenure``, and the package ships ``py.typed``.

mypy is configured in pyproject.toml (``[tool.mypy]``); its incremental cache lives in
``.mypy_cache`` at the repository root, so a run after the first takes a few seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_py_typed_ships() -> None:
    assert (ROOT / "src" / "tenure" / "py.typed").is_file()


def test_mypy_is_clean() -> None:
    pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "src/tenure"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert proc.returncode == 0 and not errors, (
        f"mypy src/tenure found {len(errors)} error(s):\n" + (proc.stdout + proc.stderr)[-20000:]
    )
