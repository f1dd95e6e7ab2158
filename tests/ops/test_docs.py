"""docs/operations.md, section "Failures you can see, jobs you can steer": every python snippet
runs as printed, top to bottom in one session (in a temporary directory)."""

from __future__ import annotations

from tests.docs_snippets import section_snippets

SECTION = "## Failures you can see, jobs you can steer"


def snippets() -> list[str]:
    return section_snippets("operations.md", SECTION)


def test_every_snippet_of_the_section_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = snippets()
    assert len(blocks) >= 2
    namespace: dict = {}
    try:
        for n, block in enumerate(blocks, 1):
            path = tmp_path / f"operations_snippet_{n}.py"  # on disk, so tracebacks show its lines
            path.write_text(block, encoding="utf-8")
            try:
                exec(compile(block, str(path), "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"snippet {n} failed: {exc!r}\n{block}") from exc
    finally:
        app = namespace.get("app")
        if app is not None and app._store is not None:
            app.store.close()
