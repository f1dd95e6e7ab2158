"""Fixtures for the queue tests. Every test runs on SQLite and PostgreSQL; ``store``
has the injected clock and random, ``other`` is a second store on the same database (what another
process sees).

``engine_url`` overrides the root fixture only to empty PostgreSQL faster (DELETE on one kept
connection instead of a store open + TRUNCATE per test), which keeps this directory within its
time budget; it still skips (or, under CI, fails) loudly without a server.
"""

from __future__ import annotations

import pytest

import tenure
from tests.conftest import PG_URL, require_pg

_pg: dict[str, object] = {}


def _empty_pg() -> None:
    import psycopg

    conn = _pg.get("conn")
    if conn is None or conn.closed:
        # First use: make sure tenure's tables exist and are migrated, then keep a connection.
        s = tenure.connect(PG_URL)
        s.jobs  # noqa: B018 - migrate
        s.close()
        conn = _pg["conn"] = psycopg.connect(PG_URL, autocommit=True)
        _pg["tables"] = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "AND table_name LIKE 'tenure%' AND table_name <> 'tenure_migrations' ORDER BY table_name")]
    try:
        with conn.transaction():
            for table in _pg["tables"]:
                conn.execute(f"DELETE FROM {table}")
    except psycopg.OperationalError:  # the server restarted under the kept connection: once more
        conn.close()
        _pg.pop("conn")
        _empty_pg()


@pytest.fixture(params=["sqlite", "postgres"])
def engine_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/tenure.db"
    require_pg()
    _empty_pg()
    return PG_URL


@pytest.fixture
def store(any_store):
    return any_store


@pytest.fixture
def other(engine_url, clock, rand):
    s = tenure.connect(engine_url, clock=clock, random=rand)
    s.jobs  # noqa: B018 - open now
    yield s
    s.close()
