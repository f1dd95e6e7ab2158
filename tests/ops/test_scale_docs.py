"""docs/operations.md, section "Jobs at scale: tags, bulk admin, progress, order": every python
snippet runs as printed, top to bottom with the rest of the page (tests/docs_snippets.py)."""

from __future__ import annotations

from tests.docs_snippets import run_section

SECTION = "## Jobs at scale: tags, bulk admin, progress, order"


def test_every_snippet_of_the_section_runs():
    run_section("operations.md", SECTION)
