"""A claim on PostgreSQL is ONE round trip to the server: its transaction's ``BEGIN``, the
statements and the ``COMMIT`` go out under one Sync (``engine/postgres/conn.py::_pipelined``).
psycopg's ``transaction()`` inside a pipeline made it four (a sync after ``BEGIN``, before and
after ``COMMIT``, and the pipeline's own), each a wake-up of the server process: on a loaded host
the largest part of an idle worker's enqueue-to-start latency after the two fsyncs. The count is
read from libpq's protocol trace, not from a clock. And the one trip is still one transaction:
an error in it, or an exception raised in the block, commits nothing."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.pq import Trace, TransactionStatus
from tests.conftest import PG_URL, require_pg
from tests.engine import _one_conn

from tenure.engine.postgres.conn import _pipelined

pytestmark = pytest.mark.postgres


@pytest.fixture
def one_conn_store():
    for store in _one_conn.one_conn_store():
        store._jobs.claim_many(["warm"], owner="w", limit=1)  # its once-a-second sweep (cancel_abandoned) done
        yield store


_pooled = _one_conn.pooled


def _syncs(conn: psycopg.Connection, tmp_path, call) -> list[str]:
    """The protocol messages the client sent during ``call()`` (libpq's trace)."""
    path = tmp_path / "pq.trace"
    with open(path, "w") as f:
        conn.pgconn.trace(f.fileno())
        conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
        try:
            call()
        finally:
            conn.pgconn.untrace()
    sent = [line.split("\t") for line in path.read_text().splitlines()]
    return [parts[2] for parts in sent if len(parts) > 2 and parts[0] == "F" and parts[2] == "Sync"]


def test_a_claim_that_leases_a_job_is_one_round_trip(one_conn_store, tmp_path):
    store = one_conn_store
    conn = _pooled(store)
    for i in range(3):
        store.jobs.enqueue("k", {"i": i})
    got: list = []
    syncs = _syncs(conn, tmp_path, lambda: got.extend(
        store._jobs.claim_many(["k"], owner="w", limit=2)))
    assert len(got) == 2
    assert len(syncs) == 1, syncs
    # committed: another connection sees the leases
    with psycopg.connect(PG_URL, autocommit=True) as other:
        leased = other.execute("SELECT count(*) FROM tenure_jobs WHERE state = 'leased'").fetchone()
    assert leased == (2,)
    assert conn.info.transaction_status == TransactionStatus.IDLE


def test_a_settle_and_claim_is_one_round_trip(one_conn_store, tmp_path):
    store = one_conn_store
    conn = _pooled(store)
    store.jobs.enqueue("k", {"i": 1})
    store.jobs.enqueue("k", {"i": 2})
    (first,) = store._jobs.claim_many(["k"], owner="w", limit=1)
    out: list = []
    syncs = _syncs(conn, tmp_path, lambda: out.append(store._jobs.complete_and_claim(
        [(first.lease, None)], ["k"], owner="w", limit=4, lease_ms=60_000)))
    errors, claims = out[0]
    assert errors == [None] and len(claims) == 1
    assert len(syncs) == 1, syncs
    assert store.jobs.get(first.job.id).state == "done"


def _count(table: str) -> int:
    with psycopg.connect(PG_URL, autocommit=True) as other:
        return other.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]


@pytest.fixture
def scratch():
    require_pg()
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute("DROP TABLE IF EXISTS tenure_trip_scratch")
        admin.execute("CREATE TABLE tenure_trip_scratch (x int)")
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        yield conn
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute("DROP TABLE tenure_trip_scratch")


def test_the_one_trip_commits_what_it_ran(scratch):
    with _pipelined(scratch):
        scratch.execute("INSERT INTO tenure_trip_scratch VALUES (1)")
        cur = scratch.execute("INSERT INTO tenure_trip_scratch VALUES (2) RETURNING x")
    assert cur.fetchall() == [(2,)]
    assert scratch.info.transaction_status == TransactionStatus.IDLE
    assert _count("tenure_trip_scratch") == 2


def test_an_error_in_the_trip_commits_nothing(scratch):
    with pytest.raises(psycopg.errors.DivisionByZero):
        with _pipelined(scratch):
            scratch.execute("INSERT INTO tenure_trip_scratch VALUES (1)")
            scratch.execute("SELECT 1 / 0")
            scratch.execute("INSERT INTO tenure_trip_scratch VALUES (2)")
    assert scratch.info.transaction_status == TransactionStatus.IDLE  # usable again
    assert _count("tenure_trip_scratch") == 0
    scratch.execute("INSERT INTO tenure_trip_scratch VALUES (3)")
    assert _count("tenure_trip_scratch") == 1


def test_an_exception_raised_in_the_block_commits_nothing(scratch):
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with _pipelined(scratch):
            scratch.execute("INSERT INTO tenure_trip_scratch VALUES (1)")
            raise Boom
    assert scratch.info.transaction_status == TransactionStatus.IDLE
    assert _count("tenure_trip_scratch") == 0


def test_inside_the_callers_transaction_it_commits_nothing_itself(scratch):
    with scratch.transaction() as tx:
        with _pipelined(scratch):
            scratch.execute("INSERT INTO tenure_trip_scratch VALUES (1)")
        assert _count("tenure_trip_scratch") == 0  # the caller's transaction is still open
        tx.connection.execute("SELECT 1")
    assert _count("tenure_trip_scratch") == 1


def _claim_plans(conn: psycopg.Connection) -> list[tuple[int, int]]:
    """(generic_plans, custom_plans) of each claim statement prepared on ``conn``'s session."""
    return [tuple(r) for r in conn.execute(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
        "WHERE statement LIKE '%%FOR UPDATE OF j SKIP LOCKED%%' ORDER BY prepare_time").fetchall()]


def test_the_claim_is_planned_once_per_connection(one_conn_store):
    """A fresh connection's claims are the slow ones (each planned: ~1 ms idle, several on a
    loaded host). The claim is prepared at its first use and runs the generic plan from then on,
    the plan the server would settle on after its 5 custom ones anyway."""
    store = one_conn_store
    conn = _pooled(store)
    for i in range(4):
        store.jobs.enqueue("k", {"i": i})
    assert len(store._jobs.claim_many(["k"], owner="w", limit=3)) == 3
    assert _claim_plans(conn) == [(1, 0), (1, 0)]  # the fixture's warm-up claim, then this one
    assert len(store._jobs.claim_many(["k"], owner="w", limit=3)) == 1
    assert store._jobs.claim_many(["k"], owner="w", limit=3) == []
    assert _claim_plans(conn) == [(1, 0), (3, 0)]


def test_a_claim_in_the_callers_transaction_leaves_its_plan_settings_alone(one_conn_store):
    """The generic-plan setting is the claim's own transaction's: a claim inside a transaction
    that is not tenure's (a connection lent with ``conn=``) neither sets it nor prepares."""
    store = one_conn_store
    store.jobs.enqueue("k", {"i": 1})
    with psycopg.connect(PG_URL, autocommit=False) as own:
        session = store.engine.adopt(own)
        rows = session.job_claim(kinds=["k"], queues=None, owner="w", lease_ms=60_000, now=None, limit=1)
        assert len(rows) == 1
        assert own.execute("SHOW plan_cache_mode").fetchone() == ("auto",)
        assert _claim_plans(own) == []
        own.rollback()


@pytest.mark.parametrize("kinds,queues", [(["k"], None), (None, None), (["k"], ["a"]), (["k"], ["a", "b"])])
def test_the_claim_text_fits_psycopgs_statement_cache(kinds, queues):
    """psycopg converts a statement's placeholders once and caches it only for a text of at most
    MAX_CACHED_STATEMENT_LENGTH characters: a longer claim was re-parsed on every call (~0.1 ms of
    client CPU before it was sent). Its whitespace outside literals is squeezed to fit."""
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH

    from tenure.engine.postgres.session import _claim_sql

    for limit in (1, 4, 256, 10_000):
        sql = _claim_sql(kinds, queues, limit=limit, copies=queues is not None)
        assert len(sql) <= MAX_CACHED_STATEMENT_LENGTH, (len(sql), kinds, queues)
        assert "'pending', 'failed'" in sql  # literals and the spaces around them kept
