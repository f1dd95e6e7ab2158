"""Fixtures for the worker tests (spec §6 and the task API).

``any_store`` (injected clock and random) and ``live_store`` (real clock) come from
``tests/conftest.py`` and run once per engine. Here: ``engine_url`` again, with the same meaning,
but emptying the PostgreSQL database through one session-wide store instead of opening (and
migrating, and pooling) a new one per test; another store over the same database (another
process's view); and a worker factory whose workers are always stopped at teardown.
"""

from __future__ import annotations

import pytest

import tenure
from tests.conftest import PG_URL, require_pg


@pytest.fixture(scope="session")
def _pg_reset():
    """Empties tenure's PostgreSQL tables between tests through one session-wide connection, with
    DELETE (milliseconds for test-sized tables; a TRUNCATE of every table costs ~0.3 s)."""
    holder: list = []

    import psycopg

    def empty(conn) -> None:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename LIKE 'tenure%%' AND tablename <> 'tenure_migrations' ORDER BY tablename")]
        with conn.transaction():
            for table in tables:
                conn.execute(f'DELETE FROM "{table}"')

    def reset() -> None:
        if not holder:
            s = tenure.connect(PG_URL)
            s.jobs  # noqa: B018 - migrate
            s.close()
            holder.append(psycopg.connect(PG_URL, autocommit=True))
        try:
            empty(holder[0])
        except psycopg.OperationalError:  # another test may have terminated every backend
            holder[0].close()
            holder[0] = psycopg.connect(PG_URL, autocommit=True)
            empty(holder[0])

    yield reset
    for conn in holder:
        conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
def engine_url(request, tmp_path, _pg_reset) -> str:
    """A store URL on each engine; the PostgreSQL database is emptied first."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/tenure.db"
    require_pg()
    _pg_reset()
    return PG_URL


@pytest.fixture
def other_store(engine_url, clock):
    """``other_store(**connect_kwargs)``: another store on the same database, by default with the
    same injected clock (pass ``clock=None`` for the real one)."""
    opened = []

    def _open(**kwargs):
        kwargs.setdefault("clock", clock)
        s = tenure.connect(engine_url, **kwargs)
        opened.append(s)
        return s

    yield _open
    for s in opened:
        try:
            s.close(grace=0.5)
        except Exception:  # noqa: BLE001 - a test may leave handlers behind on purpose
            pass


@pytest.fixture
def make_worker():
    """``make_worker(store, handlers, **options)``: a worker (not started) stopped at teardown."""
    made = []

    def _make(store, handlers, **options):
        w = store.jobs.create_worker(handlers, **options)
        made.append(w)
        return w

    yield _make
    for w in made:
        w.stop(grace=0.5)
