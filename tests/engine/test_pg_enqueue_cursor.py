"""A root enqueue on PostgreSQL runs its INSERT through its pooled connection's own reusable
cursor (``engine._stamp_new``), not a cursor built per call; the outbox form (``conn=``, a
connection tenure did not open) builds one. Both store the same row."""

from __future__ import annotations

import psycopg
import pytest
from tests.conftest import PG_URL
from tests.engine import _one_conn

one_conn_store = pytest.fixture(_one_conn.one_conn_store)
_pooled = _one_conn.pooled


def test_root_enqueue_runs_on_the_pooled_connections_own_cursor(one_conn_store):
    store = one_conn_store
    conn = _pooled(store)
    cur = conn._tenure_cursor
    store.jobs.get("warm")  # the cursor is not touched by other calls
    assert cur.statusmessage is None
    first = store.jobs.enqueue("k", {"i": 1})
    assert cur.statusmessage == "INSERT 0 1"
    second = store.jobs.enqueue("k", {"i": 2}, queue="q2", priority=3, delay=5)
    assert _pooled(store) is conn and conn._tenure_cursor is cur
    assert cur.statusmessage == "INSERT 0 1"
    assert [store.jobs.get(j).payload for j in (first, second)] == [{"i": 1}, {"i": 2}]


def test_reused_cursor_and_outbox_store_the_same_row(one_conn_store):
    store = one_conn_store
    options = {"queue": "mail", "priority": 2, "max_attempts": 4, "timeout": 3, "tags": ["a"],
               "meta": {"m": 1}, "group_key": "g"}
    pooled = store.jobs.enqueue("k", {"x": 1}, **options)
    with psycopg.connect(PG_URL, autocommit=False) as own:
        assert not hasattr(own, "_tenure_cursor")
        adopted = store.jobs.enqueue("k", {"x": 1}, conn=own, **options)
        own.commit()
    a, b = store.jobs.get(pooled), store.jobs.get(adopted)
    skip = {"id", "created_at", "updated_at", "run_at"}
    fields = [f for f in type(a).__dataclass_fields__ if f not in skip]
    assert {f: getattr(a, f) for f in fields} == {f: getattr(b, f) for f in fields}
    assert (a.queue, a.priority, a.max_attempts, a.group_key, a.meta) == ("mail", 2, 4, "g", {"m": 1})
    assert list(a.tags) == ["a"]


def test_a_cursor_dies_with_its_connection(one_conn_store):
    store = one_conn_store
    conn = _pooled(store)
    old = conn._tenure_cursor
    store.jobs.enqueue("k", 1)
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
    job = store.jobs.enqueue("k", 2)  # retried on a fresh connection with a fresh cursor
    assert store.jobs.get(job).payload == 2
    fresh = _pooled(store)
    assert fresh is not conn and fresh._tenure_cursor is not old
    assert fresh._tenure_cursor.connection is fresh
