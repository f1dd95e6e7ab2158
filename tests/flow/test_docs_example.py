"""docs/workflows.md's complete example and its kill -9 demo run as printed, on SQLite ("a
real example a reader can run"; "every snippet runs"). The page runs once, through the
shared runner (tests/docs_snippets.py); this test reads what its blocks printed and left behind."""

from __future__ import annotations

from pathlib import Path

import tenure
from tests.docs_snippets import blocks, run_page

PAGE = "docs/workflows.md"
PRINTED = [
    "done {'day': '2026-08-05', 'csv': 'out/report-2026-08-05.csv', 'rows': 5}",
    "[('fetch', 'done'), ('transform', 'done'), ('load_csv', 'done'), ('load_db', 'done'), ('report', 'done')]",
]


def _shell_lines() -> list[int]:
    return [b.line for b in blocks(PAGE) if b.lang == "bash"]


def test_the_documented_example_prints_what_the_doc_says():
    run = run_page(PAGE)
    assert run.failure() is None, run.failure()
    first, kill_demo = _shell_lines()
    assert run.printed(first).splitlines() == PRINTED
    assert run.printed(kill_demo).splitlines() == PRINTED
    shown = (Path(run.directory) / "report_flow.py").read_text()
    assert all(f"# {line}" in shown for line in PRINTED)  # the example's comments say what it prints


def test_the_killed_run_resumed_in_a_second_attempt():
    """After the kill -9 demo the run is done in its second attempt: the first process died inside
    load_db, and the second one claimed the same run once its lease was over."""
    run = run_page(PAGE)
    assert run.failure() is None, run.failure()
    store = tenure.connect(f"sqlite:///{run.directory}/workflows-demo.db")
    try:
        job = store.jobs.get("report-2026-08-05")
    finally:
        store.close()
    assert job.state == "done" and job.attempts == 2
    assert (Path(run.directory) / "out" / "report-2026-08-05.csv").read_text().splitlines()[0] == "sku-1,1"
