"""Every fenced block of README.md and docs/*.md, read one way, and the runner that runs a page's
blocks as printed (tests/docs/test_snippets.py runs every page; a page's own test may assert on
what a block printed through :func:`run_page`).

The rules a page follows (a failing rule names the page and the line):

* every fence says its language. ``python`` blocks run; ``bash``/``sh``/``shell`` blocks run through
  ``bash -e -o pipefail``; in a ``console`` block the lines that start with ``$ `` run, with the
  ``> `` lines that continue them (a here-document's body); the others are the output the reader
  will see, shown, not compared. ``text``, ``json``, ``yaml``, ``sql``,
  ``toml``, ``ini``, ``html`` and ``dockerfile`` blocks are shown, never run. Any other language,
  or none, fails the test: label output ``text``.
* a block that cannot run as printed (it needs a PostgreSQL server at a made-up host, installs
  packages, serves forever, belongs to a bigger file the page shows in parts) is marked by an HTML
  comment on the line before its fence, ``<!-- fragment: the reason -->``. Fragments are counted
  and listed per page (tests/docs/test_snippets.py), so a marker cannot silently swallow a page.
* a ``python`` block whose first line is ``# NAME.py`` is the file the reader saves: it is written
  to ``NAME.py`` in the page's directory (importable from the blocks that follow), not run. A block
  of any language preceded by ``<!-- save: NAME -->`` is written to ``NAME`` the same way (a JSON
  document the next block reads, say).
* a page runs in a fresh interpreter, in a fresh temporary directory as its current directory, its
  blocks top to bottom: the python blocks share one namespace; the shell blocks run in the same
  directory with the ``tenure`` script of the interpreter running the tests (and its PYTHONPATH,
  so a worktree's tenure is the one that runs). No ``TENURE_*`` variable of the caller leaks in.
  The first failing block ends the page.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

RUN_LANGS = {"python", "bash", "sh", "shell", "console"}
SHOWN_LANGS = {"text", "json", "yaml", "sql", "toml", "ini", "html", "dockerfile"}
FRAGMENT = re.compile(r"<!--\s*fragment:\s*(\S.*?)\s*-->")
SAVE = re.compile(r"<!--\s*save:\s*([\w.-]+)\s*-->")
SAVED_FILE = re.compile(r"# ([\w.-]+\.py)\s*")
PAGE_TIMEOUT_S = 300


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced block: ``line`` is the 1-based line of its opening fence in ``page``."""

    page: str
    line: int
    lang: str
    code: str
    fragment: str | None = None
    save_as: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.fragment is None and (self.lang in RUN_LANGS or self.save_as is not None)


def pages() -> list[str]:
    """README.md and every page in docs/, as paths relative to the repository root (a new page is
    picked up by being there)."""
    return ["README.md", *sorted(f"docs/{p.name}" for p in DOCS.glob("*.md"))]


@cache
def blocks(page: str) -> tuple[Block, ...]:
    """The fenced blocks of ``page`` in order; raises ValueError naming the line of an unclosed
    fence, a fence without a language, or one whose language is neither run nor shown."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.match(r"(\s*)(`{3,})(.*)$", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        start = i
        j = i + 1
        while j < len(lines) and not re.match(rf"\s*{fence}\s*$", lines[j]):
            j += 1
        if j == len(lines):
            raise ValueError(f"{page}:{start + 1}: a fence that is never closed")
        lang = info.split()[0].lower() if info else ""
        if lang not in RUN_LANGS | SHOWN_LANGS:
            raise ValueError(
                f"{page}:{start + 1}: a fence whose language is {lang or 'missing'!r}; say ```python or "
                f"```bash to run it, ```text (or json, yaml, sql, ...) to show it"
            )
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        marker, save = FRAGMENT.search(prev), SAVE.search(prev)
        code = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines[start + 1:j])
        out.append(Block(page, start + 1, lang, code + "\n", marker.group(1) if marker else None,
                         save.group(1) if save else None))
        i = j + 1
    return tuple(out)


def fragments(page: str) -> list[Block]:
    """The blocks of ``page`` that would run but are marked as fragments."""
    return [b for b in blocks(page) if b.lang in RUN_LANGS and b.fragment is not None]


@dataclasses.dataclass(frozen=True)
class BlockRun:
    """What one block did: its stdout and stderr, and the error text if it failed."""

    line: int
    lang: str
    stdout: str
    stderr: str
    error: str | None


@dataclasses.dataclass(frozen=True)
class PageRun:
    page: str
    directory: str
    runs: tuple[BlockRun, ...]

    def failure(self) -> str | None:
        """The message of the first failed block (page, line, error and output), or None."""
        for run in self.runs:
            if run.error is not None:
                return (f"{self.page}:{run.line}: the {run.lang} block failed as printed\n{run.error}"
                        f"\n--- stdout ---\n{run.stdout[-3000:]}\n--- stderr ---\n{run.stderr[-3000:]}")
        return None

    def printed(self, line: int) -> str:
        """The stdout of the block whose fence opens at ``line``."""
        return next(r.stdout for r in self.runs if r.line == line)

    @property
    def stdout(self) -> str:
        return "".join(r.stdout for r in self.runs)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without ``TENURE_*``, with this interpreter's scripts first on PATH
    and this checkout's sources first on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENURE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


@cache
def run_page(page: str) -> PageRun:
    """Run ``page``'s blocks in a fresh interpreter and temporary directory (once per test
    session; the directory is kept for the page's own assertions)."""
    directory = tempfile.mkdtemp(prefix="tenure-docs-")
    result = Path(directory) / ".snippets-result.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.docs_snippets", page, str(result)],
        cwd=directory, env=child_env(), capture_output=True, text=True, timeout=PAGE_TIMEOUT_S,
    )
    if not result.exists():
        return PageRun(page, directory, (BlockRun(0, "page", proc.stdout, proc.stderr,
                                                  f"the page's interpreter exited with {proc.returncode}"),))
    runs = tuple(BlockRun(**r) for r in json.loads(result.read_text(encoding="utf-8")))
    return PageRun(page, directory, runs)


def _run_shell(block: Block) -> BlockRun:
    if block.lang == "console":
        script = "\n".join(line[2:] for line in block.code.splitlines() if line.startswith(("$ ", "> ")))
    else:
        script = block.code
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], env=child_env(),
                          capture_output=True, text=True, timeout=PAGE_TIMEOUT_S)
    error = None if proc.returncode == 0 else f"exit status {proc.returncode}\n{script}"
    return BlockRun(block.line, block.lang, proc.stdout, proc.stderr, error)


def _run_python(block: Block, namespace: dict) -> BlockRun:
    first = block.code.splitlines()[0] if block.code.strip() else ""
    saved = SAVED_FILE.fullmatch(first)
    if saved:
        Path(saved.group(1)).write_text(block.code, encoding="utf-8")
        return BlockRun(block.line, block.lang, "", "", None)
    out, err = io.StringIO(), io.StringIO()
    error = None
    # padded so the traceback names the page's own line numbers
    source = "\n" * block.line + block.code
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            # dont_inherit: the page runs as a reader runs it, without this module's __future__ imports
            exec(compile(source, str(ROOT / block.page), "exec", dont_inherit=True), namespace)
        except BaseException as exc:  # noqa: BLE001 - reported with its traceback, the page stops here
            # the first frame is this runner's exec: the reader's traceback starts at the page
            error = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next))
    return BlockRun(block.line, block.lang, out.getvalue(), err.getvalue(), error)


def _main(page: str, result: str) -> None:
    """Child side of :func:`run_page`: run the page's blocks, write what each did to ``result``."""
    sys.path.insert(0, os.getcwd())
    namespace: dict = {"__name__": "__main__"}
    runs: list[BlockRun] = []
    try:
        for block in blocks(page):
            if not block.runs:
                continue
            if block.save_as is not None:
                Path(block.save_as).write_text(block.code, encoding="utf-8")
                run = BlockRun(block.line, block.lang, "", "", None)
            elif block.lang == "python":
                run = _run_python(block, namespace)
            else:
                run = _run_shell(block)
            runs.append(run)
            if run.error is not None:
                break
    finally:
        Path(result).write_text(json.dumps([dataclasses.asdict(r) for r in runs]), encoding="utf-8")
        sys.stdout.flush()
    # a page may leave worker threads or open stores behind: end without waiting for them
    os._exit(0)


# ---------------------------------------------------------------------------------------------
# One section of a page, for the tests that name the sections they guard (the page runs once).


def section_blocks(doc: str, heading: str) -> list[Block]:
    """The blocks under ``heading`` in ``docs/<doc>``, up to the next heading of the same or a
    higher level (a ``#`` line inside a block is not a heading)."""
    page = f"docs/{doc}"
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    level = len(heading.split(" ", 1)[0])
    start = lines.index(heading) + 1
    end, fenced = len(lines), False
    for n in range(start, len(lines)):
        line = lines[n]
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(rf"#{{1,{level}}} ", line):
            end = n
            break
    return [b for b in blocks(page) if start < b.line <= end]


def section_snippets(doc: str, heading: str) -> list[str]:
    """The code of the python blocks under ``heading`` in ``docs/<doc>``."""
    return [b.code for b in section_blocks(doc, heading) if b.lang == "python"]


def run_section(doc: str, heading: str) -> PageRun:
    """Assert that the section holds python blocks that run, and that each of them ran as printed
    (the whole page runs, once per session, through :func:`run_page`)."""
    mine = [b for b in section_blocks(doc, heading) if b.lang == "python" and b.runs]
    assert mine, f"no python block that runs under {heading!r} in docs/{doc}"
    run = run_page(f"docs/{doc}")
    failure = run.failure()
    assert failure is None, failure
    ran = {r.line for r in run.runs}
    assert all(b.line in ran for b in mine), f"blocks of {heading!r} did not run"
    return run


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
