"""The snippets of the issue-20 sections of the docs run as printed: "Secrets at the edges" in
docs/guarantees.md, "Secrets in store URLs" and "Host names" in docs/operations.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
SECTIONS = [
    ("guarantees.md", "## Secrets at the edges"),
    ("operations.md", "## Secrets in store URLs"),
    ("operations.md", "### Host names"),
]


def section_snippets(doc: str, heading: str) -> list[str]:
    """The ```python blocks under ``heading`` in ``docs/<doc>``, up to the next heading of the
    same or a higher level (a ``#`` line inside a code block is not a heading)."""
    lines = (DOCS / doc).read_text(encoding="utf-8").splitlines(keepends=True)
    level = len(heading.split(" ", 1)[0])
    start = lines.index(heading + "\n") + 1
    body, fenced = [], False
    for line in lines[start:]:
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(rf"#{{1,{level}}} ", line):
            break
        body.append(line)
    return re.findall(r"```python\n(.*?)```", "".join(body), flags=re.S)


@pytest.mark.parametrize(("doc", "heading"), SECTIONS)
def test_every_snippet_of_the_section_runs(doc, heading, tmp_path, monkeypatch):
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
