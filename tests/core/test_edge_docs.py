"""The snippets of the issue-20 sections of the docs run as printed: "Secrets at the edges" in
docs/guarantees.md, "Secrets in store URLs" and "Host names" in docs/operations.md."""

from __future__ import annotations

import pytest

from tests.docs_snippets import run_section

SECTIONS = [
    ("guarantees.md", "## Secrets at the edges"),
    ("operations.md", "## Secrets in store URLs"),
    ("operations.md", "### Host names"),
]



@pytest.mark.parametrize(("doc", "heading"), SECTIONS)
def test_every_snippet_of_the_section_runs(doc, heading, tmp_path, monkeypatch):
    pytest.importorskip("psycopg")
    monkeypatch.chdir(tmp_path)
    run_section(doc, heading)
