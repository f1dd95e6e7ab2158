"""Shared fixtures: an injected clock and random, and stores on both engines.

The ``engine_url`` / ``any_store`` fixtures are parametrised over SQLite and PostgreSQL. The
PostgreSQL address comes from ``$TENURE_TEST_PG_URL`` (default: the local test server). Where no
server is reachable the PostgreSQL half is skipped loudly — except under CI (``$CI`` set), where
it fails instead, so parity is always proven there.
"""

from __future__ import annotations

import os

import pytest

PG_URL = os.environ.get("TENURE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


class Clock:
    """A settable epoch-ms clock: ``clock()`` reads it, ``clock.advance(ms)`` moves it."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now

    def set(self, ms: int) -> int:
        self.now = ms
        return ms


class Rand:
    """A settable random source: ``rand()`` answers ``value``."""

    def __init__(self, value: float = 0.0) -> None:
        self.value = value

    def __call__(self) -> float:
        return self.value


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def rand() -> Rand:
    return Rand()


_pg_state: dict[str, object] = {}


def pg_available() -> str | None:
    """None when the PostgreSQL test server answers, else the reason it does not."""
    if "reason" not in _pg_state:
        try:
            import psycopg

            with psycopg.connect(PG_URL, connect_timeout=3) as conn:
                conn.execute("select 1")
            _pg_state["reason"] = None
        except Exception as exc:  # noqa: BLE001
            _pg_state["reason"] = f"PostgreSQL at {PG_URL} unreachable: {exc}"
    return _pg_state["reason"]  # type: ignore[return-value]


def require_pg() -> None:
    reason = pg_available()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the PostgreSQL half: {reason}")
    pytest.skip(f"SKIPPING POSTGRES: {reason}")


@pytest.fixture(params=["sqlite", "postgres"])
def engine_url(request, tmp_path) -> str:
    """A store URL on each engine; the PostgreSQL database is emptied first."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/tenure.db"
    require_pg()
    import tenure

    s = tenure.connect(PG_URL)
    s._reset_for_tests()
    s.close()
    return PG_URL


@pytest.fixture
def any_store(engine_url, clock, rand):
    """A store on each engine with the injected clock and random."""
    import tenure

    store = tenure.connect(engine_url, clock=clock, random=rand)
    store.jobs  # noqa: B018 - open (migrate) now
    yield store
    try:
        store.close(grace=1)
    except Exception:  # noqa: BLE001
        pass


@pytest.fixture
def live_store(engine_url):
    """A store on each engine with the real clock (for worker tests that run in real time)."""
    import tenure

    store = tenure.connect(engine_url)
    store.jobs  # noqa: B018
    yield store
    try:
        store.close(grace=1)
    except Exception:  # noqa: BLE001
        pass
