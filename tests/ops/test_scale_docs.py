"""docs/operations.md, section "Jobs at scale: tags, bulk admin, progress, order": every python
snippet runs as printed, top to bottom in one session (in a temporary directory)."""

from __future__ import annotations

from tests.docs_snippets import section_snippets

SECTION = "## Jobs at scale: tags, bulk admin, progress, order"


def snippets() -> list[str]:
    return section_snippets("operations.md", SECTION)


def test_every_snippet_of_the_section_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = snippets()
    assert blocks
    namespace: dict = {}
    try:
        for n, block in enumerate(blocks, 1):
            path = tmp_path / f"scale_snippet_{n}.py"  # on disk, so tracebacks show its lines
            path.write_text(block, encoding="utf-8")
            try:
                exec(compile(block, str(path), "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"snippet {n} failed: {exc!r}\n{block}") from exc
    finally:
        for name in ("store", "app"):
            obj = namespace.get(name)
            try:
                obj.close() if name == "store" and obj is not None else None
            except Exception:  # noqa: BLE001
                pass
