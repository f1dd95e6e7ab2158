"""The snippets of "Liveness: deadlines and lost connections" in docs/guarantees.md and of
"Deadlines and lost connections (PostgreSQL)" in docs/operations.md run as printed."""

from __future__ import annotations

import pytest

from tests.docs_snippets import run_section

SECTIONS = [
    ("guarantees.md", "## Liveness: deadlines and lost connections"),
    ("operations.md", "## Deadlines and lost connections (PostgreSQL)"),
]


@pytest.mark.parametrize(("doc", "heading"), SECTIONS)
def test_every_snippet_of_the_liveness_sections_runs(doc, heading, tmp_path, monkeypatch):
    if doc == "operations.md":
        pytest.importorskip("psycopg")
    monkeypatch.chdir(tmp_path)
    run_section(doc, heading)
