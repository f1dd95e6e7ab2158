"""docs/workflows.md's complete example runs as printed, on SQLite (issue 7: "a real example a
reader can run")."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "workflows.md"


def example() -> str:
    text = DOC.read_text()
    section = text.split("## A complete example", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_documented_example_runs_and_prints_what_the_doc_says(tmp_path):
    (tmp_path / "report_flow.py").write_text(example())
    proc = subprocess.run([sys.executable, "report_flow.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.strip().splitlines()
    assert re.fullmatch(r"done \{'day': '2026-08-05', 'csv': 'out/[0-9a-f-]{36}\.csv', 'rows': 5\}", first)
    assert second == ("[('fetch', 'done'), ('transform', 'done'), ('load_csv', 'done'), ('load_db', 'done'), "
                      "('report', 'done')]")
    run_id = re.search(r"out/([0-9a-f-]{36})\.csv", first).group(1)
    assert (tmp_path / "out" / f"{run_id}.csv").read_text().splitlines()[0] == "sku-1,1"
