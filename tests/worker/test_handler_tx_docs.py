"""docs/guarantees.md's handler-transaction example runs as printed, on SQLite ("explains
the handler transaction with a runnable example"). It also prints what the doc says it prints: the
counter proves exactly-once, a block held past three leases commits once, and a stale
attempt's block is refused with nothing written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "guarantees.md"
HEADING = "### Example: exactly once, a long block, and a refused block"


def _section() -> str:
    text = DOC.read_text()
    assert "## The handler transaction (exactly-once effects)" in text
    return text.split(HEADING, 1)[1]


def example() -> str:
    return re.search(r"```python\n(.*?)```", _section(), re.S).group(1)


def printed() -> list[str]:
    """The output the doc shows under "It prints:" (the first ```text fence after the example)."""
    after = _section().split("It prints:", 1)[1]
    return re.search(r"```text\n(.*?)```", after, re.S).group(1).splitlines()


EXPECTED = [
    "counter after 5 jobs: 5",
    "states: {'pending': 0, 'leased': 0, 'done': 10, 'failed': 0, 'dead': 0, 'cancelled': 0}",
    "long job: done {'attempt': 1} attempts: 1 outcome: completed",
    "attempt 2: the block sees counter = 7",
    "attempt 1: block refused TN2065, counter = 7",
    "stall outcomes: [('stall', 2, 'completed', None), ('stall', 1, 'lost', 'TN2065')]",
    "stalled job: done {'attempt': 2} attempts: 2",
    "counter at the end: 7",
]


def _run(tmp_path: Path) -> subprocess.CompletedProcess:
    (tmp_path / "handler_tx_demo.py").write_text(example())
    return subprocess.run([sys.executable, "handler_tx_demo.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)


def test_the_handler_transaction_example_runs_and_prints_what_the_doc_says(tmp_path):
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out == EXPECTED
    assert printed() == EXPECTED  # the doc shows exactly this output
    # a block that outlasted three leases committed once; a stale attempt's block was
    # refused when it opened, and nothing of it was written
    assert out[2].startswith("long job: done") and out[-1] == "counter at the end: 7"
    assert (tmp_path / "handler-tx-demo.db").exists()  # a SQLite file in the current directory


def test_the_example_starts_from_an_empty_file_when_run_again(tmp_path):
    """A reader who runs it twice sees the same output (the example removes its own file first)."""
    assert _run(tmp_path).returncode == 0
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == EXPECTED
