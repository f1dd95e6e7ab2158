"""Connection helpers every part of the PostgreSQL engine shares: a transaction of its own (or the
caller's), and a pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.pq import TransactionStatus


@contextmanager
def _pipelined(conn: psycopg.Connection) -> Iterator[None]:
    """The block's statements sent as one pipeline (one round trip, answered when the block
    ends: read the cursors after it), in a transaction of their own on an idle autocommit
    connection, else inside the caller's. An error surfaces when the block ends; the statements
    after the failed one are skipped and the transaction rolls back."""
    own = conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE
    with conn.pipeline():
        if own:
            with conn.transaction():
                yield
        else:
            yield


@contextmanager
def _atomic(conn: psycopg.Connection) -> Iterator[None]:
    """A transaction of its own on an autocommit connection, or nothing inside the caller's (an
    explicit one, or the implicit one of a non-autocommit connection the application lent us)."""
    if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        with conn.transaction():
            yield
    else:
        yield
