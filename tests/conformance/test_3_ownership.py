"""spec §3: atomic claims under concurrency (3.1) and ownership — root calls, the
transactional outbox and transaction-scoped views (3.18-3.20, 3.22, D7).

3.21 (a worker created through tx.jobs) belongs to the worker suite.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter

import pytest

import tenure

from ._support import APP_TABLE, claim1, ph, refused


class Boom(Exception):
    """Raised inside ``with store.transaction()`` to roll it back."""


def _create_app_table(store):
    with store.transaction() as tx:
        tx.execute(f"create table if not exists {APP_TABLE} (id integer primary key)")


def _run(fn, *args, **kwargs):
    """Run ``fn`` on a daemon thread; return (thread, box with 'value' or 'error')."""
    started, box = threading.Event(), {}

    def body():
        started.set()
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    t = threading.Thread(target=body, daemon=True)
    t.start()
    assert started.wait(5)
    return t, box


# -- 3.1 ---------------------------------------------------------------------------------------------


def _drain_on_threads(stores, n_threads):
    barrier = threading.Barrier(n_threads)
    handed_out, errors = [], []
    lock = threading.Lock()

    def loop(i):
        jobs = stores[i % len(stores)].jobs
        barrier.wait(10)
        try:
            while (claim := jobs.claim(["k"], owner=f"t{i}")) is not None:
                with lock:
                    handed_out.append((claim.lease.job_id, claim.lease.generation, claim.lease.token))
                jobs.complete(claim.lease, {"by": f"t{i}"})
        except Exception as exc:  # noqa: BLE001 - asserted below
            errors.append(repr(exc))

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a claimer thread hung"
    return handed_out, errors


@pytest.mark.parametrize("sharing", ["one-store", "store-per-thread"])
def test_3_1_threads_never_share_an_attempt(store, open_store, sharing):
    """spec 3.1: threads draining one database: each (job_id, generation) is handed
    out once, tokens are unique, and every job is done exactly once."""
    n = 120
    for i in range(n):
        store.jobs.enqueue("k", id=f"j{i:03d}")
    stores = [store] if sharing == "one-store" else [store] + [open_store() for _ in range(3)]
    handed_out, errors = _drain_on_threads(stores, 4)
    assert errors == []
    attempts = [(job_id, gen) for job_id, gen, _ in handed_out]
    assert len(attempts) == len(set(attempts)) == n
    assert len({token for *_, token in handed_out}) == n
    assert Counter(job_id for job_id, _ in attempts) == Counter({f"j{i:03d}": 1 for i in range(n)})
    assert store.jobs.counts()["done"] == n


def test_3_1_processes_never_share_an_attempt(store, target):
    """spec 3.1: four processes drain one SQLite file with no external lock: each
    (job_id, generation) is handed out once and every job is done exactly once."""
    if target.engine != "sqlite":
        pytest.skip("the multi-process drain is specified on one SQLite file")
    n = 240
    for i in range(n):
        store.jobs.enqueue("k", id=f"p{i:03d}")
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    from ._mp_claimer import drain

    procs = [ctx.Process(target=drain, args=(target.url, f"proc{i}", barrier, out)) for i in range(4)]
    for p in procs:
        p.start()
    reports = []
    try:
        for _ in procs:
            reports.append(out.get(timeout=60))
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    errors = [(owner, error) for owner, _, error in reports if error]
    assert errors == []
    assert sum(1 for _, leases, _ in reports if leases) >= 2, "only one process ever claimed: no contention"
    handed_out = [(owner, *lease) for owner, leases, _ in reports for lease in leases]
    attempts = [(job_id, gen) for _, job_id, gen, _ in handed_out]
    assert len(attempts) == len(set(attempts)) == n
    assert len({token for *_, token in handed_out}) == n
    by_job = {job_id: owner for owner, job_id, _, _ in handed_out}
    assert sorted(by_job) == [f"p{i:03d}" for i in range(n)]
    assert store.jobs.counts()["done"] == n
    for job_id, owner in by_job.items():
        assert store.jobs.get(job_id).result == {"by": owner}


# -- 3.18 and D7 -----------------------------------------------------------------------------


def test_3_18_root_call_waits_for_app_transaction_and_survives_its_rollback(store, target):
    """spec 3.18: thread B's root enqueue, made while an unrelated app transaction
    is open, waits for it (SQLite: one writer) and never joins its rollback."""
    _create_app_table(store)
    with pytest.raises(Boom):
        with store.transaction() as tx:
            tx.execute(f"insert into {APP_TABLE} (id) values ({ph(store)})", (1,))
            t, box = _run(store.jobs.enqueue, "k", {"from": "B"}, id="b-job")
            t.join(0.3)
            if target.engine == "sqlite":
                assert t.is_alive(), "the root enqueue ran inside the open app transaction's window"
            raise Boom
    t.join(10)
    assert not t.is_alive(), "the root enqueue never finished after the rollback"
    assert "error" not in box, box
    assert box["value"] == "b-job"
    assert store.jobs.get("b-job").payload == {"from": "B"}
    assert target.app_count() == 0


def test_3_18_root_claim_and_settle_wait_too(store, target):
    """spec 3.18: a root claim and settlement made during an app transaction that
    rolls back land anyway (they were never part of it)."""
    _create_app_table(store)
    store.jobs.enqueue("k", id="j")

    def claim_and_complete():
        claim = store.jobs.claim(["k"], owner="B")
        store.jobs.complete(claim.lease, "B's result")
        return claim.lease.generation

    with pytest.raises(Boom):
        with store.transaction() as tx:
            tx.execute(f"insert into {APP_TABLE} (id) values ({ph(store)})", (1,))
            t, box = _run(claim_and_complete)
            t.join(0.3)
            if target.engine == "sqlite":
                assert t.is_alive()
            raise Boom
    t.join(10)
    assert box.get("value") == 1, box
    job = store.jobs.get("j")
    assert (job.state, job.result) == ("done", "B's result")


@pytest.mark.parametrize("call", ["enqueue", "claim", "get", "counts"])
def test_decision_7_root_call_inside_own_transaction_refused(open_store, target, call):
    """spec 3.18, D7: a root store.jobs call inside the same thread's open
    store.transaction() is refused at once with NestedRootCall (TN2071), pointing to tx.jobs,
    instead of waiting forever. The transaction stays usable inside the block, but will not
    commit: caught or not, the refusal rolls the block back (TN2071 at its end)."""
    s = open_store()
    calls = {
        "enqueue": lambda: s.jobs.enqueue("k", id="nested"),
        "claim": lambda: s.jobs.claim(["k"], owner="w"),
        "get": lambda: s.jobs.get("nested"),
        "counts": lambda: s.jobs.counts(),
    }

    def body():
        caught = None
        try:
            with s.transaction() as tx:
                try:
                    calls[call]()
                except Exception as exc:  # noqa: BLE001 - checked below
                    caught = exc
                finally:
                    tx.jobs.enqueue("k", id="via-tx")  # the transaction is still usable
        except tenure.errors.NestedRootCall as at_end:
            return caught, at_end
        return caught, None

    t, box = _run(body)
    t.join(5)
    if t.is_alive():
        open_store.opened.remove(s)  # deadlocked: do not try to close it at teardown
        pytest.fail(f"root {call}() inside the thread's own transaction deadlocked instead of refusing")
    assert "error" not in box, box
    exc, at_end = box["value"]
    assert getattr(exc, "code", None) == "TN2071", repr(exc)
    assert isinstance(exc, tenure.errors.NestedRootCall)
    assert "tx.jobs" in str(exc)
    assert getattr(at_end, "code", None) == "TN2071" and at_end.__cause__ is exc, repr(at_end)
    assert s.jobs.get("via-tx") is None  # rolled back with the block
    assert s.jobs.get("nested") is None


# -- 3.19 / 3.20 -------------------------------------------------------------------------------------


def test_3_19_outbox_commits_with_the_app_rows(store, target):
    """spec 3.19: tx.jobs.enqueue becomes visible with the commit, together with
    the app's row."""
    _create_app_table(store)
    with store.transaction() as tx:
        tx.execute(f"insert into {APP_TABLE} (id) values ({ph(store)})", (7,))
        job_id = tx.jobs.enqueue("ship", {"order": 7})
        assert tx.jobs.get(job_id).payload == {"order": 7}  # the scope reads its own write
    assert target.app_count() == 1
    job = store.jobs.get(job_id)
    assert (job.kind, job.payload, job.state) == ("ship", {"order": 7}, "pending")
    assert claim1(store.jobs, kinds=["ship"]).job.id == job_id


def test_3_19_outbox_vanishes_with_the_rollback(store, target):
    """spec 3.19: on rollback neither the app row nor the job exists."""
    _create_app_table(store)
    before = store.jobs.counts()
    with pytest.raises(Boom):
        with store.transaction() as tx:
            tx.execute(f"insert into {APP_TABLE} (id) values ({ph(store)})", (8,))
            tx.jobs.enqueue("ship", {"order": 8}, id="ship-8")
            raise Boom
    assert target.app_count() == 0
    assert store.jobs.get("ship-8") is None
    assert store.jobs.counts() == before
    assert store.jobs.claim(["ship"], owner="w") is None


def test_3_19_outbox_is_invisible_until_commit(store, target):
    """spec 3.19: while the transaction is open, a root reader (another thread)
    does not see the outbox job; after the commit it does."""
    with store.transaction() as tx:
        tx.jobs.enqueue("ship", id="ship-9")
        t, box = _run(store.jobs.get, "ship-9")
        t.join(0.3)
        seen_early = None if t.is_alive() else box.get("value", box.get("error"))
    t.join(10)
    assert seen_early is None, f"uncommitted outbox job was visible: {seen_early!r}"
    assert store.jobs.get("ship-9") is not None


@pytest.mark.parametrize("ending", ["commit", "rollback"])
def test_3_20_tx_view_refused_after_its_scope(store, ending):
    """spec 3.20: a tx.jobs view kept past its transaction is refused (TN2070)."""
    if ending == "commit":
        with store.transaction() as tx:
            view = tx.jobs
            view.enqueue("k", id="inside")
    else:
        with pytest.raises(Boom):
            with store.transaction() as tx:
                view = tx.jobs
                raise Boom
    before = store.jobs.counts()
    with refused("TN2070"):
        view.enqueue("k", id="after")
    with refused("TN2070"):
        view.get("inside")
    assert store.jobs.get("after") is None
    assert store.jobs.counts() == before


# -- 3.22 --------------------------------------------------------------------------------------------


def test_3_22_root_checkpoint_store_keeps_root_ownership(store, target):
    """spec 3.22: a checkpoint store created from root store.jobs stays root-owned:
    a save from another thread during an open app transaction waits (SQLite) and survives that
    transaction's rollback."""
    if not hasattr(store.jobs, "checkpoints"):
        pytest.skip("store.jobs.checkpoints does not exist")
    _create_app_table(store)
    store.jobs.enqueue("k", id="j")
    lease = claim1(store.jobs).lease
    cp = store.jobs.checkpoints(lease)
    with pytest.raises(Boom):
        with store.transaction() as tx:
            tx.execute(f"insert into {APP_TABLE} (id) values ({ph(store)})", (1,))
            t, box = _run(cp.save, "a", {"v": 1})
            t.join(0.3)
            if target.engine == "sqlite":
                assert t.is_alive()
            raise Boom
    t.join(10)
    assert "error" not in box, box
    assert cp.load() == {"a": {"v": 1}}


def test_3_22_root_checkpoint_save_inside_own_transaction_refused(store):
    """spec 3.22 with D7: a root checkpoint store does not switch into the
    calling thread's transaction: its save there is refused (TN2071) rather than joined."""
    store.jobs.enqueue("k", id="j")
    lease = claim1(store.jobs).lease
    cp = store.jobs.checkpoints(lease)

    def body():
        with pytest.raises(Boom):
            with store.transaction():
                try:
                    cp.save("a", 1)
                except Exception as exc:  # noqa: BLE001 - checked below
                    box["exc"] = exc
                raise Boom

    box = {}
    t, run_box = _run(body)
    t.join(5)
    assert not t.is_alive(), "a root checkpoint save inside the thread's own transaction deadlocked"
    assert "error" not in run_box, run_box
    assert getattr(box.get("exc"), "code", None) == "TN2071", box
    assert cp.load() == {}


def test_3_22_tx_scoped_checkpoint_store_pinned_to_its_transaction(store):
    """spec 3.22: a tx-scoped checkpoint save is gone after the rollback, and the
    store is refused (TN2070) once its scope has ended."""
    with store.transaction() as tx:
        has_tx_checkpoints = hasattr(tx.jobs, "checkpoints")
    if not has_tx_checkpoints:
        pytest.skip("tx.jobs has no checkpoints(): tenure's tx view is enqueue/get only")
    store.jobs.enqueue("k", id="j")
    lease = claim1(store.jobs).lease
    with pytest.raises(Boom):
        with store.transaction() as tx:
            cp = tx.jobs.checkpoints(lease)
            cp.save("a", 1)
            raise Boom
    assert store.jobs.checkpoints(lease).load() == {}
    with refused("TN2070"):
        cp.save("b", 2)


def test_3_1_two_stores_claim_different_jobs(store, open_store):
    """spec 3.1: two stores (two connections) on one database each claim a
    different job with no coordination beyond the database itself."""
    store.jobs.enqueue("k", id="a")
    store.jobs.enqueue("k", id="b")
    other = open_store()
    first = claim1(store.jobs, owner="one")
    second = claim1(other.jobs, owner="two")
    assert {first.job.id, second.job.id} == {"a", "b"}
    assert other.jobs.claim(["k"], owner="two") is None
    other.jobs.complete(second.lease, "two")
    store.jobs.complete(first.lease, "one")
    assert store.jobs.counts()["done"] == 2
