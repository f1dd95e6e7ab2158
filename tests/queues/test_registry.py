"""The queue registry and the defaults resolved at enqueue ("Queue registry").

Defaults resolve job option -> queue default -> built-in; docs/spec.md rows 2.8 (max_attempts per
job, default 5) and 4.5 (the worker's backoff when the queue has no retry policy) must still hold
when nothing is configured (spec §8: additions leave every row true when unused).
"""

from __future__ import annotations

import datetime as dt

import pytest

from tenure.queues import Queue

from ._helpers import column, jobs_in, raw, refused


def test_create_get_list_round_trip(store, clock):
    q = store.queues.create("emails", policy="short", max_attempts=3, retry_delay=2.5, retry_backoff=True,
                            retry_delay_max=60, timeout=dt.timedelta(seconds=30), retention=3600,
                            delete_after=86400, dead_letter="emails.dead", concurrency_limit=4, group_limit=1)
    assert q == Queue("emails", "short", 3, 2500, True, 60_000, 30_000, 3_600_000, 86_400_000, "emails.dead",
                      4, 1, False, clock(), clock())
    assert store.queues.get("emails") == q
    with pytest.raises(AttributeError):
        q.policy = "standard"  # frozen
    store.queues.create("alpha")
    assert [x.name for x in store.queues.list()] == ["alpha", "emails"]


def test_create_on_an_existing_queue_sets_only_the_given_options(store, clock):
    store.queues.create("q", max_attempts=3, timeout=10)
    clock.advance(5)
    q = store.queues.create("q", timeout=20)
    assert (q.max_attempts, q.timeout_ms, q.updated_at) == (3, 20_000, clock())
    q = store.queues.update("q", max_attempts=None)  # None clears back to the built-in
    assert (q.max_attempts, q.timeout_ms) == (None, 20_000)


def test_unknown_queue_is_refused_by_code(store):
    for call in (lambda: store.queues.get("nope"), lambda: store.queues.update("nope", max_attempts=2),
                 lambda: store.queues.delete("nope"), lambda: store.queues.pause("nope"),
                 lambda: store.queues.resume("nope"), lambda: store.jobs.redrive("nope")):
        with refused("TN3001"):
            call()
    assert store.queues.list() == []


@pytest.mark.parametrize("options, code", [
    ({"policy": "fifo"}, "TN1001"),
    ({"policy": 3}, "TN1002"),
    ({"max_attempts": 0}, "TN1001"),
    ({"max_attempts": "3"}, "TN1002"),
    ({"retry_delay": -1}, "TN1001"),
    ({"retry_delay": [5]}, "TN1002"),
    ({"retry_delay": "five seconds"}, "TN1001"),
    ({"retry_backoff": "yes"}, "TN1002"),
    ({"retry_delay_max": 0}, "TN1001"),
    ({"timeout": 0}, "TN1001"),
    ({"retention": float("nan")}, "TN1001"),
    ({"delete_after": -5}, "TN1001"),
    ({"dead_letter": "q"}, "TN1001"),  # itself
    ({"dead_letter": "bad name!"}, "TN1001"),
    ({"concurrency_limit": 0}, "TN1001"),
    ({"group_limit": 1.5}, "TN1002"),
])
def test_invalid_queue_options_are_coded_and_write_nothing(store, options, code):
    with refused(code):
        store.queues.create("q", **options)
    assert store.queues.list() == []
    store.queues.create("q")
    with refused(code):
        store.queues.update("q", **options)
    assert store.queues.get("q").updated_at == store.queues.get("q").created_at


def test_bad_queue_name_and_unknown_option(store):
    with refused("TN1001"):
        store.queues.create("has space")
    with refused("TN1002"):
        store.queues.create(7)
    # an unknown option is the same coded refusal as on every surface (docs/enqueue-options.md)
    with refused("TN1001"):
        store.queues.create("q", colour="red")
    with refused("TN1001") as info:
        store.queues.create("q", concurency_limit=2)
    assert "did you mean 'concurrency_limit'?" in str(info.value)
    assert "q" not in [q.name for q in store.queues.list()]


def test_enqueue_creates_an_unknown_queue_with_builtin_defaults(store, clock):
    jid = store.jobs.enqueue("k", {"a": 1}, queue="fresh")
    q = store.queues.get("fresh")
    assert (q.policy, q.max_attempts, q.paused, q.created_at) == ("standard", None, False, clock())
    job = store.jobs.get(jid)
    assert (job.max_attempts, job.timeout_ms, job.dead_letter) == (5, None, None)  # spec 2.8


def test_outbox_enqueue_on_the_apps_own_connection_creates_the_queue(store):
    with store.transaction() as tx:
        tx.jobs.enqueue("k", None, queue="outboxed")
    assert store.queues.get("outboxed").name == "outboxed"


def test_defaults_resolve_job_option_then_queue_then_builtin(store, clock):
    store.queues.create("q", max_attempts=2, timeout=30, retry_delay=4, retry_backoff=True, retry_delay_max=9,
                        retention=60, delete_after=120, dead_letter="q.dlq")
    inherited = store.jobs.get(store.jobs.enqueue("k", None, queue="q", delay=10))
    assert (inherited.max_attempts, inherited.timeout_ms, inherited.dead_letter) == (2, 30_000, "q.dlq")
    assert (column(store, inherited.id, "retry_delay_ms"), column(store, inherited.id, "retry_backoff"),
            column(store, inherited.id, "retry_delay_max_ms")) == (4000, 1, 9000)
    # retention counts from when the job becomes due; delete_after is kept as a duration.
    assert column(store, inherited.id, "keep_until") == clock() + 10_000 + 60_000
    assert column(store, inherited.id, "delete_after_ms") == 120_000

    own = store.jobs.get(store.jobs.enqueue(
        "k", None, queue="q", max_attempts=7, timeout=1, retry_delay=0.5, retry_backoff=False, retry_delay_max=2,
        retention=5, delete_after=0, dead_letter="other"))
    assert (own.max_attempts, own.timeout_ms, own.dead_letter) == (7, 1000, "other")
    assert (column(store, own.id, "retry_delay_ms"), column(store, own.id, "retry_backoff"),
            column(store, own.id, "retry_delay_max_ms"), column(store, own.id, "keep_until"),
            column(store, own.id, "delete_after_ms")) == (500, 0, 2000, clock() + 5000, 0)

    plain = store.jobs.get(store.jobs.enqueue("k", None, queue="plain"))
    assert (plain.max_attempts, plain.timeout_ms, plain.dead_letter) == (5, None, None)
    assert (column(store, plain.id, "keep_until"), column(store, plain.id, "delete_after_ms"),
            column(store, plain.id, "retry_delay_ms")) == (None, None, None)


def test_queue_changes_apply_to_later_enqueues_only(store):
    store.queues.create("q", max_attempts=2)
    before = store.jobs.enqueue("k", None, queue="q")
    store.queues.update("q", max_attempts=9)
    after = store.jobs.enqueue("k", None, queue="q")
    assert (store.jobs.get(before).max_attempts, store.jobs.get(after).max_attempts) == (2, 9)


@pytest.mark.parametrize("options, code", [
    ({"retry_delay": -1}, "TN1001"), ({"retry_backoff": 1}, "TN1002"), ({"retention": 0}, "TN1001"),
    ({"dead_letter": "q"}, "TN1001"), ({"debounce": 0}, "TN1001"), ({"policy": "short"}, "TN1001"),
    ({"concurrency_limit": 2}, "TN1001"), ({"colour": "red"}, "TN1001"),
])
def test_invalid_job_options_are_coded_and_write_nothing(store, options, code):
    with refused(code):
        store.jobs.enqueue("k", None, queue="q", **options)
    with refused(code):
        store.jobs.enqueue_many([{"kind": "k"}, {"kind": "k", "queue": "q", **options}])
    assert store.jobs.counts()["pending"] == 0


def test_fixed_retry_delay_of_the_queue_replaces_the_worker_backoff(store, clock):
    store.queues.create("q", retry_delay=3)
    store.jobs.enqueue("k", None, queue="q")
    for _ in range(2):
        claim = store.jobs.claim("k", owner="w")
        failed = store.jobs.fail(claim.lease, "boom")
        assert failed.run_at == clock() + 3000
        clock.advance(3000)


def test_exponential_retry_backoff_with_jitter_and_cap(store, clock, rand):
    store.queues.create("q", retry_delay=1, retry_backoff=True, retry_delay_max=3, max_attempts=9)
    store.jobs.enqueue("k", None, queue="q")
    rand.value = 0.0  # jitter factor 0.5 + random/2 = 0.5
    expected = [500, 1000, 1500, 1500]  # 1 s, 2 s, 4 s -> capped at 3 s; times 0.5
    for want in expected:
        claim = store.jobs.claim("k", owner="w")
        assert store.jobs.fail(claim.lease, "boom").run_at == clock() + want
        clock.advance(want)
    rand.value = 0.999999
    claim = store.jobs.claim("k", owner="w")
    assert store.jobs.fail(claim.lease, "boom").run_at == clock() + 2999


def test_without_a_queue_retry_policy_the_worker_backoff_applies(store, clock, rand):
    """spec 4.5: random=0 -> 500 ms after the first failure."""
    store.jobs.enqueue("k", None, queue="q")
    claim = store.jobs.claim("k", owner="w")
    assert store.jobs.fail(claim.lease, "boom").run_at == clock() + 500


def test_pause_stops_claims_in_every_process_and_resume_restores_them(store, other):
    store.jobs.enqueue("k", 1, queue="slow")
    store.jobs.enqueue("k", 2, queue="fast")
    assert store.queues.pause("slow").paused is True
    got = other.jobs.claim_many("k", owner="other", limit=10)
    assert [c.job.queue for c in got] == ["fast"]
    assert other.jobs.claim("k", owner="other", queues="slow") is None
    store.jobs.enqueue("k", 3, queue="slow")  # enqueues still land while paused
    assert store.queues.resume("slow").paused is False
    assert len(other.jobs.claim_many("k", owner="other", limit=10, queues="slow")) == 2


def test_delete_refuses_while_live_jobs_exist_and_force_deletes_them(store, clock):
    live = store.jobs.enqueue("k", None, queue="q")
    claimed = store.jobs.enqueue("k", None, queue="q2")
    store.jobs.claim("k", owner="w", queues="q2")
    store.subscribe("evt", "q")
    with refused("TN3002") as ei:
        store.queues.delete("q")
    assert ei.value.details["live"] == 1
    assert store.jobs.get(live).state == "pending"
    with refused("TN3002"):
        store.queues.delete("q2")
    assert store.queues.delete("q", force=True) == 1
    assert store.jobs.get(live) is None
    assert store.queues.subscriptions() == []
    with refused("TN3001"):
        store.queues.get("q")
    assert store.queues.delete("q2", force=True) == 1
    assert store.jobs.get(claimed) is None


def test_delete_of_a_queue_with_only_settled_jobs_removes_them(store):
    jid = store.jobs.enqueue("k", None, queue="q")
    claim = store.jobs.claim("k", owner="w")
    store.jobs.complete(claim.lease, {"ok": 1})
    assert store.queues.delete("q") == 1
    assert store.jobs.get(jid) is None
    store.jobs.enqueue("k", None, queue="q")  # the name is free again: recreated with defaults
    assert store.queues.get("q").policy == "standard"


def test_policy_changes_only_while_the_queue_is_empty(store):
    store.queues.create("q", policy="short")
    jid = store.jobs.enqueue("k", None, queue="q")
    with refused("TN3002"):
        store.queues.update("q", policy="exclusive")
    with refused("TN3002"):
        store.queues.create("q", policy="standard", max_attempts=2)
    assert (store.queues.get("q").policy, store.queues.get("q").max_attempts) == ("short", None)
    store.queues.create("q", policy="short", max_attempts=2)  # same policy: fine
    store.jobs.cancel(jid)
    assert store.queues.update("q", policy="exclusive").policy == "exclusive"
    assert column(store, jid, "policy") == "short"  # settled rows keep the policy they ran under


def test_job_without_key_in_a_policy_queue_uses_the_queue_wide_key(store):
    store.queues.create("q", policy="short")
    a = store.jobs.enqueue("k", 1, queue="q")
    assert store.jobs.enqueue("other-kind", 2, queue="q") == a
    assert column(store, a, "singleton_key") == ""
    assert len(jobs_in(store, "q")) == 1
    assert raw(store, "SELECT count(*) FROM tenure_jobs WHERE queue = ?", ("q",)) == [(1,)]
