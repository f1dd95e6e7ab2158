"""The snippets of the "one verdict per input" sections run as printed: "One verdict per input" in
docs/guarantees.md, "Bulk enqueue (`--from-file`)" and "Storage verdicts" in docs/operations.md."""

from __future__ import annotations

import pytest

from tests.docs_snippets import run_section

SECTIONS = [
    ("guarantees.md", "## One verdict per input"),
    ("operations.md", "## Bulk enqueue (`--from-file`)"),
    ("operations.md", "## Storage verdicts"),
]


@pytest.mark.parametrize(("doc", "heading"), SECTIONS)
def test_every_snippet_of_the_section_runs(doc, heading, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_section(doc, heading)
