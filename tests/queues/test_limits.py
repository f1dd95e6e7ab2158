"""Concurrency limits: ``concurrency_limit`` per queue and ``group_limit`` per
``group_key``, global across every worker and host, enforced inside the claim. The last test runs
real processes claiming at once and samples the number of leased jobs from outside."""

from __future__ import annotations

import multiprocessing as mp
import time

import tenure

from . import _procs
from ._helpers import raw


def test_concurrency_limit_caps_live_leases_across_stores(store, other):
    store.queues.create("q", concurrency_limit=2)
    for i in range(5):
        store.jobs.enqueue("k", i, queue="q")
    store.jobs.enqueue("k", "free", queue="free")
    first = store.jobs.claim_many("k", owner="a", limit=10)
    assert sorted(c.job.queue for c in first) == ["free", "q", "q"]
    assert other.jobs.claim_many("k", owner="b", limit=10) == []  # another process: still capped
    store.jobs.complete(next(c for c in first if c.job.queue == "q").lease)
    assert len(other.jobs.claim_many("k", owner="b", limit=10)) == 1


def test_an_expired_lease_frees_its_slot(store, clock):
    store.queues.create("q", concurrency_limit=1)
    a = store.jobs.enqueue("k", 1, queue="q")
    clock.advance(1)
    store.jobs.enqueue("k", 2, queue="q")
    assert store.jobs.claim("k", owner="a", lease_ms=1000).job.id == a
    assert store.jobs.claim("k", owner="b") is None
    clock.advance(1000)
    assert len(store.jobs.claim_many("k", owner="b", limit=10)) == 1


def test_group_limit_caps_leases_per_group_key(store):
    store.queues.create("q", group_limit=1)
    for group in ["g1", "g1", "g2", "g2", None]:
        store.jobs.enqueue("k", group, queue="q", group_key=group)
    got = store.jobs.claim_many("k", owner="w", limit=10)
    assert sorted(str(c.job.group_key) for c in got) == ["None", "g1", "g2"]
    assert store.jobs.claim_many("k", owner="w", limit=10) == []
    store.jobs.complete(next(c for c in got if c.job.group_key == "g1").lease)
    assert [c.job.group_key for c in store.jobs.claim_many("k", owner="w", limit=10)] == ["g1"]


def test_limits_follow_updates(store):
    store.queues.create("q", concurrency_limit=1)
    for i in range(3):
        store.jobs.enqueue("k", i, queue="q")
    assert len(store.jobs.claim_many("k", owner="w", limit=10)) == 1
    store.queues.update("q", concurrency_limit=None)
    assert len(store.jobs.claim_many("k", owner="w", limit=10)) == 2


def test_limits_hold_under_real_processes(engine_url):
    """Four processes claim batches as fast as they can from two queues: ``limited``
    (concurrency_limit=3, group_limit=1 over four groups) and ``serial`` (policy singleton over
    five keys). A sampler reading the table from outside never sees more than 3 leased jobs in
    ``limited``, 2 of one group, or 2 of one key in ``serial`` — and does see the limit reached and
    several keys running at once (so the test can fail). It samples for at least ``seconds`` and
    on until it has seen both (at most ``longest``): on a loaded machine four processes may take
    longer to run two keys side by side, and a fixed window then proved nothing."""
    limit, seconds, longest = 3, 2.0, 60.0
    setup = tenure.connect(engine_url)
    try:
        setup.queues.create("limited", concurrency_limit=limit, group_limit=1)
        setup.queues.create("serial", policy="singleton")
        setup.jobs.enqueue_many([{"kind": "k", "payload": i, "queue": "limited", "group_key": f"g{i % 4}"}
                                 for i in range(2000)])
        setup.jobs.enqueue_many([{"kind": "k", "payload": i, "queue": "serial", "singleton_key": f"s{i % 5}"}
                                 for i in range(2000)])
        ctx = mp.get_context("spawn")
        barrier, out, stop = ctx.Barrier(5), ctx.Queue(), ctx.Event()
        procs = [ctx.Process(target=_procs.claim_loop,
                             args=(engine_url, ["limited", "serial"], f"p{i}", longest, barrier, out, stop))
                 for i in range(4)]
        for p in procs:
            p.start()
        barrier.wait(timeout=60)
        peak = peak_group = peak_key = peak_keys = samples = 0
        start = time.monotonic()
        while time.monotonic() < start + seconds or (
                (peak < limit or peak_keys < 2) and time.monotonic() < start + longest):
            rows = raw(setup, "SELECT queue, coalesce(group_key, singleton_key), count(*) FROM tenure_jobs "
                              "WHERE state = 'leased' GROUP BY queue, coalesce(group_key, singleton_key)")
            limited = [n for q, _, n in rows if q == "limited"]
            serial = [n for q, _, n in rows if q == "serial"]
            peak = max(peak, sum(limited))
            peak_group = max([peak_group, *limited])
            peak_key = max([peak_key, *serial])
            peak_keys = max(peak_keys, len(serial))
            samples += 1
        stop.set()
        results = [out.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=30)
        errors = [e for _, _, e in results if e]
        assert not errors, errors
        done = sum(n for _, n, _ in results)
        assert done >= 10 and samples > 50, (done, samples)
        assert peak <= limit and peak_group <= 1, (peak, peak_group)
        assert peak_key <= 1, f"two jobs of one singleton key were leased at once ({peak_key})"
        assert peak == limit, f"the limit was never reached ({peak}): the test proved nothing"
        assert peak_keys >= 2, "singleton keys never ran side by side: the test proved nothing"
        print(f"{setup.dialect}: {done} jobs through 4 processes, {samples} samples, peak leased {peak}, "
              f"singleton keys side by side {peak_keys}")
    finally:
        setup.close()
