"""Connection loss is not a lost lease.

* A claim whose answer was lost (committed on the server; the connection broke before the worker
  read it) is given back by the worker at once, under its own instance identity, so the job runs
  now instead of after its lease.
* An enqueue whose connection broke retries once on a fresh connection with the same id: no client
  error, one row.
* Backends terminated (``pg_terminate_backend``) again and again under load: no job waits a lease,
  no enqueue fails.

The answer is lost deterministically by a TCP proxy (``tcp_proxy.py``) that drops the server's
answer carrying a job id and closes the client's side only after the server has committed.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

import tenure
from tenure.errors import LeaseNotHeld

from ..conftest import PG_URL, empty_pg, require_pg
from .tcp_proxy import TcpProxy


def wait_until(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


# -- the store call, both engines ------------------------------------------------------------------


def test_release_lost_claims_gives_back_only_this_instance_s_unheld_leases(any_store):
    store = any_store
    for i in range(4):
        store.jobs.enqueue("k", id=f"j{i}")
    mine = store.jobs.claim_many("k", owner="w", limit=3, lease_ms=60_000, instance="me")
    theirs = store.jobs.claim("k", owner="w", lease_ms=60_000, instance="namesake")  # same owner
    held = mine[0].job.id
    released = store.jobs.release_lost_claims("me", keep=[held])
    assert sorted(released) == sorted(c.job.id for c in mine[1:])
    for c in mine[1:]:
        job = store.jobs.get(c.job.id)
        assert (job.state, job.attempts, job.lease_owner, job.lease_until) == ("pending", 0, None, None)
        with pytest.raises(LeaseNotHeld):  # the lost lease can never settle
            store.jobs.complete(c.lease, "late")
    assert store.jobs.get(held).state == "leased"  # the one its worker runs is kept
    assert store.jobs.get(theirs.job.id).state == "leased"  # another instance's never moves
    assert store.jobs.release_lost_claims("me", keep=[held]) == []
    again = store.jobs.claim_many("k", owner="w", limit=10, lease_ms=60_000)
    assert sorted(c.job.id for c in again) == sorted(c.job.id for c in mine[1:])
    assert all(c.job.attempts == 1 for c in again)  # the given-back attempt is not counted twice


# -- PostgreSQL: a connection that breaks ------------------------------------------------------------


@pytest.fixture
def pg():
    require_pg()
    empty_pg()
    store = tenure.connect(PG_URL)
    yield store
    store.close(grace=1)


def test_a_claim_whose_answer_was_lost_runs_at_once_not_after_its_lease(pg):
    with TcpProxy.for_url(PG_URL) as proxy:
        remote = tenure.connect(proxy.url(PG_URL))
        ran = []
        worker = remote.jobs.create_worker(
            {"lost": lambda p, ctx: ran.append(ctx.attempt)},
            lease=60,
            poll_interval=0.05,
            watch=False,
            maintenance=False,
        )
        worker.start()
        try:
            wait_until(lambda: worker.stats()["polls"] > 0, 10, "the worker polling")
            proxy.lose_answer_containing(b"lost-claim-1")
            pg.jobs.enqueue("lost", id="lost-claim-1")  # not through the proxy
            # The lease is 60 s: only a give-back makes this finish in seconds.
            wait_until(lambda: pg.jobs.get("lost-claim-1").state == "done", 10, "the job done")
            assert proxy.answers_lost == 1
            assert worker.stats()["claims_released"] == 1
            assert ran == [1]  # one run, and the lost claim's attempt was given back
            assert pg.jobs.get("lost-claim-1").attempts == 1
        finally:
            worker.stop()
            remote.close()


def test_an_enqueue_whose_connection_broke_is_retried_once_with_the_same_id(pg):
    with TcpProxy.for_url(PG_URL) as proxy:
        remote = tenure.connect(proxy.url(PG_URL))
        try:
            remote.jobs.counts()  # opened and migrated before the fault
            proxy.lose_answer_containing(b"enq-lost-1")
            assert remote.jobs.enqueue("k", {"x": 1}, id="enq-lost-1") == "enq-lost-1"
            proxy.lose_answer_containing(b"enq-many-lost-2")
            ids = remote.jobs.enqueue_many(
                [{"kind": "k", "id": "enq-many-lost-1"}, {"kind": "k", "id": "enq-many-lost-2"}]
            )
            assert ids == ["enq-many-lost-1", "enq-many-lost-2"]
            assert proxy.answers_lost == 2  # each insert committed and its answer was lost
            assert pg.jobs.counts()["pending"] == 3
        finally:
            remote.close()


def test_an_enqueue_whose_connection_broke_twice_is_retried_again_and_a_third_loss_reaches_the_caller(pg):
    """An enqueue is repeated up to twice (docs/guarantees.md, "Liveness"): two lost answers in a
    row still end in one job and no error; three reach the caller as a retriable TN0005, and the
    job exists once all the same (each repeat of a committed insert answers the existing id)."""
    with TcpProxy.for_url(PG_URL) as proxy:
        remote = tenure.connect(proxy.url(PG_URL))
        try:
            remote.jobs.counts()
            proxy.lose_answer_containing(b"enq-twice-1", times=2)
            assert remote.jobs.enqueue("k", {"x": 1}, id="enq-twice-1") == "enq-twice-1"
            assert proxy.answers_lost == 2
            proxy.lose_answer_containing(b"enq-thrice-1", times=3)
            with pytest.raises(tenure.errors.StoreUnavailable):
                remote.jobs.enqueue("k", {"x": 1}, id="enq-thrice-1")
            assert proxy.answers_lost == 5
            assert pg.jobs.get("enq-twice-1").state == "pending"
            assert pg.jobs.get("enq-thrice-1").state == "pending"
            assert pg.jobs.counts()["pending"] == 2
        finally:
            remote.close()


def _terminate_backends(stop: threading.Event, killed: list[int]) -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        while not stop.is_set():
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = 'tenure' AND pid <> pg_backend_pid()"
            ).fetchall()
            killed.append(len(rows))
            time.sleep(0.2)  # every connection, five times a second: each round catches calls mid-flight


@pytest.mark.timeout(120)
def test_terminated_backends_under_load_no_job_waits_a_lease_and_no_enqueue_fails(pg):
    n_jobs = 300
    lease_ms = 60_000  # a job that waited out a lease would blow the 30 s budget below
    done = []
    workers = [
        pg.jobs.create_worker(
            {"load": lambda p, ctx: done.append(p["n"])},
            concurrency=8,
            lease_ms=lease_ms,
            poll_interval=0.05,
            maintenance=False,
        )
        for _ in range(2)
    ]
    for w in workers:
        w.start()
    stop, killed, errors = threading.Event(), [], []
    killer = threading.Thread(target=_terminate_backends, args=(stop, killed), daemon=True)
    killer.start()
    try:
        t0 = time.monotonic()
        for i in range(n_jobs):
            try:
                pg.jobs.enqueue("load", {"n": i}, id=f"load-{i:04d}")
            except Exception as exc:  # noqa: BLE001 - what the test counts
                errors.append(exc)
            time.sleep(0.01)
        time.sleep(0.5)
        stop.set()
        killer.join()
        assert errors == [], f"enqueue errors reached the client: {errors[:3]}"
        assert sum(killed) > 40, "the backends were not terminated often enough to test anything"
        wait_until(lambda: pg.jobs.counts()["done"] == n_jobs, 30, "every job done within half a lease")
        assert time.monotonic() - t0 < lease_ms / 1000 / 2
        assert sorted(set(done)) == list(range(n_jobs))
    finally:
        stop.set()
        for w in workers:
            w.stop()
