"""docs/queues.md promises that every snippet runs as is, top to bottom, in one session: it does
(the page runs through tests/docs_snippets.py)."""

from __future__ import annotations

from tests.docs_snippets import blocks, run_page


def test_every_snippet_in_docs_queues_md_runs():
    python = [b for b in blocks("docs/queues.md") if b.lang == "python"]
    assert len(python) >= 10 and all(b.runs for b in python)  # no fragment in this page
    run = run_page("docs/queues.md")
    assert run.failure() is None, run.failure()
    assert len(run.runs) == len(python)
