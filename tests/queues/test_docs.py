"""docs/queues.md promises that every snippet runs as is, top to bottom, in one session: run them."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "queues.md"


def test_every_snippet_in_docs_queues_md_runs():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 10
    namespace: dict = {}
    for n, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"{DOC.name}[snippet {n}]", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"snippet {n} of {DOC.name} failed: {exc!r}\n{block}") from exc
