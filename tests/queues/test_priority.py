"""Priority within and across queues: higher first; equal priorities keep docs/spec.md
spec 3.5's order (run_at, created_at, id) — spec 8.2."""

from __future__ import annotations


def test_higher_priority_first_within_a_queue(store, clock):
    ids = {}
    for name, prio in [("low", -1), ("mid", 0), ("high", 5), ("high2", 5)]:
        ids[store.jobs.enqueue("k", name, queue="q", priority=prio)] = name
        clock.advance(1)
    order = [store.jobs.claim("k", owner="w").job.payload for _ in range(4)]
    assert order == ["high", "high2", "mid", "low"]


def test_equal_priorities_keep_run_at_then_created_at_then_id_order(store, clock):
    """spec 3.5 / 8.2: with a frozen clock, ids ``b`` then ``a`` are claimed as ``a``, ``b``;
    an earlier run_at goes first whatever its creation time."""
    store.jobs.enqueue("k", "b", id="b", queue="q", priority=3)
    store.jobs.enqueue("k", "a", id="a", queue="q", priority=3)
    store.jobs.enqueue("k", "early", id="z", queue="q", priority=3, run_at=clock() - 10)
    assert [c.job.id for c in store.jobs.claim_many("k", owner="w", limit=3)] == ["z", "a", "b"]


def test_a_claim_over_several_queues_merges_them_by_priority(store, clock):
    store.jobs.enqueue("k", "a0", queue="a", priority=0)
    store.jobs.enqueue("k", "a9", queue="a", priority=9)
    store.jobs.enqueue("k", "b5", queue="b", priority=5)
    store.jobs.enqueue("k", "c7", queue="c", priority=7)  # not listed: never claimed below
    clock.advance(1)
    got = store.jobs.claim_many("k", owner="w", limit=10, queues=["a", "b"])
    assert [c.job.payload for c in got] == ["a9", "b5", "a0"]
    assert [c.job.payload for c in store.jobs.claim_many("k", owner="w", limit=10)] == ["c7"]


def test_one_at_a_time_claims_across_queues_follow_priority(store):
    for queue, prio in [("x", 1), ("y", 3), ("x", 2), ("y", 0)]:
        store.jobs.enqueue("k", f"{queue}{prio}", queue=queue, priority=prio)
    order = [store.jobs.claim("k", owner="w", queues=["x", "y"]).job.payload for _ in range(4)]
    assert order == ["y3", "x2", "x1", "y0"]
