"""Unhandled kinds (tenure.kinds, docs/operations.md "Unhandled kinds") on both engines:
queued jobs whose kind no LIVE worker handles, by queue and kind, in the read itself, in
``tenure stats`` (text and --json), in the dashboard's ``/api/overview`` and ``/metrics``, and
the WARNING a worker logs at start for queued kinds in its queues it cannot run.

Liveness is judged on the store's clock: a worker's heartbeat row is written by its maintenance
service at start; "no longer live" is read at a later ``now`` (nothing waits for an expiry)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import tenure
from tenure import kinds
from tenure.dashboard import create_app
from tenure.engine.rows import QueuedKindRow
from tenure.insights import Insights


def _until(pred, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _live_worker(store, make_worker, handlers, **options):
    """A started worker over ``handlers`` whose heartbeat row is in the registry."""
    w = make_worker(store, handlers, poll_interval=0.01, **options).start()
    _until(lambda: any(r.id == w.owner for r in Insights(store).workers()), "the worker's heartbeat row")
    return w


def _backlog(store) -> dict[str, str]:
    """Queued jobs: two of a kind enqueued from a script run directly (``__main__.add``), one of a
    handled kind, one in a queue no worker claims from, one dead letter waiting for an operator."""
    store.queues.create("payments", dead_letter="payments.dead")
    jobs = store.jobs
    first = jobs.enqueue("__main__.add", [1, 2])
    jobs.enqueue("__main__.add", [3, 4])
    jobs.enqueue("tasks.add", [5, 6], delay=3600)  # handled (and not due: never claimed here)
    jobs.enqueue("emails.send", {"to": "ops"}, queue="emails")
    jobs.enqueue("payments.charge", {"n": 1}, queue="payments.dead")
    return {"first": first}


def test_the_read_sorts_queued_jobs_by_who_can_run_them(any_store, clock, make_worker):
    store = any_store
    _backlog(store)
    t0 = clock.now
    report = kinds.read(store)
    # No live worker at all: nothing is "unhandled"; each queue with queued jobs is unserved
    # (the dead-letter queue is neither: its jobs wait for an operator by design).
    assert report.workers_alive == 0 and report.unhandled == [] and report.unhandled_jobs == 0
    assert [(u.queue, u.count, u.kinds) for u in report.unserved] == [
        ("default", 3, ("__main__.add", "tasks.add")), ("emails", 1, ("emails.send",))]

    clock.advance(5_000)
    _live_worker(store, make_worker, {"tasks.add": lambda p, ctx: sum(p)}, queues=["default"])
    report = kinds.read(store)
    assert report.workers_alive == 1 and report.unhandled_jobs == 2
    [u] = report.unhandled
    assert (u.queue, u.kind, u.count, u.oldest_created_at, u.age_ms) == ("default", "__main__.add", 2, t0, 5_000)
    assert u.near == ("tasks.add",)
    assert [(q.queue, q.count) for q in report.unserved] == [("emails", 1)]
    assert report.as_dict()["unhandled_kinds"] == [{"queue": "default", "kind": "__main__.add", "count": 2,
                                                   "oldest_created_at": t0, "age_ms": 5_000,
                                                   "near": ["tasks.add"]}]

    # Read past the liveness horizon, the same registry row no longer counts.
    later = kinds.read(store, now=clock.now + kinds.LIVE_MS + 1)
    assert later.workers_alive == 0 and later.unhandled == []
    assert [q.queue for q in later.unserved] == ["default", "emails"]

    # The overview carries the same report (the dashboard, stats and /metrics read it there).
    assert Insights(store, ttl=0).overview(fresh=True).kinds == report


def test_classify_handles_every_queue_shape():
    now = 10_000
    queued = [QueuedKindRow("default", "a.run", False, 3, 1_000),
              QueuedKindRow("default", "a.run", True, 2, 500),      # dead-letter copies in default
              QueuedKindRow("letters", "b.run", False, 1, 2_000),   # some queue's dead-letter queue
              QueuedKindRow("named", "c.run", False, 4, 3_000)]
    anywhere = kinds.LiveWorker(None, frozenset({"x.run"}))
    # A worker of every queue but the dead-letter ones: a.run is unhandled (copies not counted:
    # only a worker naming their queue takes them), letters is neither, named is unhandled.
    r = kinds.classify(queued, [anywhere], ["letters"], now)
    assert [(u.queue, u.kind, u.count, u.oldest_created_at) for u in r.unhandled] == [
        ("default", "a.run", 3, 1_000), ("named", "c.run", 4, 3_000)]
    assert r.unserved == []
    # A worker naming the dead-letter queue (and default) without the kinds: copies count too.
    naming = kinds.LiveWorker(frozenset({"default", "letters"}), frozenset({"x.run"}))
    r = kinds.classify(queued, [naming], ["letters"], now)
    assert [(u.queue, u.kind, u.count, u.oldest_created_at) for u in r.unhandled] == [
        ("default", "a.run", 5, 500), ("letters", "b.run", 1, 2_000)]
    assert [(q.queue, q.count) for q in r.unserved] == [("named", 4)]
    # A registry row without kinds handles anything: never an alarm.
    r = kinds.classify(queued, [kinds.LiveWorker(None, None)], [], now)
    assert r.unhandled == [] and r.unserved == []


def test_near_misses():
    handled = ["tasks.add", "tasks.sub", "email.send", "reports.build"]
    assert kinds.near_misses("__main__.add", handled) == ("tasks.add",)
    assert kinds.near_misses("emails.send", handled) == ("email.send",)
    assert kinds.near_misses("billing.charge", handled) == ()


def test_stats_json_and_text_show_unhandled_kinds(cli, engine_url, make_worker):
    store = tenure.connect(engine_url)
    try:
        _backlog(store)
        before = cli("stats", "--json").json()
        assert before["unhandled_jobs"] == 0 and before["unhandled_kinds"] == []
        assert [q["queue"] for q in before["unserved_queues"]] == ["default", "emails"]

        _live_worker(store, make_worker, {"tasks.add": lambda p, ctx: sum(p)}, queues=["default"])
        data = cli("stats", "--json").json()
        assert data["unhandled_jobs"] == 2
        [u] = data["unhandled_kinds"]
        assert (u["queue"], u["kind"], u["count"], u["near"]) == ("default", "__main__.add", 2, ["tasks.add"])
        assert u["age_ms"] >= 0 and u["oldest_created_at"] <= data["now"]
        assert [(q["queue"], q["count"]) for q in data["unserved_queues"]] == [("emails", 1)]
        text = cli("stats").out
        assert ("WARNING: 2 queued job(s) of kind __main__.add in queue default" in text
                and "no live worker handles this kind (did you mean tasks.add?)" in text)
        assert "no live worker for queue emails: 1 queued job(s)" in text
    finally:
        store.close(grace=1)


def _metrics(store) -> dict[tuple[str, tuple], float]:
    app = create_app(store)

    async def scrape() -> str:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
            resp = await c.get("/metrics")
            assert resp.status_code == 200
            overview = (await c.get("/api/overview")).json()
            assert overview["unhandled_jobs"] == 2 and overview["unhandled_kinds"][0]["kind"] == "__main__.add"
            return resp.text

    out = {}
    for fam in text_string_to_metric_families(asyncio.run(scrape())):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_gauge_per_queue_and_kind(live_store, make_worker):
    store = live_store
    _backlog(store)
    _live_worker(store, make_worker, {"tasks.add": lambda p, ctx: sum(p)}, queues=["default"])
    s = _metrics(store)
    assert s[("tenure_unhandled_jobs", (("kind", "__main__.add"), ("queue", "default")))] == 2
    assert not [k for k in s if k[0] == "tenure_unhandled_jobs" and k != (
        "tenure_unhandled_jobs", (("kind", "__main__.add"), ("queue", "default")))]
    assert s[("tenure_unserved_jobs", (("queue", "emails"),))] == 1
    assert ("tenure_unserved_jobs", (("queue", "payments.dead"),)) not in s


@pytest.mark.parametrize("elsewhere", [False, True], ids=["alone", "another-worker-handles-it"])
def test_a_worker_warns_at_start_for_queued_kinds_it_cannot_run(live_store, make_worker, caplog, elsewhere):
    store = live_store
    _backlog(store)
    if elsewhere:  # another live worker handles __main__.add: only an INFO line here (the queue is
        # paused so that worker runs none of them before this one starts)
        store.queues.pause("default")
        _live_worker(store, make_worker, {"__main__.add": lambda p, ctx: sum(p)}, queues=["default"])
    app = tenure.App(store=store)

    @app.task(name="tasks.add")
    def add(a: int, b: int) -> int:
        return a + b

    ready, stop = threading.Event(), threading.Event()
    caplog.set_level(logging.INFO, logger="tenure")
    runner = threading.Thread(target=app.run_worker, kwargs={"install_signals": False, "ready": ready,
                                                             "stop_event": stop, "queues": ["default"]})
    runner.start()
    try:
        assert ready.wait(20)
    finally:
        stop.set()
        runner.join(20)
    about = [r for r in caplog.records if r.name == "tenure.worker" and "__main__.add" in r.getMessage()]
    assert len(about) == 1
    [record] = about
    if elsewhere:
        assert record.levelno == logging.INFO and "another live worker handles that kind" in record.getMessage()
    else:
        assert record.levelno == logging.WARNING
        msg = record.getMessage()
        assert "2 queued job(s) of kind '__main__.add' in queue 'default'" in msg
        assert "did you mean 'tasks.add'?" in msg and "run as __main__" in msg
        assert record.kind == "__main__.add" and record.near == ["tasks.add"]
    # Nothing about the queues it does not claim from, nor about the kind it handles.
    assert not [r for r in caplog.records if r.name == "tenure.worker" and r.levelno == logging.WARNING
                and ("emails" in r.getMessage() or "'tasks.add' in queue" in r.getMessage())]


def test_enqueue_warns_when_live_workers_serve_the_queue_and_none_handles_the_kind(cli, engine_url, make_worker):
    """``tenure enqueue KIND``: the job is written either way; with a live worker on the queue
    that lacks the kind (a typo, an unqualified task name) a WARNING line names near misses.
    No warning for a handled kind, or when no live worker serves the queue (nothing is known)."""
    store = tenure.connect(engine_url)
    try:
        quiet = cli("enqueue", "tasks.ad", "--queue", "emails")
        assert quiet.err == ""  # no live worker claims from "emails"
        _live_worker(store, make_worker, {"tasks.add": lambda p, ctx: sum(p)}, queues=["default"])
        res = cli("enqueue", "tasks.ad", "--delay", "1h")
        assert res.err.strip() == ("tenure: WARNING: live workers claim from queue 'default' but none handles kind "
                                   "'tasks.ad': the job waits until one does; did you mean 'tasks.add'?")
        assert store.jobs.get(res.out.strip()).kind == "tasks.ad"
        assert cli("enqueue", "tasks.add", "--delay", "1h").err == ""
        assert cli("enqueue", "tasks.ad", "--queue", "emails").err == ""
    finally:
        store.close(grace=1)
