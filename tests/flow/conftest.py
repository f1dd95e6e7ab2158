"""Fixtures for the tenure.flow tests: runners and gates that are always cleaned up.

The engine-parametrised ``any_store`` / ``live_store`` / ``engine_url`` fixtures come from
``tests/conftest.py`` (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading

import pytest

from tests.conftest import sqlite_url


@pytest.fixture
def gates():
    """``gates()`` makes a threading.Event that is set at teardown (so no task blocks forever)."""
    made: list[threading.Event] = []

    def make() -> threading.Event:
        ev = threading.Event()
        made.append(ev)
        return ev

    yield make
    for ev in made:
        ev.set()


@pytest.fixture
def start_runner():
    """``start_runner(store, flows, **options)`` builds and starts a Runner, stopped at teardown."""
    from tenure.flow import Runner

    started: list[Runner] = []

    def make(store, flows, **options) -> Runner:
        options.setdefault("poll_interval", 0.05)
        runner = Runner(store, flows, **options)
        started.append(runner)
        return runner.start()

    yield make
    for runner in started:
        runner.stop(grace=2)


@pytest.fixture
def sqlite_store(tmp_path, clock, rand):
    """A SQLite store with the injected clock, for tests of the runner's own logic (scheduling,
    outputs, payload checks, stop timing) that involve nothing engine-specific beyond what the
    both-engine tests already cover. Keeps tests/flow well under a minute."""
    import tenure

    store = tenure.connect(sqlite_url(tmp_path), clock=clock, random=rand)
    store.jobs  # noqa: B018 - open now
    yield store
    try:
        store.close(grace=1)
    except Exception:  # noqa: BLE001
        pass
