"""Helpers for the queue tests: raw reads of columns a Job record does not carry, coded
refusals, and processes started to act at the same instant."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
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


def at_once(target: Callable[..., None], args: tuple, processes: int = 4) -> list[tuple]:
    """Run ``target(*args, barrier, out)`` in ``processes`` spawned processes (a function of
    ``_procs``: it waits on the shared barrier, so all act at the same instant, then puts one
    report on ``out`` whose last item is an error text or None). Answers the reports in the order
    they came; the test fails when any process reports an error."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, out)) for _ in range(processes)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    errors = [r[-1] for r in results if r[-1]]
    assert not errors, errors
    return results
