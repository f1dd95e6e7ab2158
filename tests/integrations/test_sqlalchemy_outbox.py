"""The outbox inside a SQLAlchemy 2 transaction: `enqueue(..., conn=session)` commits and rolls back
with the session, on both engines (issue 11; checklist 3.19)."""

from __future__ import annotations

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")
from sqlalchemy import create_engine, text  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

import tenure  # noqa: E402


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
