"""docs/operations.md, section "Failures you can see, jobs you can steer": every python snippet
runs as printed, top to bottom with the rest of the page (tests/docs_snippets.py)."""

from __future__ import annotations

from tests.docs_snippets import run_section, section_snippets

SECTION = "## Failures you can see, jobs you can steer"


def test_every_snippet_of_the_section_runs():
    assert len(section_snippets("operations.md", SECTION)) >= 2
    run_section("operations.md", SECTION)
