"""The snippets of the "one verdict per input" sections run as printed: "One verdict per input" in
docs/guarantees.md, "Bulk enqueue (`--from-file`)" and "Storage verdicts" in docs/operations.md."""

from __future__ import annotations

import pytest

from .test_edge_docs import section_snippets

SECTIONS = [
    ("guarantees.md", "## One verdict per input"),
    ("operations.md", "## Bulk enqueue (`--from-file`)"),
    ("operations.md", "## Storage verdicts"),
]


@pytest.mark.parametrize(("doc", "heading"), SECTIONS)
def test_every_snippet_of_the_section_runs(doc, heading, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = section_snippets(doc, heading)
    assert blocks, f"no python snippet under {heading!r} in {doc}"
    namespace: dict = {}
    for n, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"{doc}[{heading} snippet {n}]", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"snippet {n} under {heading!r} of {doc} failed: {exc!r}\n{block}") from exc
