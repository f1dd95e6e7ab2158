"""The SQLite bulk INSERT of jobs without a uniqueness key: one statement per
:data:`BULK_ROWS` rows, the rows a JSON array (:func:`Q.insert_rows`), and an answer per job
saying whether THIS call wrote it (:class:`~tenure.engine.rows.Inserted`)."""

from __future__ import annotations

import functools
import json
import operator
import sqlite3
from collections.abc import Sequence

from ..rows import Inserted, NewJob
from . import queries as Q


def insert_many(conn: sqlite3.Connection, jobs: Sequence[NewJob], now: int) -> list[Inserted]:
    """Write ``jobs`` (none with a ``singleton_key``) skipping ids already stored, and answer
    each: inserted when this call wrote it; an id present before, or repeated within the call
    after its first job, answers itself, not inserted."""
    sql, rows = _insert_rows(jobs, now)
    chunks = [_dumps(rows[i:i + BULK_ROWS]) for i in range(0, len(rows), BULK_ROWS)]
    written = _bulk_written(conn, sql, chunks, len(jobs))
    if written is None:
        return [Inserted(j.id, True) for j in jobs]
    out = []
    for j in jobs:
        out.append(Inserted(j.id, j.id in written))
        written.discard(j.id)  # a repeat of this id in the call was not written by it
    return out


#: Rows per bulk INSERT statement (its JSON text stays a few MB at most).
BULK_ROWS = 10_000
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_OPTIONAL_OF = operator.attrgetter(*Q.INSERT_ROWS_OPTIONAL)
_NO_OPTIONS = (None,) * len(Q.INSERT_ROWS_OPTIONAL)
_BACKOFF = Q.INSERT_ROWS_OPTIONAL.index("retry_backoff")


def _bulk_written(conn: sqlite3.Connection, sql: str, chunks: list[str], count: int) -> set[str] | None:
    """Run the bulk INSERT ``sql`` over ``chunks`` (``count`` rows) under a savepoint: None when
    every row was written (the usual bulk, read from the rowcounts alone), else the ids this call
    wrote, read by undoing the statements and running them again with ``RETURNING id`` (an id
    that existed before is then not among them; ``ON CONFLICT DO NOTHING`` skipped it)."""
    if conn.isolation_level is not None and not conn.in_transaction:
        # A caller's connection in the driver's implicit-transaction mode (the outbox): its first
        # INSERT would have opened the caller's transaction. Open it here, or the savepoint would be
        # the outermost one and RELEASE would commit the rows behind the caller's back.
        conn.execute("BEGIN")
    conn.execute("SAVEPOINT tenure_bulk")
    try:
        # rowcount, not total_changes: the latter also counts the queue-registry trigger's row.
        if sum(conn.execute(sql, (chunk,)).rowcount for chunk in chunks) == count:
            return None
        conn.execute("ROLLBACK TO tenure_bulk")
        return {row[0] for chunk in chunks for row in conn.execute(sql + "\nRETURNING id", (chunk,)).fetchall()}
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK TO tenure_bulk")  # a failed bulk writes none of its rows
        raise
    finally:
        if conn.in_transaction:
            conn.execute("RELEASE tenure_bulk")


@functools.lru_cache(maxsize=64)
def _insert_rows_sql(used: tuple[int, ...]) -> str:
    return Q.insert_rows(tuple(Q.INSERT_ROWS_OPTIONAL[i] for i in used))


def _insert_rows(jobs: Sequence[NewJob], now: int) -> tuple[str, list[tuple]]:
    """The bulk INSERT for ``jobs`` and its rows, each the values of one JSON array element
    (:func:`Q.insert_rows`): the optional columns named are those some job sets; a job's values
    are the ones Q.INSERT would write."""
    rows = [(j.id, j.kind, j.payload, now + j.delay_ms if j.run_at is None else j.run_at, j.max_attempts, now,
             j.queue, j.priority, j.policy) for j in jobs]
    options = [_OPTIONAL_OF(j) for j in jobs]
    if options.count(_NO_OPTIONS) == len(options):  # the usual bulk: no option set
        return _insert_rows_sql(()), rows
    used = tuple(i for i in range(len(_NO_OPTIONS)) if any(o[i] is not None for o in options))
    extra = [[o[i] for i in used] for o in options]
    if _BACKOFF in used:
        at = used.index(_BACKOFF)
        for e in extra:
            e[at] = None if e[at] is None else int(e[at])
    return _insert_rows_sql(used), [row + tuple(e) for row, e in zip(rows, extra, strict=True)]
