"""The outbox inside a SQLAlchemy 2 transaction: `enqueue(..., conn=session)` commits and rolls back
with the session, on both engines (spec 3.19)."""

from __future__ import annotations

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")
from sqlalchemy import create_engine, text  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

import tenure  # noqa: E402

from ..conftest import empty_pg  # noqa: E402


def _sa_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1) if url.startswith("postgresql") else url


@pytest.fixture
def setup(engine_url):
    store = tenure.connect(engine_url)
    store.jobs  # noqa: B018 - create tenure's tables
    engine = create_engine(_sa_url(engine_url))
    with engine.begin() as c:
        c.execute(text("DROP TABLE IF EXISTS sa_orders"))
        c.execute(text("CREATE TABLE sa_orders (id INTEGER PRIMARY KEY)"))
    yield store, engine
    engine.dispose()
    store.close()


@pytest.mark.parametrize("commit", [True, False])
def test_session_outbox_follows_the_session(setup, commit):
    store, engine = setup
    with Session(engine) as session:
        session.execute(text("INSERT INTO sa_orders (id) VALUES (7)"))
        job_id = store.jobs.enqueue("ship", {"order": 7}, conn=session)
        if commit:
            session.commit()
        else:
            session.rollback()
    with engine.connect() as c:
        orders = c.execute(text("SELECT count(*) FROM sa_orders")).scalar()
    job = store.jobs.get(job_id)
    if commit:
        assert orders == 1 and job is not None and job.payload == {"order": 7}
    else:
        assert orders == 0 and job is None


def test_connection_outbox_bulk_rolls_back(setup):
    store, engine = setup
    with engine.connect() as c:
        trans = c.begin()
        c.execute(text("INSERT INTO sa_orders (id) VALUES (8)"))
        ids = store.jobs.enqueue_many([{"kind": "ship", "payload": {"n": i}} for i in range(3)], conn=c)
        trans.rollback()
    assert all(store.jobs.get(i) is None for i in ids)
    assert store.jobs.counts()["pending"] == 0


def _other_database(engine_url: str, tmp_path) -> str:
    """A second database on the same server (PostgreSQL) or another file (SQLite), with tenure's
    tables in it, so only the check can tell it apart from the store's own."""
    if engine_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path}/other.db"
    import psycopg

    base, dbname = engine_url.split("?", 1)[0].rsplit("/", 1)
    other = f"{dbname}_outbox_other"  # beside the session's database, dropped with it
    with psycopg.connect(engine_url, autocommit=True) as c:
        if c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (other,)).fetchone() is None:
            try:
                c.execute(f'CREATE DATABASE "{other}"')
            except psycopg.errors.DuplicateDatabase:
                pass
    return f"{base}/{other}"


def test_conn_on_another_database_is_refused_and_nothing_is_written(setup, engine_url, tmp_path):
    """conn= bound to ANOTHER database is a coded error (TN1010), on the session and on the raw
    connection, for enqueue, enqueue_many and get; the store's own database is untouched."""
    store, _ = setup
    other_url = _other_database(engine_url, tmp_path)
    if not other_url.startswith("sqlite"):
        empty_pg(other_url)  # a SQLite one is a fresh file
    other_store = tenure.connect(other_url)
    other_store.jobs  # noqa: B018 - tenure's tables exist there too: only the check refuses
    other = create_engine(_sa_url(other_url))
    try:
        with Session(other) as session:
            with pytest.raises(tenure.errors.ForeignConnection) as info:
                store.jobs.enqueue("ship", {"order": 1}, conn=session)
            assert info.value.code == "TN1010"
            with pytest.raises(tenure.errors.ForeignConnection):
                store.jobs.enqueue_many([{"kind": "ship"}], conn=session)
            with pytest.raises(tenure.errors.ForeignConnection):
                store.jobs.get("00000000-0000-0000-0000-000000000000", conn=session)
            session.commit()
        assert store.jobs.counts()["pending"] == 0
        assert other_store.jobs.counts()["pending"] == 0
        # the store's own database through SQLAlchemy is still accepted
        with Session(setup[1]) as session:
            job_id = store.jobs.enqueue("ship", {"order": 2}, conn=session)
            assert store.jobs.get(job_id, conn=session).payload == {"order": 2}
            session.commit()
        assert store.jobs.get(job_id) is not None
    finally:
        other.dispose()
        other_store.close()


def test_application_errors_in_a_store_transaction_reach_the_caller_as_themselves(setup):
    """The application's IntegrityError (its own SQL through tx.execute) and its own exceptions
    leave store.transaction() unchanged, not as StorageError; the block is rolled back."""
    store, _ = setup
    ph = "?" if store.dialect == "sqlite" else "%s"
    with store.transaction() as tx:
        tx.execute(f"INSERT INTO sa_orders (id) VALUES ({ph})", (1,))
    driver_integrity = (__import__("sqlite3").IntegrityError if store.dialect == "sqlite"
                        else __import__("psycopg").errors.UniqueViolation)
    with pytest.raises(driver_integrity) as info:
        with store.transaction() as tx:
            kept = tx.jobs.enqueue("ship", {"order": 1})
            tx.execute(f"INSERT INTO sa_orders (id) VALUES ({ph})", (1,))
    assert not isinstance(info.value, tenure.errors.TenureError)
    assert store.jobs.get(kept) is None  # rolled back with the block

    class Refused(Exception):
        pass

    with pytest.raises(Refused):
        with store.transaction() as tx:
            gone = tx.jobs.enqueue("ship", {"order": 2})
            raise Refused("the application changed its mind")
    assert store.jobs.get(gone) is None
    # tenure's own statements still answer coded errors inside the block
    with pytest.raises(tenure.errors.InvalidArgument):
        with store.transaction() as tx:
            tx.jobs.enqueue("ship", {"order": 3}, max_attempts=0)
