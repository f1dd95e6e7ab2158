"""Rate limits: ``rate_limit`` per queue and ``group_rate_limit`` per ``group_key``,
"no more than N starts in any window of that length", enforced inside the claim on both engines.
The window arithmetic runs on the injected clock here; ``test_rate_processes.py`` runs real
workers in real time."""

from __future__ import annotations

import pytest

import tenure
from tenure.errors import InvalidRateLimit, InvalidType
from tenure.rate_window import GRANULES, Rate, allowance, blocked_until, format_rate, parse_rate, record

# -- the arithmetic --------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "rate", "canonical"), [
    ("100/s", Rate(100, 1_000), "100/s"), ("6000/min", Rate(6000, 60_000), "6000/min"),
    ("10/h", Rate(10, 3_600_000), "10/h"), (" 5 / 10s ", Rate(5, 10_000), "5/10s"),
    ("7/250ms", Rate(7, 250), "7/250ms"), ("1/d", Rate(1, 86_400_000), "1/d"), ("3/2min", Rate(3, 120_000), "3/2min"),
])
def test_parse_and_format(text, rate, canonical):
    assert parse_rate(text) == rate
    assert format_rate(rate.limit, rate.period_ms) == canonical


@pytest.mark.parametrize("bad", ["", "100", "100/", "/s", "0/s", "-1/s", "1.5/s", "10/fortnight", "10/0s",
                                 "2000000/s", "1/8d"])
def test_bad_rates_are_refused_by_code(bad):
    with pytest.raises(InvalidRateLimit) as err:
        parse_rate(bad)
    assert err.value.code == "TN3004"


def test_a_rate_must_be_text():
    with pytest.raises(InvalidType):
        parse_rate(100)


def test_every_sliding_window_holds_at_most_n_starts():
    """Starts taken greedily whenever the window allows, at every ms for 5 periods: no window of
    the period's length ever holds more than N, and the rounding costs at most one granule."""
    rate = Rate(7, 1_000)
    pairs: list[list[int]] = []
    starts = []
    for t in range(0, 5_000):
        n = allowance(pairs, t, rate)
        if n:
            starts.extend([t] * n)
            pairs = record(pairs, t, n, rate)
            assert len(pairs) <= GRANULES + 1
    for i, t in enumerate(starts):
        assert sum(1 for s in starts[i:] if s < t + rate.period_ms) <= rate.limit
    assert len(starts) >= 7 * 5 - 7  # at least one burst per period, delayed at most a granule each
    assert blocked_until(pairs, rate) > 0


# -- in the claim ----------------------------------------------------------------------------------

def test_rate_limit_refuses_bad_values_and_writes_nothing(store):
    for bad in ("fast", "0/s", 5):
        with pytest.raises((InvalidRateLimit, InvalidType)):
            store.queues.create("q", rate_limit=bad)
    assert [q.name for q in store.queues.list()] == []
    with pytest.raises(InvalidRateLimit):
        store.queues.create("q", group_rate_limit="3/week")
    with pytest.raises(tenure.errors.InvalidArgument):
        store.queues.create("q", fairness="lottery")
    with pytest.raises(tenure.errors.InvalidArgument):
        store.jobs.enqueue("k", 1, queue="q", rate_limit="1/s")  # a queue setting, not a job option


def test_rate_limit_caps_starts_per_window_across_stores(store, other, clock):
    q = store.queues.create("q", rate_limit="3/s")
    assert q.rate_limit == "3/s"
    for i in range(10):
        store.jobs.enqueue("k", i, queue="q")
    store.jobs.enqueue("k", "free", queue="free")
    got = store.jobs.claim_many("k", owner="a", limit=10)
    assert sorted(c.job.queue for c in got) == ["free", "q", "q", "q"]
    for c in got:
        store.jobs.complete(c.lease)  # finishing frees no start: the window counts starts
    assert other.jobs.claim_many("k", owner="b", limit=10) == []
    clock.advance(999)
    assert other.jobs.claim_many("k", owner="b", limit=10) == []
    clock.advance(1 + 1_000 // GRANULES)  # the window has moved past the first three (and a granule)
    assert len(other.jobs.claim_many("k", owner="b", limit=10)) == 3
    clock.advance(400)
    assert store.jobs.claim_many("k", owner="a", limit=10) == []


def test_rate_limit_spreads_a_batch_over_windows(store, clock):
    store.queues.create("q", rate_limit="2/min")
    for i in range(5):
        store.jobs.enqueue("k", i, queue="q")
    seen = []
    for _ in range(3):
        got = store.jobs.claim_many("k", owner="a", limit=10)
        store.jobs.complete_many([(c.lease, None) for c in got])
        seen.append(len(got))
        clock.advance(30_000 + 60_000 // GRANULES)  # a start is counted up to one granule late
    assert seen == [2, 0, 2]


def test_group_rate_limit_skips_a_group_at_its_limit_without_blocking_others(store, other, clock):
    store.queues.create("q", group_rate_limit="2/s")
    for i in range(6):
        store.jobs.enqueue("k", i, queue="q", group_key="busy")
    store.jobs.enqueue("k", "a", queue="q", group_key="quiet")
    store.jobs.enqueue("k", "n", queue="q")  # no group: no group limit
    got = store.jobs.claim_many("k", owner="a", limit=10)
    assert sorted(str(c.job.group_key) for c in got) == ["None", "busy", "busy", "quiet"]
    store.jobs.enqueue("k", "b", queue="q", group_key="quiet")
    assert [c.job.group_key for c in other.jobs.claim_many("k", owner="b", limit=10)] == ["quiet"]
    assert other.jobs.claim_many("k", owner="b", limit=10) == []
    clock.advance(1_000 + 1_000 // GRANULES)
    assert [c.job.group_key for c in other.jobs.claim_many("k", owner="b", limit=10)] == ["busy", "busy"]


def test_queue_and_group_rates_combine(store, clock):
    store.queues.create("q", rate_limit="3/s", group_rate_limit="1/s")
    for g in ["a", "a", "b", "b", "c", "d"]:
        store.jobs.enqueue("k", g, queue="q", group_key=g)
    got = store.jobs.claim_many("k", owner="a", limit=10)
    assert sorted(c.job.group_key for c in got) == ["a", "b", "c"]
    clock.advance(2_000)
    assert sorted(c.job.group_key for c in store.jobs.claim_many("k", owner="a", limit=10)) == ["a", "b", "d"]


def test_the_claim_reports_when_the_window_opens(store, clock):
    store.queues.create("q", rate_limit="1/s")
    store.jobs.enqueue("k", 1, queue="q")
    store.jobs.enqueue("k", 2, queue="q")
    t0 = clock()
    assert store.jobs.claim("k", owner="a") is not None
    assert store.jobs.claim("k", owner="a") is None
    wake = store.jobs.rate_wake_at
    assert wake is not None and t0 + 1_000 <= wake <= t0 + 1_000 + 1_000 // GRANULES
    clock.set(wake - 1)
    assert store.jobs.claim("k", owner="a") is None
    clock.set(wake)
    assert store.jobs.claim("k", owner="a") is not None


def test_clearing_or_lowering_a_rate_applies_at_the_next_claim(store, clock):
    store.queues.create("q", group_rate_limit="5/s")
    for i in range(8):
        store.jobs.enqueue("k", i, queue="q", group_key="g")
    assert len(store.jobs.claim_many("k", owner="a", limit=2)) == 2
    store.queues.update("q", group_rate_limit="2/s")   # the two starts already count
    assert store.jobs.claim_many("k", owner="a", limit=10) == []
    store.queues.update("q", group_rate_limit=None)
    assert len(store.jobs.claim_many("k", owner="a", limit=10)) == 6
    assert store.queues.get("q").group_rate_limit is None


def test_an_expired_lease_is_a_start(store, clock):
    store.queues.create("q", rate_limit="1/min")
    store.jobs.enqueue("k", 1, queue="q")
    assert store.jobs.claim("k", owner="a", lease_ms=1_000) is not None
    clock.advance(2_000)  # its worker is lost: the lease expired, but the window is closed
    assert store.jobs.claim("k", owner="b") is None
    clock.advance(60_000)
    assert store.jobs.claim("k", owner="b") is not None


# -- visible everywhere ----------------------------------------------------------------------------

def test_windows_dashboard_and_metrics_show_limits_and_deferred_jobs(store, clock):
    """``queues.windows`` answers the current windows; the dashboard's overview carries the
    limits and windows of each queue; /metrics exposes the due jobs a closed window holds back."""
    import httpx

    from tenure.dashboard.app import create_app
    from tenure.metrics import build_registry, render
    from tests.dashboard.conftest import Server

    store.queues.create("api", rate_limit="2/s", group_rate_limit="1/min", fairness="round_robin")
    for g in ["a", "a", "b", "c"]:
        store.jobs.enqueue("k", g, queue="api", group_key=g)
    assert store.queues.windows("api") == []  # nothing started yet
    assert len(store.jobs.claim_many("k", owner="w", limit=10)) == 2
    windows = store.queues.windows("api")
    assert windows[0].group_key is None and (windows[0].in_window, windows[0].limit) == (2, 2)
    assert windows[0].blocked_until is not None and windows[0].blocked_until > clock()
    assert sorted(w.group_key for w in windows[1:]) == ["a", "b"]
    with pytest.raises(tenure.errors.QueueNotFound):
        store.queues.windows("nope")

    srv = Server(create_app(store))
    try:
        with httpx.Client(base_url=srv.url()) as client:
            (q,) = [q for q in client.get("/api/overview").json()["queues"] if q["name"] == "api"]
    finally:
        srv.stop()
    assert (q["rate_limit"], q["group_rate_limit"], q["fairness"]) == ("2/s", "1/min", "round_robin")
    assert q["windows"][0]["in_window"] == 2 and q["rate_deferred"] == 2  # the queue's window is closed
    registry, _ = build_registry(store=store)
    text = render(registry)[0].decode()
    assert 'tenure_jobs_rate_deferred{queue="api"} 2.0' in text
    clock.advance(1_100)  # the queue's window opens; a's group window (1/min) is still closed
    registry, _ = build_registry(store=store)
    assert 'tenure_jobs_rate_deferred{queue="api"} 1.0' in render(registry)[0].decode()


# -- throttled sends: singleton_next_slot ----------------------------------------------------------

def test_singleton_next_slot_moves_a_throttled_send_to_the_next_bucket(store, other, clock):
    """pg-boss's singletonNextSlot: the bucket taken, the job goes to the next one (due at its
    start); that one taken too, the answer is the job holding it."""
    clock.set(1_700_000_040_000 - 1_700_000_040_000 % 60_000 + 40_000)  # 40 s into a minute bucket
    next_bucket = clock() + 20_000
    first = store.jobs.enqueue("k", 1, singleton_key="u", singleton_for=60, singleton_next_slot=True)
    later = other.jobs.enqueue("k", 2, singleton_key="u", singleton_for=60, singleton_next_slot=True)
    again = store.jobs.enqueue("k", 3, singleton_key="u", singleton_for=60, singleton_next_slot=True)
    plain = store.jobs.enqueue("k", 4, singleton_key="u", singleton_for=60)
    assert later != first and again == later and plain == first
    moved = store.jobs.get(later)
    assert moved.run_at == next_bucket and moved.payload == 2
    assert store.jobs.claim("k", owner="w").job.id == first
    assert store.jobs.claim("k", owner="w") is None       # the next slot's job waits for its bucket
    clock.advance(20_000)
    assert store.jobs.claim("k", owner="w").job.id == later
    with pytest.raises(tenure.errors.InvalidArgument):
        store.jobs.enqueue("k", 5, singleton_key="u", singleton_next_slot=True)  # needs singleton_for
