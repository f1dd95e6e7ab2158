"""One claim takes up to ``claim_batch`` jobs (256 by default): at ``tenure worker``'s PostgreSQL
default of 256 slots a settle-and-claim claims every slot its batch frees in the same transaction,
instead of 96 and a second claim by the dispatcher. Exactly-once and spec 6.3 hold at that size."""

from __future__ import annotations

import queue
import threading
import time
import types
from collections import Counter

from tenure.worker import core
from tenure.worker.state import MAX_CLAIM_BATCH
from tests.worker._wk import wait_for


def _stalled(store, worker) -> str:
    """What a drain that stopped progressing leaves to read: the jobs by state, the next runnable
    ones (state, run_at, lease) against the store's clock, the worker's counters, and where its
    in-flight attempts sit (by lifecycle state: SETTLING ones wait for a settler) beside its slot
    accounting (reserved, credited)."""
    with store.transaction() as tx:
        head = list(tx.execute("SELECT state, queue, run_at, lease_until, lease_owner FROM tenure_jobs "
                               "WHERE state IN ('pending', 'leased') ORDER BY run_at LIMIT 3"))
    with worker._lock:
        states = Counter(a.state.value for a in worker._attempts.values())
        slots = " ".join(f"{k}={getattr(worker, '_' + k, None)}" for k in ("reserved", "credit", "backlog"))
    return (f"counts={store.jobs.counts()} now={store._now() or int(time.time() * 1000)} head={head} "
            f"stats={worker.stats()} in_flight={dict(states)} {slots}")

def test_a_claim_takes_up_to_256_free_slots(any_store, make_worker):
    assert MAX_CLAIM_BATCH == 256
    w = make_worker(any_store, {"k": lambda payload, ctx: None}, concurrency=300)
    assert w.claim_batch == 256
    w._reserved, w._credit, w._quarantine, w._attempts = 0, 0, None, {}
    assert w._reserve() == 256  # 96 (PostgreSQL's bucket) or 100 with the old cap
    w._reserved = 0


def test_256_slots_drain_every_job_once_and_never_run_more_than_256(any_store, make_worker):
    jobs = any_store.jobs
    n = 1500
    jobs.enqueue_many([{"kind": "k", "payload": {"i": i}} for i in range(n)])
    seen: list[int] = []
    peak = [0]
    done = threading.Event()
    sizes: list[int] = []
    claim_many, complete_and_claim = jobs.claim_many, jobs.complete_and_claim

    def spy_claim(*args, **kwargs):
        sizes.append(kwargs["limit"])
        return claim_many(*args, **kwargs)

    def spy_refill(*args, **kwargs):
        sizes.append(kwargs["limit"])
        return complete_and_claim(*args, **kwargs)

    jobs.claim_many, jobs.complete_and_claim = spy_claim, spy_refill  # the store underneath is real

    def handler(payload, ctx):
        seen.append(payload["i"])

    w = make_worker(any_store, {"k": handler}, concurrency=256, poll_interval=0.01)

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], w.stats()["in_flight"])
            time.sleep(0.0005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    w.start()
    try:
        deadline = time.monotonic() + 80  # below pytest's 120 s: a stall reports what the store holds
        while jobs.counts().get("done", 0) < n:
            assert time.monotonic() < deadline, _stalled(any_store, w)
            time.sleep(0.02)
    finally:
        done.set()
        watcher.join()
    assert w.stop().drained
    assert sorted(seen) == list(range(n))  # every job ran, none twice
    assert 0 < peak[0] <= 256
    assert max(sizes) > 100  # one claim took more than the old cap
    with any_store.transaction() as tx:  # claimed exactly once each: one attempt, one lease
        twice = tx.execute("SELECT count(*) FROM tenure_jobs WHERE attempts <> 1 OR lease_generation <> 1")
        assert list(twice)[0][0] == 0


def test_settlers_split_the_batches_of_many_slots(any_store, make_worker):
    """On PostgreSQL, at 256 slots each of the two settlers stops its batch at its share (128), so
    the other settler's round trip overlaps it instead of one settler taking every finished
    attempt; every job still runs once. SQLite keeps one settler, whose batch takes everything."""
    jobs = any_store.jobs
    n = 1500
    jobs.enqueue_many([{"kind": "k", "payload": {"i": i}} for i in range(n)])
    batches: list[int] = []
    complete_many, complete_and_claim = jobs.complete_many, jobs.complete_and_claim

    def spy_complete(items, *args, **kwargs):
        batches.append(len(items))
        return complete_many(items, *args, **kwargs)

    def spy_refill(items, *args, **kwargs):
        batches.append(len(items))
        return complete_and_claim(items, *args, **kwargs)

    jobs.complete_many, jobs.complete_and_claim = spy_complete, spy_refill  # the store underneath is real
    seen: list[int] = []
    w = make_worker(any_store, {"k": lambda payload, ctx: seen.append(payload["i"])}, concurrency=256,
                    poll_interval=0.01)
    w.start()
    deadline = time.monotonic() + 80  # below pytest's 120 s: a stall reports what the store holds
    while jobs.counts().get("done", 0) < n:
        assert time.monotonic() < deadline, _stalled(any_store, w)
        time.sleep(0.02)
    assert w.stop().drained
    assert sorted(seen) == list(range(n)) and sum(batches) == n
    if not any_store.engine.exclusive_gate:
        assert max(batches) <= 128


class _LostWakeUps(queue.SimpleQueue):
    """A ``SimpleQueue`` whose timed ``get`` behaves as CPython's before 3.13 does when another
    reader takes the item each put wakes it for: it does not come back at its timeout (its next
    wait has none and lasts until a later put); here, until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()

    def get(self, block: bool = True, timeout: float | None = None):
        if block and timeout is not None:
            self.released.wait()
            raise queue.Empty
        return super().get(block, timeout)


def test_a_settler_gathering_a_batch_never_waits_on_another_settlers_wake_up(any_store, make_worker, monkeypatch):
    """The 256-slot drain stall: a settler gathering a batch below its share (128 of 256 slots on
    PostgreSQL) while another handler still ran waited for more with a timed ``get`` on the queue
    both settlers read; when the other settler took the item that woke it, the wait outlived its
    timeout until the next put, and after the last job of a drain there was none: its batch (92
    jobs in the whole-suite stalls) never settled. Here every such wake-up is lost: the batch of
    the finished job must settle anyway while the other job still runs."""
    made: list[_LostWakeUps] = []

    def lost_wake_ups() -> _LostWakeUps:
        made.append(_LostWakeUps())
        return made[-1]

    monkeypatch.setattr(core, "_queue", types.SimpleNamespace(SimpleQueue=lost_wake_ups))
    jobs = any_store.jobs
    quick = jobs.enqueue("quick")
    slow = jobs.enqueue("slow")
    go = threading.Event()
    w = make_worker(any_store, {"quick": lambda payload, ctx: None, "slow": lambda payload, ctx: go.wait(30)},
                    concurrency=256, poll_interval=0.01)
    w.start()
    try:
        wait_for(lambda: jobs.get(quick).state == "done", what="the quick job settled while the slow one runs")
        assert jobs.get(slow).state == "leased"  # settled while the other job still ran
        go.set()
        wait_for(lambda: jobs.get(slow).state == "done", what="the slow job settled")
    finally:
        go.set()
        for q in made:
            q.released.set()  # the old settler is let go, so that stop() can join it
    assert w.stop().drained
