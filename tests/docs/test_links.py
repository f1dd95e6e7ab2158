"""Every relative link of README.md and docs/*.md leads somewhere: the file exists, and a
``#fragment`` into a Markdown page names one of its headings (GitHub's anchor rule: lower case,
punctuation other than ``-`` and ``_`` dropped, spaces to ``-``, a repeated heading gets ``-1``,
``-2``...) or an explicit ``<a id="...">``. Links inside fenced blocks and inline code are not links;
absolute URLs (``https:``, ``mailto:``) are not followed."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from tests.docs_snippets import ROOT, pages

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_EXPLICIT = re.compile(r"""<a\s+(?:name|id)=["']([^"']+)["']""")
_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_CODE = re.compile(r"`+[^`]*`+")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced blocks, inline code removed."""
    out, fence = [], None
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
            continue
        if fence is None:
            out.append((n, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        m = _HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        found.update(_EXPLICIT.findall(line))
    return frozenset(found)


def broken_links(page: str) -> list[str]:
    path = ROOT / page
    broken = []
    for n, line in _prose_lines(path.read_text(encoding="utf-8")):
        for target in _LINK.findall(_INLINE_CODE.sub("", line)):
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue  # https:, mailto:, ...
            file_part, _, fragment = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                broken.append(f"{page}:{n}: {target} (no such file)")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                broken.append(f"{page}:{n}: {target} (no heading #{fragment} in {dest.relative_to(ROOT)})")
    return broken


@pytest.mark.parametrize("page", pages())
def test_every_relative_link_and_anchor_resolves(page):
    assert broken_links(page) == []


def test_the_checker_sees_a_broken_file_and_a_broken_anchor(tmp_path, monkeypatch):
    """The check can fail: a missing page and a missing heading are both reported."""
    import tests.docs.test_links as mod

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title\n\n## Two words, here\n\n```\n[x](gone.md)\n```\n")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md#two-words-here) [file](docs/b.md) [anchor](docs/a.md#nope) `[code](c.md)`\n"
        "[web](https://example.com/x.md) [self](#title)\n\n# Title\n")
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    assert broken_links("README.md") == [
        "README.md:1: docs/b.md (no such file)",
        "README.md:1: docs/a.md#nope (no heading #nope in docs/a.md)",
    ]
    assert broken_links("docs/a.md") == []
