"""PostgreSQL's queue registry trigger (migrations 0003, 0023) writes only when an inserted job
names a queue not yet registered: an enqueue into a known queue reads tenure_queues and never
takes its row-exclusive lock (the INSERT ... ON CONFLICT DO NOTHING it ran before inserted
nothing at ~30-60 us of server time; docs/performance.md). A new queue is registered as before."""

from __future__ import annotations

import psycopg
import pytest
from tests.conftest import PG_URL
from tests.engine import _one_conn

one_conn_store = pytest.fixture(_one_conn.one_conn_store)

_MY_LOCKS = ("SELECT mode FROM pg_locks WHERE pid = pg_backend_pid() "
             "AND relation = 'tenure_queues'::regclass ORDER BY mode")


def test_an_enqueue_into_a_known_queue_only_reads_the_registry(one_conn_store):
    store = one_conn_store
    store.jobs.enqueue("k", 0, queue="mail")  # registers "mail"
    with psycopg.connect(PG_URL) as own:  # the outbox: the enqueue's locks held until commit
        store.jobs.enqueue("k", 1, conn=own, queue="mail")
        store.jobs.enqueue_many([{"kind": "k", "payload": i, "queue": "mail"} for i in range(3)], conn=own)
        assert [m for (m,) in own.execute(_MY_LOCKS)] == ["AccessShareLock"]
        own.commit()
    assert sorted(store.jobs.get(j.id).payload for j in store.jobs.page(queue="mail").items) == [0, 0, 1, 1, 2]


def test_a_new_queue_is_still_registered(one_conn_store):
    store = one_conn_store
    store.jobs.enqueue("k", 0, queue="mail")
    with psycopg.connect(PG_URL) as own:
        store.jobs.enqueue_many([{"kind": "k", "queue": q} for q in ("mail", "new-b", "new-a")], conn=own)
        assert "RowExclusiveLock" in [m for (m,) in own.execute(_MY_LOCKS)]
        own.commit()
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        names = [n for (n,) in admin.execute("SELECT name FROM tenure_queues ORDER BY name")]
    assert names == ["mail", "new-a", "new-b"]
