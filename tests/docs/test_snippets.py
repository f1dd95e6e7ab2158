"""Every fenced python and shell block of README.md and docs/*.md runs as printed ("Every
snippet runs"). The rules a page follows are in tests/docs_snippets.py: each page runs in a fresh
interpreter and temporary directory, its blocks top to bottom; a failure names the page and line.

A block that cannot run as printed is marked ``<!-- fragment: reason -->`` on the line before its
fence. Marking is visible here: FRAGMENTS lists how many each page has, so a marker added to a page
(or a new page made only of fragments) fails this test until it is listed with its reason read."""

from __future__ import annotations

import pytest

from tests.docs_snippets import blocks, fragments, pages, run_page

# page -> number of blocks marked as fragments (a page not listed has none)
FRAGMENTS: dict[str, int] = {
    "README.md": 1,  # pip install -e . && ./scripts/test
    "docs/integrations.md": 2,  # a Django project's three files, a FastAPI module
    "docs/operations.md": 3,  # pip install + export of your server's URL, your worker, the dashboard server
    "docs/performance.md": 1,  # the benchmark runs (minutes)
}


@pytest.mark.parametrize("page", pages())
def test_every_block_of_the_page_runs_as_printed(page):
    run = run_page(page)
    failure = run.failure()
    assert failure is None, failure
    assert len(run.runs) == sum(b.runs for b in blocks(page))


def test_fragments_are_few_and_listed():
    found = {page: fragments(page) for page in pages()}
    listed = {page: len(fs) for page, fs in found.items() if fs}
    detail = "\n".join(f"  {b.where}: {b.fragment}" for fs in found.values() for b in fs)
    assert listed == FRAGMENTS, f"fragments per page changed; every one marked now:\n{detail}"


def test_the_snippet_test_covers_readme_and_every_docs_page():
    from tests.docs_snippets import DOCS

    assert pages()[0] == "README.md"
    assert set(pages()[1:]) == {f"docs/{p.name}" for p in DOCS.glob("*.md")}
    assert sum(b.runs for page in pages() for b in blocks(page)) >= 40
