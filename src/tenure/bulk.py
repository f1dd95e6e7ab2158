"""Bulk enqueue from JSON lines (``tenure enqueue --from-file``): all of the file, or none of it.

Two phases, so a file is never half-loaded (docs/operations.md, "Bulk enqueue"):

1. **Check.** Every line is parsed, validated and encoded exactly as ``jobs.enqueue_many`` would
   (the same validation layer, :mod:`tenure._validate`), before the database is touched. The
   first bad line refuses the file; the error names its line number.
2. **Write.** Every job is written in ONE transaction (in statements of ``chunk`` jobs). A failure
   the database reports while writing rolls the whole file back, so a rerun of the same file
   duplicates nothing; the error names the line being written (for a refusal of the row
   itself, the one line, found by replaying its chunk in a transaction that is rolled back).

Line numbers are the file's own (1-based, blank lines counted), on both engines.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import enqueue_options as eo
from .engine.rows import NewJob
from .errors import InvalidArgument, InvalidType, StorageError, StoreLimitExceeded, TenureError

if TYPE_CHECKING:
    from .store import Store

DEFAULT_CHUNK = 1000


@dataclass(frozen=True, slots=True)
class Line:
    """One checked line: its number in the file and the encoded job it becomes."""

    number: int
    job: NewJob


def _at(number: int, exc: TenureError) -> TenureError:
    """``exc`` again, its message prefixed with the line number (``details["line"]`` too)."""
    return type(exc)(f"line {number}: {exc.message}", **{**exc.details, "line": number})


def parse(lines: Iterable[str], default_kind: str | None = None) -> list[tuple[int, dict[str, Any]]]:
    """The objects of a JSON-lines text, with their line numbers; blank lines are skipped. A line
    that is not a JSON object, has no ``kind`` (and there is no default) or holds an unknown key
    raises :class:`InvalidArgument`/:class:`InvalidType` naming the line."""
    out = []
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            item = json.loads(text)
        except ValueError as exc:
            raise InvalidArgument(f"line {number}: not valid JSON ({exc})", line=number) from None
        except RecursionError:
            raise InvalidArgument(f"line {number}: JSON nested too deeply", line=number) from None
        if not isinstance(item, dict):
            raise InvalidType(f"line {number}: expected a JSON object, got {type(item).__name__}", line=number)
        if "kind" not in item:
            if default_kind is None:
                raise InvalidArgument(f"line {number}: no 'kind' (give one per line, or KIND as the argument)",
                                      line=number)
            item["kind"] = default_kind
        try:  # the keys a line may hold: the from_file options of docs/enqueue-options.md
            eo.refuse(item, eo.FILE)
        except TenureError as exc:
            raise _at(number, exc) from None
        out.append((number, item))
    return out


def prepare(store: Store, items: Iterable[tuple[int, dict[str, Any]]]) -> list[Line]:
    """Validate and encode every item as ``enqueue_many`` does; nothing is written. The first
    refusal is re-raised (same class and code) with its line number."""
    jobs = store.jobs
    out = []
    for number, spec in items:
        try:
            out.append(Line(number, jobs._build_spec(spec)))  # the enqueue_many checks, one item
        except TenureError as exc:
            raise _at(number, exc) from None
    return out


def write(store: Store, lines: list[Line], *, chunk: int = DEFAULT_CHUNK,
          on_progress: Callable[[int], None] | None = None) -> list[str | None]:
    """Write every prepared line in ONE transaction, ``chunk`` jobs per statement batch; answers
    the ids (as ``enqueue_many`` does). On failure nothing is written and the error names the
    line: the row's own line when the database refused that row, else the lines being written."""
    ids: list[str | None] = []
    done = 0
    try:
        with store.transaction() as tx:
            for start in range(0, len(lines), chunk):
                batch = lines[start:start + chunk]
                done = start
                ids.extend(tx.jobs._insert([ln.job for ln in batch], None))
                if on_progress is not None:
                    on_progress(len(batch))
    except TenureError as exc:
        batch = lines[done:done + chunk]
        if type(exc) in (StorageError, StoreLimitExceeded):  # the data, not the database: which row?
            culprit = _culprit(store, batch)
            if culprit is not None:
                raise _at(culprit, exc) from exc
        first, last = batch[0].number, batch[-1].number
        raise type(exc)(f"while writing lines {first}-{last}: {exc.message}; nothing from the file was "
                        "written (one transaction)", **{**exc.details, "line": first}) from exc
    return ids


class _Rollback(Exception):
    pass


def _culprit(store: Store, batch: list[Line]) -> int | None:
    """The line of the first job of ``batch`` the database refuses, found by inserting them one
    at a time in a transaction that is always rolled back; None when every one goes in."""
    found: list[int] = []
    try:
        with store.transaction() as tx:
            for ln in batch:
                try:
                    tx.jobs._insert([ln.job], None)
                except Exception:  # noqa: BLE001 - a driver error: classified when the block exits
                    found.append(ln.number)
                    break
            raise _Rollback
    except _Rollback:
        pass
    except TenureError:
        pass  # the replay itself failed (the transaction aborted): report what was found
    return found[0] if found else None


def load(store: Store, lines: Iterable[str], *, default_kind: str | None = None, chunk: int = DEFAULT_CHUNK,
         on_checked: Callable[[int], None] | None = None,
         on_progress: Callable[[int], None] | None = None) -> list[str | None]:
    """Check, then write, a whole JSON-lines text (see the module docstring): the ids, one per
    job line, or a coded error naming a line and nothing written. ``on_checked(n)`` is called
    with the number of jobs once every line passed the check."""
    lines_ = prepare(store, parse(lines, default_kind))
    if on_checked is not None:
        on_checked(len(lines_))
    if not lines_:
        return []
    return write(store, lines_, chunk=chunk, on_progress=on_progress)
