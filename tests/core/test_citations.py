"""Comments, docstrings, tests and docs cite only what a newcomer can open in this repository: a
row of docs/spec.md ("spec 6.13", "spec §6", "D4"), another page of docs/, a test. Never a
document outside it (the job format's own text or its checklist) nor an issue number."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: A citation of something outside the repository.
FOREIGN = re.compile(r"JOBS-FORMAT|\b[Cc]hecklist\b|\b[Ii]ssues? #?\d+")


def cited_files() -> list[Path]:
    files = [p for d in ("src", "tests", "bench", "scripts") for p in (ROOT / d).rglob("*")
             if p.is_file() and p.suffix in (".py", ".md", ".sql", ".js", ".css", ".html", "")
             and "__pycache__" not in p.parts and ".peers-venv" not in p.parts]  # bench.peers' third-party venv
    files += sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "pyproject.toml"]
    return [p for p in files if p.resolve() != Path(__file__).resolve()]


def foreign_citations(text: str) -> list[tuple[int, str]]:
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if FOREIGN.search(line)]


def test_nothing_cites_a_document_outside_the_repository() -> None:
    found = [f"{p.relative_to(ROOT)}:{n}: {line[:120]}"
             for p in cited_files() for n, line in foreign_citations(p.read_text(errors="replace"))]
    assert found == [], "cite docs/spec.md rows (spec 6.13, D4) or a page of docs/ instead:\n" + "\n".join(found)


@pytest.mark.parametrize(("line", "foreign"), [
    ("# JOBS-FORMAT checklist 6.3: at most N attempts", True),
    ('"""The admin API (issue 22)."""', True),
    ("# checklist 7.1", True),
    ("# spec 6.3: at most N attempts (docs/spec.md)", False),
    ("# D4: an expired lease is cancelled like a queued job", False),
])
def test_the_check_can_fail(line: str, foreign: bool) -> None:
    assert bool(foreign_citations(line)) is foreign
