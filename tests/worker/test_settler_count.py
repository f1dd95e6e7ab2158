"""How many settler threads a worker runs (``worker.completer.settler_count``): one on SQLite (one
writer) or with one slot; on PostgreSQL one per 128 slots, two to four, so that at 512 slots four
settle-and-claim round trips of ~128 overlap. spec 6.3 stays exact with four settlers claiming."""

from __future__ import annotations

import random
import threading
import time

from tenure.worker.completer import SETTLERS_MAX, settler_count


def test_settlers_by_slots_and_engine():
    assert [settler_count(n, False) for n in (1, 2, 8, 64, 255, 256, 383, 384, 511, 512, 10_000)] == \
        [1, 2, 2, 2, 2, 2, 2, 3, 3, 4, 4]
    assert SETTLERS_MAX == 4
    assert {settler_count(n, True) for n in (1, 64, 512, 10_000)} == {1}


def test_four_settlers_at_512_slots_keep_concurrency_exact(any_store, make_worker):
    """At 512 slots a PostgreSQL worker settles (and refills) on four threads at once; the attempts
    in flight, sampled throughout, never exceed 512, and every job runs and settles once."""
    jobs = any_store.jobs
    n = 3000
    jobs.enqueue_many([{"kind": "k", "payload": {"i": i}} for i in range(n)])
    seen, peak, names = [], [0], set()
    done = threading.Event()

    def handler(payload, ctx):
        seen.append(payload["i"])
        if random.random() < 0.2:
            time.sleep(0.002)  # uneven handlers: batches finish at different times

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], w.stats()["in_flight"])
            time.sleep(0.0002)

    w = make_worker(any_store, {"k": handler}, concurrency=512, poll_interval=0.01)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    w.start()
    names.update(t.name for t in threading.enumerate() if t.name.startswith("tenure-settle"))
    try:
        deadline = time.monotonic() + 120
        while w.stats()["completions"] < n and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        done.set()
        watcher.join()
    assert w.stop().drained
    assert peak[0] <= 512
    assert len(seen) == len(set(seen)) == n and w.stats()["completions"] == n
    assert jobs.counts().get("done", 0) == n
    settlers = 1 if any_store.engine.exclusive_gate else 4
    assert names == {f"tenure-settle-{i}" for i in range(settlers)}
