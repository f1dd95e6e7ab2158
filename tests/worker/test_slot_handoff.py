"""The hand-off of attempts to slot threads (tenure.worker.slots.SlotPool): a thread that finishes
a handler takes the next queued attempt itself, a parked thread is woken only when queued work has
no thread on its way to it, and yet a handler that blocks never holds up the attempts queued
behind it; at most N attempts run at once (spec 6.3); stop() still ends every slot thread.

The unit tests drive a pool with real threads and count the wake-ups through the gates the threads
park on (never a timing); the worker tests run both engines.
"""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from tenure.worker.slots import SlotPool

from ._wk import Outcomes, wait_for


class CountingGate:
    """A slot thread's gate (a held lock) that counts how often it is opened (a wake-up)."""

    opened = 0
    _count_lock = threading.Lock()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def acquire(self) -> bool:
        return self._lock.acquire()

    def release(self) -> None:
        with CountingGate._count_lock:
            CountingGate.opened += 1
        self._lock.release()


def _run_slots(pool: SlotPool, n: int, run) -> list[threading.Thread]:
    """Start ``n`` slot threads taking from ``pool`` and calling ``run(item)``."""

    def slot() -> None:
        gate = CountingGate()
        while (item := pool.take(gate)) is not None:
            run(item)

    threads = [threading.Thread(target=slot, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return threads


def _parked(pool: SlotPool, n: int) -> None:
    wait_for(lambda: len(pool._parked) == n, what=f"{n} parked slot threads")


def test_a_batch_of_short_jobs_wakes_one_thread_and_one_standby_not_one_per_job():
    """Handing each attempt to its own parked thread cost a wake-up (a futex call and a GIL
    hand-off) per job. Now a batch wakes one thread; the first attempt it takes leaves others
    queued, so it wakes one more before running it (the standby that keeps a blocking handler
    from holding up the rest). That is all: whoever is free takes the rest without waking anyone."""
    pool = SlotPool()
    CountingGate.opened = 0
    ran: list[int] = []
    all_ran = threading.Event()
    n = 50

    def run(item: int) -> None:
        ran.append(item)
        if len(ran) == n:
            all_ran.set()

    threads = _run_slots(pool, 8, run)
    _parked(pool, 8)
    # No forced GIL switch while the first thread runs the batch (a loaded machine could preempt
    # it for longer than the 5 ms default, and the standby would then take an item and wake the
    # next one, as it should); the count below is then exact, not a matter of timing.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    try:
        pool.put_many(range(n))  # type: ignore[arg-type] - any item travels
        assert all_ran.wait(30)
        _parked(pool, 8)
    finally:
        sys.setswitchinterval(interval)
    assert sorted(ran) == list(range(n))  # each exactly once
    assert CountingGate.opened == 2, CountingGate.opened  # was one per job (50)
    pool.close()
    for t in threads:
        t.join(10)
        assert not t.is_alive()


def test_a_blocking_handler_never_holds_up_the_attempts_queued_behind_it():
    """Every queued item gets a thread of its own while the threads before it block: the N items
    below all wait for each other, so they finish only if all N run at once."""
    n = 6
    pool = SlotPool()
    barrier = threading.Barrier(n, timeout=30)
    done = []

    def run(item: int) -> None:
        barrier.wait()  # blocks until every one of the n items runs
        done.append(item)

    threads = _run_slots(pool, n, run)
    _parked(pool, n)
    pool.put_many(range(n))  # type: ignore[arg-type]
    wait_for(lambda: len(done) == n, timeout=30, what="all items running at once")
    assert sorted(done) == list(range(n))
    pool.close()
    for t in threads:
        t.join(10)
        assert not t.is_alive()


def test_close_runs_what_is_queued_then_ends_every_thread():
    pool = SlotPool()
    ran: list[int] = []
    gate = threading.Event()

    def run(item: int) -> None:
        gate.wait(30)
        ran.append(item)

    threads = _run_slots(pool, 2, run)
    _parked(pool, 2)
    pool.put_many(range(5))  # type: ignore[arg-type]
    pool.close()  # both threads are busy or about to be: the queued items still run first
    gate.set()
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    assert sorted(ran) == list(range(5))


@pytest.mark.parametrize("concurrency", [1, 3, 16])
def test_short_jobs_run_once_each_and_never_more_than_n_at_once(any_store, make_worker, concurrency):
    """spec 6.3 on the new hand-off: a backlog of short jobs, some of them blocking for a moment,
    each runs exactly once and at most ``concurrency`` run at any time."""
    lock = threading.Lock()
    running = [0]
    peak = [0]
    seen: list[int] = []
    pause = threading.Event()

    def handler(payload, ctx):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            seen.append(payload)
        if payload % 7 == 0:
            pause.wait(0.002)  # releases the GIL: other slots take the queued attempts meanwhile
        with lock:
            running[0] -= 1

    n = 300
    any_store.jobs.enqueue_many([{"kind": "k", "payload": i} for i in range(n)])
    outcomes = Outcomes()
    w = make_worker(any_store, {"k": handler}, concurrency=concurrency, poll_interval=0.05, on_outcome=outcomes)
    with w:
        outcomes.wait(n, timeout=60)
    assert sorted(seen) == list(range(n))
    assert {e["outcome"] for e in outcomes.events} == {"completed"}
    assert 1 <= peak[0] <= concurrency


def test_every_slot_thread_ends_at_stop_and_a_restart_gets_fresh_ones(any_store, make_worker):
    outcomes = Outcomes()
    w = make_worker(any_store, {"k": lambda p, ctx: p}, concurrency=4, poll_interval=0.05, on_outcome=outcomes)
    for round_ in range(2):
        any_store.jobs.enqueue_many([{"kind": "k", "payload": i} for i in range(20)])
        w.start()
        slots = [t for t in w._threads if t.name.startswith("tenure-slot-")]
        assert len(slots) == 4
        outcomes.wait(20 * (round_ + 1))
        assert w.stop().drained
        for t in slots:
            t.join(10)
            assert not t.is_alive()


def test_a_batch_of_async_attempts_wakes_the_event_loop_once(any_store, make_worker):
    """Async attempts start with one wake-up of the worker's loop per claimed batch (a write to
    its self-pipe), not one per attempt; each still runs exactly once."""
    seen: list[int] = []

    async def handler(payload, ctx):
        await asyncio.sleep(0)
        seen.append(payload)

    outcomes = Outcomes()
    w = make_worker(any_store, {"k": handler}, concurrency=40, poll_interval=0.05, on_outcome=outcomes,
                    maintenance=False)
    with w:
        loop = w._loop
        real = loop.call_soon_threadsafe
        calls = []
        loop.call_soon_threadsafe = lambda *a, **kw: calls.append(a[0]) or real(*a, **kw)
        any_store.jobs.enqueue_many([{"kind": "k", "payload": i} for i in range(40)])
        outcomes.wait(40)
        loop.call_soon_threadsafe = real
    assert sorted(seen) == list(range(40))
    assert 1 <= len(calls) <= 4, calls  # one per claimed batch (was 40)
