"""The SQLite bulk INSERT of jobs without a uniqueness key: one statement per
:data:`BULK_ROWS` rows, the rows a JSON array (:func:`Q.insert_rows`), and an answer per job
saying whether THIS call wrote it (:class:`~tenure.engine.rows.Inserted`)."""

from __future__ import annotations

import functools
import json
import operator
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..rows import Inserted, NewJob, PlainRow
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
    with _bulk_savepoint(conn):
        # rowcount, not total_changes: the latter also counts the queue-registry trigger's row.
        if sum(conn.execute(sql, (chunk,)).rowcount for chunk in chunks) == count:
            return None
        conn.execute("ROLLBACK TO tenure_bulk")
        return {row[0] for chunk in chunks for row in conn.execute(sql + "\nRETURNING id", (chunk,)).fetchall()}


@contextmanager
def _bulk_savepoint(conn: sqlite3.Connection) -> Iterator[None]:
    """The block runs under the savepoint ``tenure_bulk`` (the block may ``ROLLBACK TO`` it itself):
    an exception undoes every row the block wrote and propagates; however the block ends, the
    savepoint is released, so the caller's transaction, if any, goes on and nothing is committed
    here. Both bulk writers (:func:`_bulk_written`, :func:`insert_plain`) run under it."""
    if conn.isolation_level is not None and not conn.in_transaction:
        # A caller's connection in the driver's implicit-transaction mode (the outbox): its first
        # INSERT would have opened the caller's transaction. Open it here, or the savepoint would be
        # the outermost one and RELEASE would commit the rows behind the caller's back.
        conn.execute("BEGIN")
    conn.execute("SAVEPOINT tenure_bulk")
    try:
        yield
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


def insert_plain(conn: sqlite3.Connection, chunks: Iterable[Sequence[PlainRow]], templates: dict[str, NewJob],
                 now: int) -> bool:
    """``Session.job_insert_plain``: the rows of ``chunks``, each job's other columns those of its
    queue's template, as :data:`Q.INSERT` writes them, under a savepoint; True when all were
    written, else none (False). The rows of one queue and priority (usually all of them) go in
    one statement per :data:`BULK_ROWS` whose JSON rows hold only id, kind and payload, the rest
    bound once (each ``value ->> i`` costs a row ~0.7 µs: 3.4 µs a row in SQLite, against 5.7
    for the nine columns of :func:`_insert_rows`)."""
    groups: dict[tuple[str, int], list[PlainRow]] = {}
    for chunk in chunks:
        for row in chunk:
            key = (row[3], row[4])
            group = groups.get(key)
            if group is None:
                group = groups[key] = []
            group.append(row)
    if not groups:
        return True
    statements: list[tuple[str, tuple[Any, ...]]] = []
    count = 0
    for (queue, priority), rows in groups.items():
        t = templates[queue]
        used = tuple(i for i, o in enumerate(_OPTIONAL_OF(t)) if o is not None)
        values = [getattr(t, Q.INSERT_ROWS_OPTIONAL[i]) for i in used]
        if _BACKOFF in used:
            values[used.index(_BACKOFF)] = int(values[used.index(_BACKOFF)])
        fixed = (now, now + t.delay_ms if t.run_at is None else t.run_at, t.max_attempts, queue, priority, t.policy,
                 *values)
        sql = _insert_plain_sql(used)
        for i in range(0, len(rows), BULK_ROWS):
            statements.append((sql, (_dumps([r[:3] for r in rows[i:i + BULK_ROWS]]), *fixed)))
        count += len(rows)
    with _bulk_savepoint(conn):
        if sum(conn.execute(sql, params).rowcount for sql, params in statements) != count:
            conn.execute("ROLLBACK TO tenure_bulk")  # an id was present: none of them
            return False
        return True


@functools.lru_cache(maxsize=64)
def _insert_plain_sql(used: tuple[int, ...]) -> str:
    """:func:`insert_plain`'s statement: rows ``[id, kind, payload]`` in the JSON array ``?1``;
    ``?2`` the clock (created_at, updated_at), then run_at, max_attempts, queue, priority,
    policy and the optional columns ``used`` (indexes of Q.INSERT_ROWS_OPTIONAL), bound."""
    optional = [Q.INSERT_ROWS_OPTIONAL[i] for i in used]
    names = ", ".join(["run_at", "max_attempts", "queue", "priority", "policy", *optional])
    bound = ", ".join(f"?{3 + i}" for i in range(5 + len(optional)))
    return (f"INSERT INTO tenure_jobs (state, attempts, lease_generation, created_at, updated_at, id, kind, payload, "
            f"{names})\nSELECT 'pending', 0, 0, ?2, ?2, value ->> 0, value ->> 1, value ->> 2, {bound} "
            "FROM json_each(?1) WHERE true\nON CONFLICT DO NOTHING")
