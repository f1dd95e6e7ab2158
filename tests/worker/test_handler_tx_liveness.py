"""Liveness of the handler transaction, both engines.

- A block held open for 3x its lease (a hot row, a slow statement) completes exactly once: the
  block holds the job row locked from its open to its COMMIT, so nothing can claim the job
  meanwhile, and the completion judges the lease at the open. (It used to be refused at COMMIT
  with TN2067, reclaimed, and refused again: a loop.)
- An async handler that awaits inside its block does not make its siblings on the worker's event
  loop fail with TN2071: their own blocks open (on SQLite once the first one ends, without
  blocking the loop), and on PostgreSQL their root calls work too.

Leases are moved with the injected clock; renewal is off, so only the block can keep the lease."""

from __future__ import annotations

import asyncio
import threading

import pytest

import tenure

from ._wk import Outcomes, counter_table, counter_value, ph, wait_for

TABLE = "tn_w_htx_live"
LEASE_MS = 1000


def test_a_block_held_for_three_leases_completes_exactly_once(any_store, other_store, make_worker, clock):
    """The clock passes three leases while the block is open; a claimer elsewhere finds nothing
    to reclaim meanwhile (PostgreSQL: the row is locked; SQLite: the block is the file's one
    write transaction, so the claimer would only wait: not tried here); the block then commits:
    one attempt, one increment, one outcome, completed."""
    counter_table(any_store, TABLE)
    seen = Outcomes()
    in_block, go = threading.Event(), threading.Event()
    sql = f"UPDATE {TABLE} SET n = n + {ph(any_store)} WHERE id = 1"

    def handler(payload, ctx):
        with ctx.transaction() as tx:
            tx.execute(sql, (1,))
            tx.result = {"attempt": ctx.attempt}
            in_block.set()
            go.wait(10)

    job_id = any_store.jobs.enqueue("k")
    w = make_worker(
        any_store,
        {"k": handler},
        renew=False,
        lease=LEASE_MS / 1000,
        concurrency=2,
        poll_interval=0.01,
        on_outcome=seen,
    )
    w.start()
    assert in_block.wait(10)
    clock.advance(3 * LEASE_MS)
    if any_store.dialect == "postgres":
        assert other_store().jobs.claim(["k"], owner="thief") is None
    go.set()
    wait_for(lambda: any_store.jobs.get(job_id).state == "done", what="the job")
    wait_for(lambda: len(seen) >= 1, what="the outcome")
    job = any_store.jobs.get(job_id)
    assert (job.result, job.attempts) == ({"attempt": 1}, 1)
    assert [e["outcome"] for e in seen.events] == ["completed"]
    assert counter_value(any_store, TABLE) == 1
    assert w.stats()["lost_settlements"] == 0


@pytest.mark.parametrize("engine_url", ["postgres"], indirect=True)
def test_a_block_waiting_on_a_hot_row_for_three_leases_completes_once(
    any_store, make_worker, clock, engine_url
):
    """PostgreSQL: another transaction holds the application row the block updates while the
    clock passes three leases; once it lets go, the block commits once (attempt 1)."""
    import psycopg

    counter_table(any_store, TABLE)
    seen = Outcomes()
    started = threading.Event()

    def handler(payload, ctx):
        started.set()
        with ctx.transaction() as tx:
            tx.execute(f"UPDATE {TABLE} SET n = n + 1 WHERE id = 1")  # waits on the hot row
            tx.result = {"attempt": ctx.attempt}

    with psycopg.connect(engine_url) as hot:
        hot.execute(f"UPDATE {TABLE} SET n = n + 100 WHERE id = 1")  # holds the row lock (no commit yet)
        job_id = any_store.jobs.enqueue("k")
        w = make_worker(
            any_store,
            {"k": handler},
            renew=False,
            lease=LEASE_MS / 1000,
            concurrency=2,
            poll_interval=0.01,
            on_outcome=seen,
        )
        w.start()
        assert started.wait(10)
        with psycopg.connect(engine_url, autocommit=True) as probe:
            wait_for(
                lambda: probe.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0] > 0,
                what="the block to wait on the hot row",
            )
        clock.advance(3 * LEASE_MS)
        hot.commit()
    wait_for(lambda: any_store.jobs.get(job_id).state == "done", what="the job")
    wait_for(lambda: len(seen) >= 1, what="the outcome")
    job = any_store.jobs.get(job_id)
    assert (job.result, job.attempts) == ({"attempt": 1}, 1)
    assert [e["outcome"] for e in seen.events] == ["completed"]
    assert counter_value(any_store, TABLE) == 101


def test_async_siblings_are_unaffected_by_a_block_that_awaits(any_store, make_worker):
    """Two async handlers on the worker's one event loop. A opens its block and awaits inside it;
    meanwhile B opens its own block, which commits (PostgreSQL: at once, while A's is still open;
    SQLite: as soon as A's ends, the loop never blocked), and B's root store call works on
    PostgreSQL. On SQLite that root call is refused at once with TN2071 saying why (it would
    freeze the loop A needs), never a deadlock. Before that fix, B's block was refused (TN2071)."""
    counter_table(any_store, TABLE)
    with any_store.transaction() as tx:
        tx.execute(f"INSERT INTO {TABLE} (id, n) VALUES (2, 0)")  # B's row: not a hot row shared with A
    pg = any_store.dialect == "postgres"
    sql = f"UPDATE {TABLE} SET n = n + 1 WHERE id = {ph(any_store)}"
    a_in, b_started, b_done = threading.Event(), threading.Event(), threading.Event()
    root: list = []
    seen = Outcomes()

    async def until(event: threading.Event) -> None:
        while not event.is_set():
            await asyncio.sleep(0.002)

    async def a(payload, ctx):
        await until(b_started)  # on SQLite, B must be running before A's block holds the store
        async with ctx.transaction() as tx:
            tx.execute(sql, (1,))
            a_in.set()
            if pg:
                await asyncio.wait_for(until(b_done), 10)  # B's whole block runs while A's is open
            else:
                await asyncio.sleep(0.05)
            tx.result = "a"

    async def b(payload, ctx):
        b_started.set()
        await until(a_in)
        try:
            root.append(ctx.store.jobs.get(ctx.job.id).state)
        except tenure.TenureError as exc:
            root.append((exc.code, str(exc)))
        async with ctx.transaction() as tx:
            tx.execute(sql, (2,))
            tx.result = "b"
        b_done.set()

    ids = [any_store.jobs.enqueue("a"), any_store.jobs.enqueue("b")]
    w = make_worker(
        any_store, {"a": a, "b": b}, concurrency=2, renew=False, poll_interval=0.01, on_outcome=seen
    )
    w.start()
    wait_for(lambda: all(any_store.jobs.get(i).state == "done" for i in ids), what="both jobs done")
    assert [any_store.jobs.get(i).result for i in ids] == ["a", "b"]
    with any_store.transaction() as tx:
        assert tx.execute(f"SELECT n FROM {TABLE} ORDER BY id").fetchall() == [(1,), (1,)]
    if pg:
        assert root == ["leased"]
    else:
        ((code, message),) = root
        assert code == "TN2071" and "another task on this event loop" in message
    wait_for(lambda: len(seen) == 2, what="two outcomes")
    assert sorted(e["outcome"] for e in seen.events) == ["completed", "completed"]


def test_a_nested_block_in_the_same_task_is_still_refused(any_store, make_worker):
    """Per-task tracking keeps D7 for the task itself: a root call or a second
    block inside an async handler's own open block is refused (TN2071); the outer block then
    does not commit (TN2071 at its end) and the attempt fails with it."""
    codes: list = []

    async def handler(payload, ctx):
        try:
            async with ctx.transaction() as tx:
                for attempt in (lambda: ctx.store.jobs.get(ctx.job.id), lambda: ctx.transaction().__enter__()):
                    try:
                        attempt()
                    except tenure.TenureError as exc:
                        codes.append(exc.code)
                tx.result = "outer"
        except tenure.TenureError as exc:
            codes.append(("at the end", exc.code))
            raise

    job_id = any_store.jobs.enqueue("k", max_attempts=1)
    w = make_worker(any_store, {"k": handler}, poll_interval=0.01)
    w.start()
    wait_for(lambda: any_store.jobs.get(job_id).state == "dead", what="the job")
    assert codes == ["TN2071", "TN2071", ("at the end", "TN2071")]
    assert any_store.jobs.get(job_id).result is None
