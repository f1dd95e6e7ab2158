"""The claim and settle path on PostgreSQL runs on its pooled connection's own reusable cursors
(``engine._stamp_new``, ``session._cursor``), not on a cursor built per statement: a
settle-and-claim pipelines the completions, the limits and the claim on three of them, and a
lone settlement and ``get`` reuse the first. A connection tenure did not open builds its own."""

from __future__ import annotations

import psycopg
import pytest
from tests.conftest import PG_URL
from tests.engine import _one_conn

from tenure.engine.postgres.session import REUSED_CURSORS, PostgresSession
from tenure.engine.rows import Settle

one_conn_store = pytest.fixture(_one_conn.one_conn_store)
_pooled = _one_conn.pooled


def test_settle_and_claim_run_on_the_pooled_connections_own_cursors(one_conn_store):
    store = one_conn_store
    jobs = store.jobs
    ids = [jobs.enqueue("k", {"i": i}) for i in range(6)]
    conn = _pooled(store)
    cursors = conn._tenure_cursors
    # the enqueues ran on the first (tests/engine/test_pg_enqueue_cursor.py), a claim alone on the third
    assert len(cursors) == REUSED_CURSORS and [c.statusmessage for c in cursors] == ["INSERT 0 1", None, None]
    first = jobs.claim_many(["k"], owner="w", limit=2, lease_ms=60_000)
    assert cursors[2].statusmessage == "SELECT 2" and cursors[0].statusmessage == "INSERT 0 1"
    errors, more = jobs.complete_and_claim([(c.lease, None) for c in first], ["k"], owner="w", limit=3,
                                           lease_ms=60_000)
    assert errors == [None, None] and len(more) == 3
    assert cursors[0].statusmessage == "SELECT 2" and cursors[2].statusmessage == "SELECT 3"
    assert jobs.complete_many([(c.lease, {"r": 1}) for c in more]) == [None] * 3
    assert cursors[0].statusmessage == "SELECT 3"
    assert _pooled(store) is conn and conn._tenure_cursors is cursors
    assert jobs.get(first[0].job.id).state == "done"
    assert cursors[0].statusmessage == "SELECT 1"
    states = {j: jobs.get(j).state for j in ids}
    assert sorted(states.values()) == ["done"] * 5 + ["pending"]
    assert jobs.get(more[0].job.id).result == {"r": 1}


def test_an_adopted_connection_settles_and_claims_on_cursors_of_its_own(one_conn_store):
    store = one_conn_store
    a, b = store.jobs.enqueue("k", 1), store.jobs.enqueue("k", 2)
    with psycopg.connect(PG_URL, autocommit=True) as own:
        assert not hasattr(own, "_tenure_cursors")
        s = PostgresSession(own)
        got = s.job_claim(kinds=None, queues=None, owner="w", lease_ms=60_000, now=None, limit=1)
        assert [r.id for r in got] == [a]
        done = s.job_complete_and_claim([Settle(a, got[0].lease_token)], None, kinds=None, queues=None,
                                         owner="w", lease_ms=60_000, limit=1)
        assert done.settled == {a} and [r.id for r in done.claimed] == [b]
        assert s.job_get(a).state == "done"
