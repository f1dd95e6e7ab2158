"""tenure.testing: the helpers users call in their own suites."""

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


# -- pointing an app at a test store; inline scoped to one app and one block ---------

PROD = "postgresql://app:secret@127.0.0.1:1/prod"  # nothing listens there: a test must not reach it

module_app = tenure.App(PROD)  # declared as a project declares it: at import, with its real URL


@module_app.task(name="shop.ship")
def ship(order: int) -> str:
    return f"shipped {order}"


def test_use_store_points_a_module_level_app_at_the_test_store(tenure_store):
    with module_app.use_store(tenure_store) as store:
        assert store is tenure_store and module_app.store is tenure_store
        handle = ship.enqueue(7)
        assert_enqueued(module_app, ship, args=[7])
        assert drain(module_app).completed == 1
        assert handle.result(timeout=5) == "shipped 7"
    assert module_app._store is None  # the production store was never opened


def test_use_store_nests_and_restores(tenure_store, tmp_path):
    with module_app.use_store(tenure_store):
        with module_app.use_store(f"sqlite:///{tmp_path}/inner.db") as inner:
            ship.enqueue(1)
            assert inner.jobs.counts()["pending"] == 1
        assert module_app.store is tenure_store
        assert tenure_store.jobs.counts()["pending"] == 0
    with pytest.raises(TypeError, match="Store or a store URL"):
        with module_app.use_store(42):  # type: ignore[arg-type]
            pass


def test_tenure_isolate_fixture_points_apps_for_the_test(tenure_isolate, tenure_store):
    assert tenure_isolate(module_app) is tenure_store
    ship.enqueue(3)
    assert tenure_store.jobs.counts()["pending"] == 1


def test_module_app_is_back_to_its_own_store_after_the_fixture():
    assert module_app._stand_ins == [] and module_app._store is None


def test_inline_changes_one_app_for_one_block(tenure_store):
    other, send = make_app(tenure_store)
    enqueue = tenure.app.Task.enqueue
    with module_app.use_store(tenure_store), inline(module_app) as calls:
        assert tenure.app.Task.enqueue is enqueue  # the class is not patched
        assert ship.enqueue(9).result() == "shipped 9"
        send.enqueue(to="a@example.com")  # another app, same store: stored as usual
        with pytest.raises(tenure.errors.InvalidType, match="TN1002"):
            ship.enqueue(oder=9)  # checked as a real enqueue
        with pytest.raises(RuntimeError, match="already active"):
            with inline(module_app):
                pass
        assert tenure_store.jobs.counts()["pending"] == 1
    assert len(calls) == 1
    with module_app.use_store(tenure_store):
        assert isinstance(ship.enqueue(10), tenure.app.Handle)  # after the block: stored again
    assert tenure_store.jobs.counts()["pending"] == 2


def test_isolated_gives_a_fresh_store_without_pytest_fixtures():
    from tenure.testing import isolated

    with isolated(module_app) as store:
        ship.enqueue(5)
        assert module_app.store is store and store.jobs.counts()["pending"] == 1
    assert module_app._stand_ins == [] and module_app._store is None
