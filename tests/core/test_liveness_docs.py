"""The snippets of "Liveness: deadlines and lost connections" in docs/guarantees.md and of
"Deadlines and lost connections (PostgreSQL)" in docs/operations.md run as printed."""

from __future__ import annotations

import pytest

from .test_edge_docs import section_snippets

SECTIONS = [
    ("guarantees.md", "## Liveness: deadlines and lost connections"),
    ("operations.md", "## Deadlines and lost connections (PostgreSQL)"),
]


@pytest.mark.parametrize(("doc", "heading"), SECTIONS)
def test_every_snippet_of_the_liveness_sections_runs(doc, heading, tmp_path, monkeypatch):
    if doc == "operations.md":
        pytest.importorskip("psycopg")
    monkeypatch.chdir(tmp_path)
    blocks = section_snippets(doc, heading)
    assert blocks, f"no python snippet under {heading!r} in {doc}"
    namespace: dict = {}
    for n, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"{doc}[{heading} snippet {n}]", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"snippet {n} under {heading!r} of {doc} failed: {exc!r}\n{block}") from exc
