"""``tenure queues``, ``jobs redrive``, ``schedules``, ``maintain --once`` and ``runs show`` through the
real console script on both engines, each checked against the store's public API."""

from __future__ import annotations

import threading
import time

import tenure

from .conftest import needs_queue_registry


def test_queues_create_pause_resume_and_redrive(cli, engine_url):
    needs_queue_registry()
    created = cli("queues", "create", "mail", "--max-attempts", "1", "--retry-delay", "30s",
                  "--concurrency-limit", "2", "--dead-letter", "mail-dlq", "--json").json()
    assert created["queue"] == "mail" and created["defaults"]["retry_delay"] == 30.0
    store = tenure.connect(engine_url)
    try:
        q = store.queues.get("mail")
        assert (q.max_attempts, q.concurrency_limit, q.dead_letter) == (1, 2, "mail-dlq")
        # A job that dies in "mail" is copied to "mail-dlq"; redrive moves it back.
        store.jobs.enqueue("mail.send", {"to": "x"}, queue="mail")
        store.jobs.fail(store.jobs.claim("mail.send", owner="t").lease, "smtp down")
        assert store.jobs.page(queue="mail-dlq").items, "the dead-letter copy"
    finally:
        store.close()

    assert cli("queues", "pause", "mail").out.strip() == "queue mail paused"
    listed = {q["name"]: q for q in cli("queues", "list", "--json").json()}
    assert listed["mail"]["paused"] is True and listed["mail"]["counts"]["dead"] == 1
    assert listed["mail"]["concurrency_limit"] == 2 and listed["mail-dlq"]["counts"]["pending"] == 1
    sqlite = engine_url.startswith("sqlite")  # engine-independent output checks run once
    if sqlite:
        assert "yes" in next(line for line in cli("queues", "list").out.splitlines() if line.startswith("mail "))
    assert cli("queues", "resume", "mail", "--json").json() == {"queue": "mail", "paused": False}

    assert cli("jobs", "redrive", "mail-dlq", "--json").json() == {"queue": "mail-dlq", "redriven": 1}
    store = tenure.connect(engine_url)
    try:
        assert not store.queues.get("mail").paused
        assert store.jobs.page(queue="mail", state="pending").items
    finally:
        store.close()

    res = cli("queues", "pause", "no-such-queue", expect=1)
    assert "[TN3001]" in res.err and len(res.err.strip().splitlines()) == 1
    if sqlite:
        res = cli("queues", "create", "bad", "--policy", "nonsense", expect=2)
        assert "nonsense" in res.err


def test_schedules_add_list_remove_and_one_maintenance_pass(cli, engine_url):
    added = cli("schedules", "add", "nightly", "0 3 * * *", "reports.build", "--payload", '{"week": 1}',
                "--tz", "Europe/Paris", "--queue", "reports", "--json").json()
    assert added["name"] == "nightly" and added["tz"] == "Europe/Paris" and added["next_fire_at"] > 0
    listed = cli("schedules", "list", "--json").json()
    assert [(s["name"], s["cron"], s["kind"], s["payload"]) for s in listed] == \
        [("nightly", "0 3 * * *", "reports.build", {"week": 1})]
    sqlite = engine_url.startswith("sqlite")  # engine-independent output checks run once
    if sqlite:
        assert "nightly" in cli("schedules", "list").out
    bad = cli("schedules", "add", "broken", "61 * * * *", "k", expect=2)
    assert "[TN4001]" in bad.err and len(bad.err.strip().splitlines()) == 1
    if sqlite:
        bad = cli("schedules", "add", "broken", "0 3 * * *", "k", "--tz", "Mars/Olympus", expect=2)
        assert "[TN4001]" in bad.err

    passed = cli("maintain", "--once", "--json").json()
    assert {"fired", "expired", "deleted"} <= set(passed)
    if sqlite:
        assert "fired" in cli("maintain", "--once").out

    assert cli("schedules", "remove", "nightly", "--json").json() == {"name": "nightly", "removed": True}
    if sqlite:
        res = cli("schedules", "remove", "nightly", expect=1)
        assert "no schedule" in res.out
        assert cli("schedules", "list").out.strip() == "no schedules"
    else:
        assert cli("schedules", "list", "--json").json() == []


def test_runs_show_a_live_workflow_run(cli, engine_url):
    from tenure.flow import Flow, Runner

    gate, started = threading.Event(), threading.Event()
    flow = Flow("cli-report", revision="2", output="publish")
    flow.registry.add("fetch", lambda ctx: {"rows": 3}, version=1)

    def transform(ctx):
        started.set()
        gate.wait(30)
        return ctx["fetch"]["rows"] * 2

    flow.registry.add("transform", transform, version=1)
    flow.registry.add("publish", lambda ctx: ctx["transform"], version=1)
    flow.node("fetch")
    flow.node("transform", needs=["fetch"])
    flow.node("publish", needs=["transform"])
    store = tenure.connect(engine_url)
    runner = Runner(store, [flow], poll_interval=0.05).start()
    try:
        store.jobs.enqueue("cli-report", {"input": {"week": 9}}, id="run-9")
        assert started.wait(20)
        view = cli("runs", "show", "run-9", "--json").json()
        assert [(n["id"], n["status"]) for n in view["nodes"]] == \
            [("fetch", "done"), ("transform", "running"), ("publish", "pending")]
        assert view["nodes"][0]["value"] == {"rows": 3} and view["identity"]["revision"] == "2"
        if engine_url.startswith("sqlite"):
            human = cli("runs", "show", "run-9").out
            assert "transform" in human and "running" in human and '{"rows": 3}' in human
            assert "no job" in cli("runs", "show", "nope", expect=1).err
        gate.set()
        deadline = time.monotonic() + 20
        while store.jobs.get("run-9").state != "done":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert cli("runs", "show", "run-9", "--json").json()["result"] == 6
    finally:
        gate.set()
        runner.stop(grace=2)
        store.close()
