"""The canvas on the task API (tenure.canvas, docs/composition.md), both engines, one in-process
worker: what each step receives, the final results, failures, and what is refused at build."""

from __future__ import annotations

import threading

import pytest

import tenure
from tenure.errors import InvalidArgument, InvalidType, JobCancelled, JobDead


@pytest.fixture
def app(live_store):
    app = tenure.App(store=live_store)

    @app.task(name="add")
    def add(x: int, n: int = 0) -> int:
        return x + n

    @app.task(name="collect")
    def collect(results: list, label: str = "") -> dict:
        return {"label": label, "results": list(results), "failures": results.failures}

    @app.task(name="boom", max_attempts=1)
    def boom(x: int) -> int:
        raise ValueError(f"boom {x}")

    return app


@pytest.fixture
def running(app):
    stop = threading.Event()
    ready = threading.Event()
    t = threading.Thread(target=app.run_worker, kwargs={"concurrency": 8, "stop_event": stop, "ready": ready,
                                                        "install_signals": False, "poll_interval": 0.05})
    t.start()
    ready.wait(10)
    yield app
    stop.set()
    t.join(30)


def test_chain_passes_each_result_first_and_answers_the_last(running):
    add = running.tasks["add"]
    handle = tenure.chain(add.s(1, 2), add.s(10), add.s(n=100)).enqueue()
    assert handle.result(timeout=20) == 113
    assert len(handle.ids) == 3 and handle.final == [handle.ids[-1]]
    jobs = handle.jobs()
    assert [j.state for j in jobs] == ["done"] * 3
    # the dependent's payload is as enqueued: nothing rewrote it, the result was read at run time
    assert jobs[1].payload == {"args": [10], "kwargs": {}, "parents": "result"}
    assert [d.parent_id for d in running.store.jobs.dependencies(jobs[2].id)] == [jobs[1].id]
    assert (add.s(1) | add.s(2)).enqueue().result(timeout=20) == 3


def test_group_results_come_in_order_and_a_chain_after_a_group_receives_the_list(running):
    add, collect = running.tasks["add"], running.tasks["collect"]
    assert tenure.group([add.s(i, 1) for i in range(10)]).enqueue().result(timeout=20) == list(range(1, 11))
    handle = tenure.chain(tenure.group([add.s(i) for i in range(3)]), collect.s(label="after")).enqueue()
    assert handle.result(timeout=20) == {"label": "after", "results": [0, 1, 2], "failures": []}
    nested = tenure.chain(add.s(1), tenure.group([add.s(10), add.s(20)])).enqueue()
    assert nested.result(timeout=20) == [11, 21]


def test_chord_callback_receives_every_result_in_order(running):
    add, collect = running.tasks["add"], running.tasks["collect"]
    handle = tenure.chord(tenure.group([add.s(i, i) for i in range(20)]), collect.s(label="c")).enqueue()
    out = handle.result(timeout=30)
    assert out == {"label": "c", "results": [2 * i for i in range(20)], "failures": []}
    assert len(handle.ids) == 21


def test_chord_default_cancels_the_callback_when_a_member_dies(running):
    add, collect, boom = running.tasks["add"], running.tasks["collect"], running.tasks["boom"]
    handle = tenure.chord([add.s(1), boom.s(2)], collect.s()).enqueue()
    with pytest.raises(JobDead) as err:
        handle.result(timeout=20)
    assert "boom 2" in str(err.value)  # the step that died, not just "the callback was cancelled"
    callback = running.store.jobs.get(handle.final[0])
    assert callback.state == "cancelled" and callback.last_error.startswith("TN2103")
    with pytest.raises(JobCancelled):
        handle.handles()[0].result(timeout=1)


def test_chord_run_mode_hands_the_callback_the_failures(running):
    add, collect, boom = running.tasks["add"], running.tasks["collect"], running.tasks["boom"]
    handle = tenure.chord([add.s(1), boom.s(2), add.s(3)], collect.s(), on_parent_failure="run").enqueue()
    out = handle.result(timeout=20)
    assert out["results"] == [1, None, 3]
    [failure] = out["failures"]
    assert failure["index"] == 1 and failure["state"] == "dead" and failure["error"] == "boom 2"
    assert failure["job_id"] == handle.ids[1]


def test_bad_steps_are_refused_at_build_and_nothing_is_written(app):
    add = app.tasks["add"]
    with pytest.raises(InvalidType):
        tenure.chain(add.s(1), add.s(1, 2, 3)).enqueue()  # the parent's result + 3 arguments: too many
    with pytest.raises(InvalidType):
        tenure.chain(add.s(1), "not a step")
    with pytest.raises(InvalidArgument):
        tenure.group([])
    with pytest.raises(InvalidArgument):
        tenure.group([tenure.group([add.s(1)])])
    with pytest.raises(InvalidArgument):
        tenure.chord([add.s(1)], add.s(), on_parent_failure="maybe")
    with pytest.raises(InvalidArgument):
        add.s(1).set(depends_on=["x"])
    assert sum(app.store.jobs.counts().values()) == 0


def test_a_composition_is_written_in_the_callers_transaction(app):
    add = app.tasks["add"]
    store = app.store
    flow = tenure.chain(add.s(1), add.s(2))
    if store.dialect == "sqlite":
        import sqlite3

        def connect():
            return sqlite3.connect(store.engine.path)  # the driver's implicit transactions
    else:
        import psycopg

        def connect():
            return psycopg.connect(store.engine.conninfo)
    conn = connect()
    handle = flow.enqueue(conn=conn)
    conn.rollback()
    conn.close()
    assert all(store.jobs.get(i) is None for i in handle.ids)
    conn = connect()
    handle = flow.enqueue(conn=conn)
    conn.commit()
    conn.close()
    assert [j.waiting_on for j in handle.jobs()] == [0, 1]


def test_signature_options_and_repr(app):
    add = app.tasks["add"]
    sig = add.s(1, n=2).set(queue="q", priority=5)
    assert repr(sig) == "add.s(1, n=2)"
    handle = tenure.chain(sig, add.s()).enqueue()
    first, second = handle.jobs()
    assert (first.queue, first.priority) == ("q", 5) and second.queue == "default"
    assert handle.cancel() == {"cancelled": 2, "requested": 0}


def test_a_plain_handler_reads_its_parents_through_ctx(live_store):
    seen = {}

    def merge(payload, ctx):
        seen["parents"] = [(d.parent_id, d.job.state, d.job.result) for d in ctx.parents]
        return "merged"

    jobs = live_store.jobs
    jobs.enqueue("part", id="p1")
    jobs.enqueue("merge", id="m", depends_on=["p1"])
    worker = jobs.create_worker({"part": lambda payload, ctx: 41, "merge": merge}, poll_interval=0.05).start()
    try:
        from tenure.app import Handle

        assert Handle("m", live_store).result(timeout=20) == "merged"
    finally:
        worker.stop()
    assert seen["parents"] == [("p1", "done", 41)]
