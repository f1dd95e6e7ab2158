"""A freed slot wakes the dispatcher only when there may be work for it (Worker._release): the
last claim came back full (a backlog), or short at a queue that holds jobs back while a lease
stands (concurrency or group limit, singleton policy), or a wake-up waited for a slot. At light
load the waiter therefore makes no empty claim after each job, and no limited queue waits for a
poll. Both engines; every worker polls once an hour, so a job that runs within the test's
timeouts was never reached by a poll (each test also checks the poll counter)."""

from __future__ import annotations

import threading

import pytest

import tenure

from ._wk import wait_for

HOUR = 3600.0


def _all_done(store, ids) -> bool:
    return all(store.jobs.get(i).state == "done" for i in ids)


def _boom(payload, ctx):
    raise RuntimeError("no")


@pytest.mark.parametrize("outcome", ["done", "dead"])
def test_a_backlog_larger_than_the_slots_drains_without_polls(engine_url, outcome):
    """Completions refill their slots in their own transaction while the backlog lasts; failures
    settled dead refill nothing, and their freed slots are claimed for at once (the store wakes
    its workers after a failure, and a slot freed after a full claim wakes the dispatcher)."""
    store = tenure.connect(engine_url)
    ids = [store.jobs.enqueue("noop", i, max_attempts=1) for i in range(24)]
    handler = (lambda payload, ctx: None) if outcome == "done" else _boom
    w = store.jobs.create_worker({"noop": handler}, concurrency=2, poll_interval=HOUR)
    try:
        w.start()
        wait_for(lambda: all(store.jobs.get(i).state == outcome for i in ids), timeout=30,
                 what="the backlog drained")
        # The settler counts an outcome after its transaction commits, so the store can show the
        # last job settled a moment before the counter does: wait for the count, then check it.
        counter = "completions" if outcome == "done" else "failures"
        wait_for(lambda: w.stats()[counter] >= 24, timeout=10, what=f"{counter} counted")
        assert w.stats()[counter] == 24
        assert w.stats()["polls"] == 0
    finally:
        w.stop(grace=2)
        store.close()


def _limited(store, setup: str) -> list[str]:
    """Five jobs that can only run one at a time, by the queue's ``setup``."""
    if setup == "concurrency_limit":
        store.queues.create("one", concurrency_limit=1)
        return [store.jobs.enqueue("slow", i, queue="one") for i in range(5)]
    if setup == "group_limit":
        store.queues.create("one", group_limit=1)
        return [store.jobs.enqueue("slow", i, queue="one", group_key="g") for i in range(5)]
    store.queues.create("one", policy="singleton")
    return [store.jobs.enqueue("slow", i, queue="one", singleton_key="k") for i in range(5)]


@pytest.mark.parametrize("setup", ["concurrency_limit", "group_limit", "singleton"])
def test_a_queue_held_to_one_at_a_time_drains_without_polls(engine_url, setup):
    """Slots to spare, so every claim comes back short: without the claim's ``limit_held``
    answer, the freed slot would not wake the dispatcher and the second job would wait an hour."""
    store = tenure.connect(engine_url)
    ids = _limited(store, setup)
    running: list[int] = []
    overlap = threading.Lock()

    def slow(payload, ctx):
        assert overlap.acquire(blocking=False), "two jobs of the queue ran at once"
        try:
            running.append(payload)
        finally:
            overlap.release()

    w = store.jobs.create_worker({"slow": slow}, concurrency=4, poll_interval=HOUR)
    try:
        w.start()
        wait_for(lambda: _all_done(store, ids), timeout=30, what=f"the {setup} queue drained")
        assert sorted(running) == list(range(5))
        assert w.stats()["polls"] == 0
    finally:
        w.stop(grace=2)
        store.close()


def test_at_light_load_the_waiter_makes_no_empty_claim_after_a_job(engine_url):
    """Jobs enqueued one at a time from another store, each done before the next: the waiter
    claims once per job (when it hears it), never again when the job's slot frees."""
    store, producer = tenure.connect(engine_url), tenure.connect(engine_url)
    answers: list[int] = []
    claim_many = store.jobs.claim_many

    def counted(*args, **kw):
        got = claim_many(*args, **kw)
        answers.append(len(got))
        return got

    store.jobs.claim_many = counted  # type: ignore[method-assign]  # counts real claims
    w = store.jobs.create_worker({"noop": lambda payload, ctx: None}, concurrency=8, poll_interval=HOUR)
    try:
        w.start()
        wait_for(lambda: w._leading, what="the worker waiting")
        assert w.events.wait("idle", 1, timeout=10)
        # A first job: the claims of the start (and of becoming the waiter) are behind it.
        job = producer.jobs.enqueue("noop", -1)
        wait_for(lambda: producer.jobs.get(job).state == "done", what="the first job done")
        wait_for(lambda: w.stats()["in_flight"] == 0, what="its slot freed")
        before = len(answers)
        for i in range(20):
            job = producer.jobs.enqueue("noop", i)
            wait_for(lambda job=job: producer.jobs.get(job).state == "done", what="the job done")
            # the dispatcher at rest again after the job settled (its slot freed)
            wait_for(lambda: w.stats()["in_flight"] == 0 and not w._wake.is_set(), what="the slot freed")
        after = answers[before:]
        assert w.stats()["polls"] == 0
        assert sum(after) == 20, after
        assert after.count(0) == 0, (after, w.stats())
    finally:
        w.stop(grace=2)
        store.close()
        producer.close()


def test_a_chain_run_by_one_worker_needs_no_poll(engine_url):
    """A dependent becomes claimable when its parent completes, with no enqueue: the settling
    worker's own commit must still wake it (PostgreSQL: the release trigger's NOTIFY; SQLite:
    the completion counted loud, its trigger having changed more rows than it settled)."""
    store, producer = tenure.connect(engine_url), tenure.connect(engine_url)
    order: list[int] = []
    w = store.jobs.create_worker({"step": lambda payload, ctx: order.append(payload)}, concurrency=4,
                                 poll_interval=HOUR)
    try:
        w.start()
        wait_for(lambda: w._leading, what="the worker waiting")
        ids = [producer.jobs.enqueue("step", 0)]
        for i in range(1, 5):
            ids.append(producer.jobs.enqueue("step", i, depends_on=[ids[-1]]))
        wait_for(lambda: _all_done(producer, ids), timeout=30, what="the chain done")
        assert order == [0, 1, 2, 3, 4] and w.stats()["polls"] == 0
    finally:
        w.stop(grace=2)
        store.close()
        producer.close()
