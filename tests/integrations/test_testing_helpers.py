"""tenure.testing: the helpers users call in their own suites (issue 11)."""

from __future__ import annotations

import pytest

import tenure
from tenure.testing import ANY, assert_enqueued, drain, inline, refute_enqueued


def make_app(store):
    app = tenure.App(store=store)

    @app.task(name="mail.send", queue="emails")
    def send(to: str, subject: str = "hi") -> dict:
        if to == "bad":
            raise ValueError("no such mailbox")
        return {"sent": to}

    return app, send


def test_tenure_store_fixture_is_a_fresh_store(tenure_store):
    assert tenure_store.jobs.counts()["pending"] == 0
    tenure_store.jobs.enqueue("k", 1)
    assert tenure_store.jobs.counts()["pending"] == 1


def test_assert_and_refute_enqueued(tenure_store):
    app, send = make_app(tenure_store)
    send.enqueue(to="a@example.com")
    send.enqueue(to="b@example.com", subject="yo")
    assert_enqueued(app, send, kwargs={"to": "a@example.com"})
    assert_enqueued(tenure_store, "mail.send", queue="emails", count=2)
    assert_enqueued(app, send, ANY)
    refute_enqueued(app, "other.kind")
    with pytest.raises(AssertionError, match="found 0"):
        assert_enqueued(app, send, kwargs={"to": "nobody"})
    with pytest.raises(AssertionError):
        assert_enqueued(app, send, count=3)
    with pytest.raises(AssertionError):
        refute_enqueued(app, send)


def test_drain_runs_everything_with_a_real_worker(tenure_store):
    app, send = make_app(tenure_store)
    ok = send.enqueue(to="a@example.com")
    bad = send.with_options(max_attempts=1).enqueue(to="bad")
    result = drain(app)
    assert result.completed == 1 and result.failed == 1
    assert ok.result(timeout=1) == {"sent": "a@example.com"}
    with pytest.raises(tenure.errors.JobDead, match="no such mailbox"):
        bad.result(timeout=1)
    assert tenure_store.jobs.counts()["done"] == 1


def test_inline_runs_at_enqueue_without_the_store(tenure_store):
    app, send = make_app(tenure_store)
    with inline(app) as calls:
        handle = send.enqueue(to="a@example.com")
        failing = send.enqueue(to="bad")
    assert handle.result() == {"sent": "a@example.com"}
    with pytest.raises(tenure.errors.JobDead):
        failing.result()
    assert len(calls) == 2
    assert tenure_store.jobs.counts()["pending"] == 0  # nothing was stored
    assert send.enqueue(to="c@example.com").id  # outside the block: stored again
    assert tenure_store.jobs.counts()["pending"] == 1


def test_tasks_accept_every_queue_option(tenure_store):
    app = tenure.App(store=tenure_store)

    @app.task(name="t.opt", retry_delay=2, retry_backoff=True, retry_delay_max=30, debounce=5,
              singleton_key="k", dead_letter="t.dlq")
    def t() -> None:
        return None

    handle = t.enqueue()
    assert tenure_store.jobs.get(handle.id).dead_letter == "t.dlq"
