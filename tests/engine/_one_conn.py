"""A PostgreSQL store whose pool holds exactly one connection, for tests that look at that
connection's own state (its reusable cursors, its protocol trace)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
from tests.conftest import PG_URL, empty_pg, require_pg

import tenure


def one_conn_store() -> Iterator[tenure.Store]:
    """Yield a migrated store on an emptied private database with ``pool_min = pool_max = 1``."""
    require_pg()
    empty_pg()
    store = tenure.connect(PG_URL + ("&" if "?" in PG_URL else "?") + "pool_max=1&pool_min=1")
    store.jobs  # noqa: B018 - migrate
    try:
        yield store
    finally:
        store.close()


def pooled(store: tenure.Store) -> psycopg.Connection:
    """The pool's one connection (taken and given back at once)."""
    pool = store.engine._live()
    conn = pool.getconn()
    pool.putconn(conn)
    return conn
