"""The operator reads (tenure.insights over the engines' insight_* queries) on both engines,
with an injected clock: throughput per minute counts each job once, in the minute of its latest
settlement, inside the aligned one-hour window; queue summaries; the overview cache."""

from __future__ import annotations

from tenure.insights import BUCKET_MS, Insights

from .conftest import needs_queue_registry


def test_throughput_counts_each_job_once_by_its_latest_settlement(any_store, clock):
    jobs = any_store.jobs
    base = clock.now - clock.now % BUCKET_MS  # the start of a minute

    # Two hours before the window: settled, so never counted.
    clock.set(base - 2 * 3_600_000)
    jobs.enqueue("old")
    jobs.complete(jobs.claim("old", owner="t").lease, None)

    clock.set(base + 10_000)  # minute 0
    jobs.enqueue_many([{"kind": "a"}, {"kind": "a"}])
    for c in jobs.claim_many("a", owner="t", limit=2):
        jobs.complete(c.lease, 1)

    clock.set(base + 70_000)  # minute 1: a failure that is then retried and completes in minute 3
    retried = jobs.enqueue("b")
    jobs.fail(jobs.claim("b", owner="t").lease, "flaky", backoff_base_ms=1, backoff_cap_ms=1)
    clock.set(base + 130_000)  # minute 2: one dead, one cancelled, one failure left waiting
    jobs.enqueue("c", max_attempts=1)
    jobs.fail(jobs.claim("c", owner="t").lease, "fatal")
    cancelled = jobs.enqueue("d")
    jobs.cancel(cancelled)
    jobs.enqueue("e")
    jobs.fail(jobs.claim("e", owner="t").lease, "retry later", backoff_base_ms=3_600_000, backoff_cap_ms=3_600_000)
    clock.set(base + 190_000)  # minute 3
    jobs.complete(jobs.claim("b", owner="t").lease, "ok")
    # A dead job that an operator requeued is live again: not a settlement any more (10.13).
    jobs.enqueue("f", id="requeued", max_attempts=1)
    jobs.fail(jobs.claim("f", owner="t").lease, "fatal")
    assert jobs.requeue("requeued") is True

    clock.set(base + 59 * BUCKET_MS + 1_000)  # the window is exactly [base, base + 60 min)
    tp = Insights(any_store).throughput()
    assert (tp.since, tp.until, tp.bucket_ms, len(tp.buckets)) == (base, base + 3_600_000, BUCKET_MS, 60)
    assert [b["t"] for b in tp.buckets[:2]] == [base, base + BUCKET_MS]
    by_minute = {i: {k: v for k, v in b.items() if k != "t" and v} for i, b in enumerate(tp.buckets) if
                 any(v for k, v in b.items() if k != "t")}
    assert by_minute == {0: {"done": 2}, 2: {"dead": 1, "cancelled": 1, "failed": 1}, 3: {"done": 1}}
    assert tp.totals() == {"done": 3, "failed": 1, "dead": 1, "cancelled": 1}
    assert retried

    # An hour later, minutes 0-3 have left the window.
    clock.advance(3_600_000)
    assert Insights(any_store).throughput().totals() == {"done": 0, "failed": 0, "dead": 0, "cancelled": 0}


def test_queue_summaries_and_the_overview_cache(any_store, clock):
    needs_queue_registry()
    jobs = any_store.jobs
    jobs.enqueue_many([{"kind": "k", "queue": "alpha"}, {"kind": "k", "queue": "alpha"},
                       {"kind": "k", "queue": "beta"}])
    jobs.complete(jobs.claim("k", owner="t", queues="alpha").lease, None)
    any_store.queues.create("empty", concurrency_limit=3, dead_letter="graveyard")
    any_store.queues.pause("beta")
    insights = Insights(any_store, ttl=60)
    queues = {q.name: q for q in insights.queues()}
    assert queues["alpha"].counts == {"pending": 1, "leased": 0, "done": 1, "failed": 0, "dead": 0, "cancelled": 0}
    assert queues["alpha"].total == 2 and not queues["alpha"].paused
    assert queues["beta"].paused and queues["beta"].counts["pending"] == 1
    assert queues["empty"].total == 0 and queues["empty"].concurrency_limit == 3
    assert queues["empty"].dead_letter == "graveyard"
    assert list(queues) == sorted(queues)

    ov = insights.overview()
    assert ov.counts["pending"] == 2 and ov.counts["done"] == 1 and ov.now == clock.now
    jobs.enqueue("k", queue="alpha")
    assert insights.overview() is ov  # cached for ttl
    insights.invalidate()
    assert insights.overview().counts["pending"] == 3
    assert insights.overview(fresh=True).counts["pending"] == 3
    versions = insights.schema_versions()
    assert [v for v, _, _ in versions] == sorted(v for v, _, _ in versions) and versions[0][0] == 1


def test_an_expensive_overview_is_refreshed_in_the_background(any_store):
    """A pass that takes longer than INLINE_REFRESH_MAX_S is never recomputed inside a request once
    there is one: the request answers the previous overview (with its read time) and one
    background refresh replaces it."""
    import threading
    import time

    from tenure import insights as mod

    calls, release = [], threading.Event()

    class Slow(Insights):
        def _read_overview(self):
            calls.append(1)
            if len(calls) > 1:
                release.wait(10)  # the background refresh, held until the test lets it go
            else:
                time.sleep(mod.INLINE_REFRESH_MAX_S + 0.05)
            return super()._read_overview()

    any_store.jobs.enqueue("k")
    ins = Slow(any_store, ttl=60)
    first = ins.overview()
    assert first.counts["pending"] == 1 and first.computed_ms >= mod.INLINE_REFRESH_MAX_S * 1000
    any_store.jobs.enqueue("k")
    ins.invalidate()
    t0 = time.monotonic()
    assert ins.overview() is first and ins.overview() is first  # stale, answered at once
    assert time.monotonic() - t0 < 0.2
    release.set()
    deadline = time.monotonic() + 10
    while ins.overview() is first:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert len(calls) == 2  # one refresh, however many reads
    assert ins.overview().counts["pending"] == 2
