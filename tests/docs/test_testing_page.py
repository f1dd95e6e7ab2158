"""docs/testing.md runs as printed (tests/docs_snippets.py): its tests of a module-level app whose
URL names a production file pass under pytest with tenure's plugin, and that file never exists."""

from __future__ import annotations

from pathlib import Path

from tests.docs_snippets import blocks, run_page

PAGE = "docs/testing.md"


def test_the_testing_page_isolates_its_module_level_app():
    run = run_page(PAGE)
    assert run.failure() is None, run.failure()
    shell = next(b for b in blocks(PAGE) if b.lang == "bash")
    out = run.printed(shell.line)
    assert "4 passed" in out and "prod.db was never created" in out
    assert not (Path(run.directory) / "prod.db").exists()
    assert (Path(run.directory) / "shop.py").read_text().count('tenure.App("sqlite:///prod.db")') == 1
