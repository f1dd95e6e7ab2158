"""Helpers for the queue tests: raw reads of columns a Job record does not carry, and coded
refusals."""

from __future__ import annotations

from contextlib import contextmanager

import pytest


def raw(store, sql: str, params: tuple = ()) -> list[tuple]:
    """Read tenure's tables with SQL written with ``?`` placeholders."""
    if store.dialect != "sqlite":
        sql = sql.replace("?", "%s")
    with store._session() as s:
        return [tuple(r) for r in s.execute(sql, params).fetchall()]


def column(store, job_id: str, name: str):
    """One column of one job row (keep_until, delete_after_ms, policy, debounce_ms, ...)."""
    rows = raw(store, f"SELECT {name} FROM tenure_jobs WHERE id = ?", (job_id,))
    assert rows, f"no job {job_id!r}"
    return rows[0][0]


def jobs_in(store, queue: str, state: str | None = None) -> list:
    """Every job of ``queue`` (in ``state``), by id."""
    items, after = [], None
    while True:
        page = store.jobs.page(state=state, queue=queue, after=after, limit=1000)
        items.extend(page.items)
        if page.next_after is None:
            return items
        after = page.next_after


@contextmanager
def refused(code: str):
    """The block raises a tenure error coded ``code`` (never a driver exception)."""
    with pytest.raises(Exception) as ei:  # the code is checked below
        yield ei
    got = getattr(ei.value, "code", None)
    assert got == code, f"expected {code}, got {type(ei.value).__name__}({got}): {ei.value!r}"
