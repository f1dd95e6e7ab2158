"""Fixtures for the docs/spec.md conformance suite (tests/conformance).

Every test runs once per engine (``sqlite`` and ``postgres``) on the root ``engine_url`` fixture
(tests/conftest.py: a fresh SQLite file, or the session's private PostgreSQL database emptied by
``empty_pg``, application tables included), with the suite's one injected clock
(``tests.conftest.Clock``) and a random source that answers 0.5 and counts its calls
(:class:`._support.Rand`), so no test ever sleeps to wait for a lease: tests move the clock instead.
An unreachable server skips the postgres half loudly, except under ``CI`` where it fails.
"""

from __future__ import annotations

import pytest

import tenure
from tests.conftest import sqlite_path

from ._support import Rand, Target


def connect(target: Target, clock, rand, **kwargs):
    """``tenure.connect`` for the target, with the injected clock and random."""
    return tenure.connect(target.url, clock=clock, random=rand, **kwargs)


@pytest.fixture
def engine(engine_url) -> str:
    """``sqlite`` or ``postgres``: which engine ``engine_url`` is on."""
    return "sqlite" if engine_url.startswith("sqlite:") else "postgres"


@pytest.fixture
def rand() -> Rand:
    return Rand()


@pytest.fixture
def target(engine, engine_url, tmp_path) -> Target:
    if engine == "sqlite":
        return Target("sqlite", engine_url, sqlite_path(tmp_path))
    return Target("postgres", engine_url)


@pytest.fixture
def open_store(target, clock, rand):
    """Open another store on the same database (another process's view); closed at teardown.

    ``open_store(clock_=..., random_=..., **connect_kwargs)``; ``open_store.opened`` lists them,
    and a test may remove a store it abandons (e.g. a deadlocked one) from that list.
    """
    opened = []

    def _open(*, clock_=None, random_=None, **kwargs):
        s = connect(target, clock_ or clock, random_ or rand, **kwargs)
        opened.append(s)
        return s

    _open.opened = opened
    yield _open
    for s in opened:
        try:
            s.close()
        except Exception:  # noqa: BLE001 - a test may have closed it on purpose
            pass


@pytest.fixture
def store(target, open_store):
    return open_store()


@pytest.fixture
def jobs(store):
    return store.jobs
