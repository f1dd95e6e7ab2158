"""The handler transaction (``ctx.transaction()``): a handler's writes to the store's own
database and the job's fenced completion commit together, so they happen exactly once per job
however many attempts run. Each scenario is run twice: through ``ctx.transaction()`` (the counter
ends exactly at the number of jobs) and with a plain increment outside it (the same scenario shows
the duplicate the transaction prevents). The kill -9 version is in ``test_processes.py``.

Leases are lost by moving the injected clock; renewal is off so the stalled attempt keeps its
stale lease."""

from __future__ import annotations

import threading

import pytest

import tenure

from ._wk import Outcomes, counter_table, counter_value, ph, wait_for

TABLE = "tn_w_htx_counter"


def _increment(store, ctx, mode):
    """Add 1 to the counter in an ordinary application transaction that commits on its own (the
    "plain" handler: what the handler transaction exists to prevent)."""
    assert mode == "plain"
    with store.transaction() as tx:
        tx.execute(f"UPDATE {TABLE} SET n = n + {ph(store)} WHERE id = 1", (1,))


@pytest.mark.parametrize("mode", ["tx", "plain"])
def test_lease_passing_mid_block_still_commits_once(any_store, make_worker, clock, mode):
    """The lease runs out while the handler's block is open: the block holds the job row locked
    since it opened, so no other attempt can claim the job meanwhile, and the commit (its expiry
    judged at the open) lands once: counter == 1, attempt 1, nothing lost (until
    then the commit was refused with TN2067 and the job reclaimed). A plain increment made outside
    the transaction is reclaimed meanwhile and lands twice."""
    counter_table(any_store, TABLE)
    seen = Outcomes()
    in_block, go = threading.Event(), threading.Event()
    sql = f"UPDATE {TABLE} SET n = n + {ph(any_store)} WHERE id = 1"

    def handler(payload, ctx):
        if mode == "tx":
            with ctx.transaction() as tx:
                tx.execute(sql, (1,))
                tx.result = {"attempt": ctx.attempt}
                if ctx.attempt == 1:
                    in_block.set()
                    go.wait(10)
            return "ignored: tx.result is the result"
        _increment(any_store, ctx, mode)
        if ctx.attempt == 1:
            in_block.set()
            go.wait(10)
        return {"attempt": ctx.attempt}

    job_id = any_store.jobs.enqueue("k")
    w = make_worker(any_store, {"k": handler}, renew=False, lease=1, concurrency=2, poll_interval=0.01,
                    on_outcome=seen)
    w.start()
    assert in_block.wait(10)
    clock.advance(1000)
    if mode == "plain":
        seen.wait(1)  # the worker reclaims its own expired job and completes it meanwhile
    go.set()
    wait_for(lambda: any_store.jobs.get(job_id).state == "done", what="the job")
    if mode == "tx":
        events = seen.wait(1)
        job = any_store.jobs.get(job_id)
        assert (job.result, job.attempts) == ({"attempt": 1}, 1)
        assert [e["outcome"] for e in events] == ["completed"]
        assert counter_value(any_store, TABLE) == 1
        return
    events = seen.wait(2)
    job = any_store.jobs.get(job_id)
    assert (job.result, job.attempts) == ({"attempt": 2}, 2)
    lost = seen.of("lost")
    assert len(lost) == 1 and lost[0]["attempt"] == 1 and len(seen.of("completed")) == 1
    assert counter_value(any_store, TABLE) == 2  # the duplicate the transaction prevents
    assert len(events) == 2


@pytest.mark.parametrize("mode", ["tx", "plain"])
def test_superseded_attempt_cannot_open_the_block(any_store, make_worker, clock, mode):
    """A stalled attempt whose job was reclaimed (and completed) by a newer attempt reaches its
    block too late: ``ctx.transaction()`` refuses at once (the fence, TN2065 here) and nothing is
    written: counter == 1. A plain increment after the stall lands anyway: counter == 2."""
    counter_table(any_store, TABLE)
    seen = Outcomes()
    started, go, refused = threading.Event(), threading.Event(), []
    sql = f"UPDATE {TABLE} SET n = n + {ph(any_store)} WHERE id = 1"

    def handler(payload, ctx):
        if ctx.attempt == 1:
            started.set()
            go.wait(10)
        if mode == "plain":
            _increment(any_store, ctx, mode)
            return ctx.attempt
        try:
            with ctx.transaction() as tx:
                tx.execute(sql, (1,))
                tx.result = ctx.attempt
        except tenure.TenureError as exc:
            refused.append(exc.code)
            raise

    job_id = any_store.jobs.enqueue("k")
    w = make_worker(any_store, {"k": handler}, renew=False, lease=1, concurrency=2, poll_interval=0.01,
                    on_outcome=seen)
    w.start()
    assert started.wait(10)
    clock.advance(1000)
    seen.wait(1)  # attempt 2 (the worker's own reclaim) completed
    go.set()
    seen.wait(2)
    assert [e["outcome"] for e in seen.events] == ["completed", "lost"]
    assert seen.events[1]["code"] == "TN2065"
    job = any_store.jobs.get(job_id)
    assert (job.state, job.result, job.attempts) == ("done", 2, 2)
    if mode == "tx":
        assert refused == ["TN2065"]
        assert counter_value(any_store, TABLE) == 1
    else:
        assert counter_value(any_store, TABLE) == 2


def test_many_jobs_through_the_handler_transaction_count_exactly(any_store, make_worker):
    """Many jobs, several slots: the counter ends at the number of jobs; follow-up jobs enqueued
    through tx.jobs appear with the commit."""
    counter_table(any_store, TABLE)
    sql = f"UPDATE {TABLE} SET n = n + {ph(any_store)} WHERE id = 1"

    def handler(payload, ctx):
        with ctx.transaction() as tx:
            tx.execute(sql, (1,))
            if payload % 10 == 0:
                tx.jobs.enqueue("follow", {"of": payload})
            tx.result = payload

    any_store.jobs.enqueue_many([{"kind": "k", "payload": i} for i in range(60)])
    w = make_worker(any_store, {"k": handler, "follow": lambda p, ctx: p}, concurrency=4)
    w.start()
    wait_for(lambda: any_store.jobs.counts()["done"] == 66, what="60 jobs and 6 follow-ups done")
    # the worker counts a completion just after its commit: wait for the counters too
    wait_for(lambda: w.stats()["completions"] == 66, what="every completion counted")
    assert counter_value(any_store, TABLE) == 60
    assert w.stats()["completions"] == 66 and w.stats()["lost_settlements"] == 0


def test_a_bad_tx_result_rolls_back_and_releases_the_store(any_store, make_worker):
    """A non-JSON ``tx.result`` fails the attempt, rolls the block back and leaves the store usable
    (the transaction is closed, not leaked)."""
    counter_table(any_store, TABLE)
    sql = f"UPDATE {TABLE} SET n = n + {ph(any_store)} WHERE id = 1"

    def handler(payload, ctx):
        with ctx.transaction() as tx:
            tx.execute(sql, (1,))
            tx.result = object()

    job_id = any_store.jobs.enqueue("k", max_attempts=1)
    w = make_worker(any_store, {"k": handler})
    w.start()
    wait_for(lambda: any_store.jobs.get(job_id).state == "dead", timeout=5, what="the failure")
    assert "JSON" in any_store.jobs.get(job_id).last_error
    assert counter_value(any_store, TABLE) == 0
    other = any_store.jobs.enqueue("k2")  # the store is not wedged
    assert any_store.jobs.get(other).state == "pending"


def test_a_nested_handler_transaction_is_refused_not_deadlocked(any_store, make_worker):
    """Opening ctx.transaction() inside an open one (or inside store.transaction()) is a coded
    refusal (TN2071), never a deadlock; caught, it still keeps the outer block from committing
    (TN2071 at its end) and fails the attempt (tests/flow/test_swallowed_refusal.py)."""
    codes = []

    def handler(payload, ctx):
        try:
            with ctx.transaction() as tx:
                try:
                    with ctx.transaction():
                        pass
                except tenure.TenureError as exc:
                    codes.append(exc.code)
                tx.result = "outer committed"
        except tenure.TenureError as exc:
            codes.append(("at the end", exc.code))
            raise

    job_id = any_store.jobs.enqueue("k", max_attempts=1)
    w = make_worker(any_store, {"k": handler})
    w.start()
    wait_for(lambda: any_store.jobs.get(job_id).state == "dead", timeout=5, what="the job")
    assert codes == ["TN2071", ("at the end", "TN2071")]
    assert any_store.jobs.get(job_id).result is None


def test_placeholders_follow_the_dialect(any_store, make_worker):
    """tx.execute takes the dialect's placeholders: ``?`` on SQLite, ``%s`` on PostgreSQL
    (``store.dialect``)."""
    counter_table(any_store, TABLE)
    mark = {"sqlite": "?", "postgres": "%s"}[any_store.dialect]

    def handler(payload, ctx):
        with ctx.transaction() as tx:
            tx.execute(f"UPDATE {TABLE} SET n = {mark} WHERE id = {mark}", (41, 1))
            tx.result = tx.execute(f"SELECT n + {mark} FROM {TABLE} WHERE id = 1", (1,)).fetchone()[0]

    job_id = any_store.jobs.enqueue("k")
    w = make_worker(any_store, {"k": handler})
    w.start()
    wait_for(lambda: any_store.jobs.get(job_id).state == "done", timeout=5, what="the job")
    assert any_store.jobs.get(job_id).result == 42
