"""Fixtures for the tenure.flow tests: runners and gates that are always cleaned up.

The engine-parametrised ``any_store`` / ``live_store`` / ``engine_url`` fixtures come from
``tests/conftest.py`` (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading

import pytest


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
