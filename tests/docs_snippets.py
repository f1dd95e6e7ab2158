"""Read the ```python blocks of one section of a page in docs/, and run them as printed."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


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


def run_section(doc: str, heading: str) -> None:
    """Run every python block of the section top to bottom in one namespace; fail naming the block."""
    blocks = section_snippets(doc, heading)
    assert blocks, f"no python snippet under {heading!r} in {doc}"
    namespace: dict = {}
    for n, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"{doc}[{heading} snippet {n}]", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"snippet {n} under {heading!r} of {doc} failed: {exc!r}\n{block}") from exc
