"""How many settler threads a worker runs (``worker.completer.settler_count``): one on SQLite (one
writer) or with one slot; on PostgreSQL one per 128 slots, two to four, so that at 512 slots four
settle-and-claim round trips of ~128 overlap. spec 6.3 stays exact with four settlers claiming."""

from __future__ import annotations

from tenure.worker.completer import SETTLERS_MAX, settler_count

from ._wk import sampled_drain


def test_settlers_by_slots_and_engine():
    assert [settler_count(n, False) for n in (1, 2, 8, 64, 255, 256, 383, 384, 511, 512, 10_000)] == \
        [1, 2, 2, 2, 2, 2, 2, 3, 3, 4, 4]
    assert SETTLERS_MAX == 4
    assert {settler_count(n, True) for n in (1, 64, 512, 10_000)} == {1}


def test_four_settlers_at_512_slots_keep_concurrency_exact(any_store, make_worker):
    """At 512 slots a PostgreSQL worker settles (and refills) on four threads at once; the attempts
    in flight, sampled throughout, never exceed 512, and every job runs and settles once."""
    n = 3000
    d = sampled_drain(any_store, make_worker, n, slow_share=0.2, slow_s=0.002, timeout=120, concurrency=512,
                      poll_interval=0.01)
    assert d.peak <= 512
    assert len(d.seen) == len(set(d.seen)) == n and d.stats["completions"] == n
    assert any_store.jobs.counts().get("done", 0) == n
    settlers = 1 if any_store.engine.exclusive_gate else 4
    assert d.settlers == {f"tenure-settle-{i}" for i in range(settlers)}
