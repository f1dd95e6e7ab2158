"""A root call refused inside the caller's own transaction (TN2071) cannot be swallowed.

``with ctx.transaction() as tx: ... try: ctx.sleep(60) except Exception: pass`` used to commit:
the job was done with the sleep skipped (the refusal, ``NestedRootCall``, is an ordinary
exception). Now the transaction remembers the refusal and will not commit: a block that ends
normally after it is rolled back and raises TN2071 at its end; and the attempt (a flow node, an
inline task) fails with TN2071 whatever the code did next — let it through, caught the block's
error and returned, or opened another ``ctx.transaction()`` (which raises it again at once) —
with a WARNING when it was caught (outcome ``swallowed_refusal``). Both engines, the injected
clock (docs/guarantees.md, "A root call inside your own block")."""

from __future__ import annotations

import logging

import pytest

import tenure
from tenure.errors import NestedRootCall
from tenure.flow import Flow

from ._support import rows, wait_state

TABLE = "t_refused_writes"


def _table(store) -> None:
    with store.transaction() as tx:
        tx.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id INTEGER PRIMARY KEY)")


def _written(store) -> list:
    with store.transaction() as tx:
        return [r[0] for r in tx.execute(f"SELECT id FROM {TABLE} ORDER BY id").fetchall()]


def _refused_call(call: str, ctx) -> None:
    """The root call the handler makes inside its own open block, and swallows."""
    if call == "sleep":
        ctx.sleep(60)  # a durable step: a root transaction of its own
    elif call == "enqueue":
        ctx.store.jobs.enqueue("child", None, id="child-of-refused")
    elif call == "nested":
        with ctx.transaction():
            pass
    else:
        raise AssertionError(call)


def _block(kind: str, ctx):
    return ctx.transaction() if kind == "ctx" else ctx.store.transaction()


def _assert_failed_with_tn2071(store, jid: str) -> None:
    job = wait_state(store, jid, "dead")
    assert job.attempts == 1 and job.result is None
    assert "TN2071" in (job.last_error or "") or "NestedRootCall" in (job.last_error or ""), job.last_error
    assert _written(store) == []  # the block's own write was rolled back with it
    assert store.jobs.get("child-of-refused") is None
    assert not [n for n, _, _ in rows(store, jid) if n.startswith("__tenure_step:")]  # no sleep recorded


@pytest.mark.parametrize("after", ["lets it through", "catches it and returns", "opens another block"])
@pytest.mark.parametrize("call", ["sleep", "enqueue", "nested"])
@pytest.mark.parametrize("block", ["ctx", "store"])
def test_a_handler_that_swallows_a_refused_root_call_fails_with_tn2071(any_store, caplog, block, call, after):
    _table(any_store)
    seen: list = []

    def handler(payload, ctx):
        try:
            with _block(block, ctx) as tx:
                tx.execute(f"INSERT INTO {TABLE} (id) VALUES (1)")
                try:
                    _refused_call(call, ctx)
                except Exception as exc:  # noqa: BLE001 - the mistake under test
                    seen.append(getattr(exc, "code", type(exc).__name__))
                if block == "ctx":
                    tx.result = "committed"
        except NestedRootCall as exc:  # raised at the block's end: it was rolled back
            seen.append(("at the end", exc.code))
            if after == "lets it through":
                raise
        if after == "opens another block":
            with ctx.transaction() as tx:  # would commit the completion: raises the refusal again
                tx.result = "second block"
        return "went on"

    worker = any_store.jobs.create_worker({"k": handler}, poll_interval=0.02).start()
    try:
        with caplog.at_level(logging.WARNING, logger="tenure.jobs"):
            jid = any_store.jobs.enqueue("k", None, max_attempts=1)
            _assert_failed_with_tn2071(any_store, jid)  # without the fix: done, the call skipped
    finally:
        worker.stop(2)
    assert seen == ["TN2071", ("at the end", "TN2071")]
    warned = [r for r in caplog.records if getattr(r, "outcome", None) == "swallowed_refusal"]
    # the second block raised the refusal again, and the handler let that one through
    assert len(warned) == (1 if after == "catches it and returns" else 0)
    if warned:
        assert warned[0].job_id == jid and "returned" in warned[0].getMessage()
    assert worker.stats()["failures"] == 1


def test_an_async_handler_that_swallows_a_refused_root_call_fails_too(any_store):
    _table(any_store)

    async def handler(payload, ctx):
        try:
            async with ctx.transaction() as tx:
                tx.execute(f"INSERT INTO {TABLE} (id) VALUES (1)")
                try:
                    ctx.sleep(60)
                except Exception:  # noqa: BLE001
                    pass
                tx.result = "committed"
        except Exception:  # noqa: BLE001
            pass
        return "went on"

    worker = any_store.jobs.create_worker({"k": handler}, poll_interval=0.02).start()
    try:
        jid = any_store.jobs.enqueue("k", None, max_attempts=1)
        _assert_failed_with_tn2071(any_store, jid)
    finally:
        worker.stop(2)


def test_store_transaction_will_not_commit_after_a_caught_refusal(any_store):
    """Outside any worker: the block that caught the refusal and ended normally is rolled back
    (tx.jobs and the application's SQL alike) and raises TN2071 at its end, chained to it."""
    _table(any_store)
    with pytest.raises(NestedRootCall, match="rolled back") as raised:
        with any_store.transaction() as tx:
            tx.execute(f"INSERT INTO {TABLE} (id) VALUES (1)")
            try:
                any_store.jobs.enqueue("k", None, id="root")
            except NestedRootCall:
                pass
            tx.jobs.enqueue("k", None, id="via-tx")  # still usable inside the block
    assert isinstance(raised.value.__cause__, NestedRootCall) and raised.value.code == "TN2071"
    assert _written(any_store) == []
    assert any_store.jobs.get("via-tx") is None and any_store.jobs.get("root") is None
    with any_store.transaction() as tx:  # the next block is a fresh one: it commits
        tx.jobs.enqueue("k", None, id="after")
    assert any_store.jobs.get("after") is not None


def _refusing_flow(name: str, is_async: bool, after: str) -> Flow:
    flow = Flow(name, revision="1", output="write")

    def body(ctx) -> str:
        try:
            with ctx.store.transaction() as tx:
                tx.execute(f"INSERT INTO {TABLE} (id) VALUES (1)")
                try:
                    ctx.sleep(60)
                except Exception:  # noqa: BLE001
                    pass
        except NestedRootCall:
            if after == "lets it through":
                raise
        return "went on"

    if is_async:
        @flow.task(name="write", version=1)
        async def write_async(ctx):
            return body(ctx)
    else:
        @flow.task(name="write", version=1)
        def write(ctx):
            return body(ctx)
    return flow


@pytest.mark.parametrize("after", ["lets it through", "catches it and returns"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_flow_task_that_swallows_a_refused_root_call_fails_its_node(any_store, start_runner, caplog,
                                                                      is_async, after):
    _table(any_store)
    flow = _refusing_flow("refusing", is_async, after)
    start_runner(any_store, [flow], concurrency=1)
    with caplog.at_level(logging.WARNING, logger="tenure.flow"):
        run = any_store.jobs.enqueue("refusing", {"input": None}, id="run-refusing", max_attempts=1)
        job = wait_state(any_store, run, "dead")
    assert "node 'write'" in job.last_error and "NestedRootCall" in job.last_error, job.last_error
    assert "write" not in {n for n, _, _ in rows(any_store, run)}  # no value saved
    assert _written(any_store) == []
    warned = [r for r in caplog.records if "swallowed a root call refused" in r.getMessage()]
    assert len(warned) == (0 if after == "lets it through" else 1)


@pytest.mark.parametrize("after", ["lets it through", "catches it and returns"])
def test_inline_reports_a_swallowed_refusal_as_the_task_s_failure(sqlite_store, after):
    """inline() agrees with the worker: a step inside the task's own transaction is refused
    (TN2071, not a park), and the task fails with it whatever it did next."""
    from tenure.testing import inline

    app = tenure.App(store=sqlite_store)
    _table(sqlite_store)

    @app.task(name="refusing")
    def refusing(ctx) -> str:
        try:
            with sqlite_store.transaction() as tx:
                tx.execute(f"INSERT INTO {TABLE} (id) VALUES (1)")
                try:
                    ctx.sleep(60)
                except Exception:  # noqa: BLE001
                    pass
        except NestedRootCall:
            if after == "lets it through":
                raise
        return "went on"

    with inline(app) as calls:
        handle = refusing.enqueue()
    assert calls == [handle] and handle.value is None
    assert isinstance(handle.error, NestedRootCall) and handle.error.code == "TN2071"
    with pytest.raises(tenure.errors.JobDead, match="TN2071|rolled back|refused"):
        handle.result()
    assert _written(sqlite_store) == []
