"""Connection helpers every part of the PostgreSQL engine shares: a transaction of its own (or the
caller's), and a pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.pq import TransactionStatus

BEGIN = "BEGIN"
COMMIT = "COMMIT"


@contextmanager
def _pipelined(conn: psycopg.Connection) -> Iterator[None]:
    """The block's statements sent as one pipeline, answered when the block ends (read the
    cursors after it), in a transaction of their own on an idle autocommit connection, else
    inside the caller's. ONE round trip either way: the transaction of its own is a ``BEGIN``
    and a ``COMMIT`` queued around the block, under the pipeline's one Sync (psycopg's
    ``transaction()`` syncs after ``BEGIN``, before ``COMMIT`` and after it: four trips, each a
    wake-up of the server process, which a loaded host pays in milliseconds). An error surfaces
    when the block ends; the statements after the failed one are skipped and the transaction
    rolls back. An exception raised in the block commits nothing: the ``COMMIT`` is never
    queued, and the transaction is rolled back before the exception goes on."""
    own = conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE
    if not own:
        with conn.pipeline():
            yield
        return
    try:
        with conn.pipeline():
            conn.execute(BEGIN)
            yield
            conn.execute(COMMIT)
    except BaseException:
        if not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
            try:
                conn.rollback()
            except Exception:  # noqa: BLE001 - the block's own error is the one to raise
                pass
        raise


@contextmanager
def _atomic(conn: psycopg.Connection) -> Iterator[None]:
    """A transaction of its own on an autocommit connection, or nothing inside the caller's (an
    explicit one, or the implicit one of a non-autocommit connection the application lent us)."""
    if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        with conn.transaction():
            yield
    else:
        yield
