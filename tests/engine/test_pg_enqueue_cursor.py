"""A root enqueue on PostgreSQL runs its INSERT on the first of its pooled connection's reusable
cursors (``engine._stamp_new``, ``session._cursor``): the one set the claim and settle path uses,
not a cursor of its own beside it, nor one built per call. The outbox form (``conn=``, a
connection tenure did not open) builds one. Both store the same row."""

from __future__ import annotations

import psycopg
import pytest
from tests.conftest import PG_URL
from tests.engine import _one_conn

from tenure.engine.postgres.session import REUSED_CURSORS

one_conn_store = pytest.fixture(_one_conn.one_conn_store)
_pooled = _one_conn.pooled


def test_root_enqueue_runs_on_the_first_of_the_connections_reused_cursors(one_conn_store):
    store = one_conn_store
    conn = _pooled(store)
    cursors = conn._tenure_cursors
    assert len(cursors) == REUSED_CURSORS and not hasattr(conn, "_tenure_cursor")  # one mechanism
    assert all(c.statusmessage is None for c in cursors)
    first = store.jobs.enqueue("k", {"i": 1})
    assert cursors[0].statusmessage == "INSERT 0 1"
    assert [c.statusmessage for c in cursors[1:]] == [None] * (REUSED_CURSORS - 1)
    second = store.jobs.enqueue("k", {"i": 2}, queue="q2", priority=3, delay=5)
    assert _pooled(store) is conn and conn._tenure_cursors is cursors
    assert cursors[0].statusmessage == "INSERT 0 1"
    assert [store.jobs.get(j).payload for j in (first, second)] == [{"i": 1}, {"i": 2}]
    assert cursors[0].statusmessage == "SELECT 1"  # get shares it


def test_enqueues_between_claims_and_settlements_on_the_shared_cursor(one_conn_store):
    # cursor 0 answers the settlements of a settle-and-claim pipeline and the enqueues between
    # them: each reads its answer in full before the next statement is sent on it.
    store = one_conn_store
    jobs = store.jobs
    conn = _pooled(store)
    cursors = conn._tenure_cursors
    ids = [jobs.enqueue("k", i) for i in range(3)]
    got = jobs.claim_many(["k"], owner="w", limit=2, lease_ms=60_000)
    ids.append(jobs.enqueue("k", 3))
    assert cursors[0].statusmessage == "INSERT 0 1"
    errors, more = jobs.complete_and_claim([(c.lease, None) for c in got], ["k"], owner="w", limit=5,
                                           lease_ms=60_000)
    assert errors == [None, None] and cursors[0].statusmessage == "SELECT 2"
    ids.append(jobs.enqueue("k", 4))
    assert jobs.complete_many([(c.lease, None) for c in more]) == [None, None]
    assert _pooled(store) is conn and conn._tenure_cursors is cursors
    assert [jobs.get(j).state for j in ids] == ["done"] * 4 + ["pending"]
    assert jobs.get(ids[-1]).payload == 4


def test_reused_cursor_and_outbox_store_the_same_row(one_conn_store):
    store = one_conn_store
    options = {"queue": "mail", "priority": 2, "max_attempts": 4, "timeout": 3, "tags": ["a"],
               "meta": {"m": 1}, "group_key": "g"}
    pooled = store.jobs.enqueue("k", {"x": 1}, **options)
    with psycopg.connect(PG_URL, autocommit=False) as own:
        assert not hasattr(own, "_tenure_cursors")
        adopted = store.jobs.enqueue("k", {"x": 1}, conn=own, **options)
        own.commit()
    a, b = store.jobs.get(pooled), store.jobs.get(adopted)
    skip = {"id", "created_at", "updated_at", "run_at"}
    fields = [f for f in type(a).__dataclass_fields__ if f not in skip]
    assert {f: getattr(a, f) for f in fields} == {f: getattr(b, f) for f in fields}
    assert (a.queue, a.priority, a.max_attempts, a.group_key, a.meta) == ("mail", 2, 4, "g", {"m": 1})
    assert list(a.tags) == ["a"]


def test_the_cursors_die_with_their_connection(one_conn_store):
    store = one_conn_store
    conn = _pooled(store)
    old = conn._tenure_cursors
    store.jobs.enqueue("k", 1)
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
    job = store.jobs.enqueue("k", 2)  # retried on a fresh connection with fresh cursors
    assert store.jobs.get(job).payload == 2
    fresh = _pooled(store)
    assert fresh is not conn and fresh._tenure_cursors is not old
    assert all(c.connection is fresh for c in fresh._tenure_cursors)
