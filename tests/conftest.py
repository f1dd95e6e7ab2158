"""Shared fixtures: an injected clock and random, and stores on both engines.

The ``engine_url`` / ``any_store`` fixtures are parametrised over SQLite and PostgreSQL. The
PostgreSQL server comes from ``$TENURE_TEST_PG_URL`` (default: the local test server); the session
works in a private database created next to it at start (``tenure_test_<random>``) and dropped at
the end, and ``$TENURE_TEST_PG_URL`` names that database for the session (subprocesses included),
so two runs can share one server. Where no server is reachable the PostgreSQL half is skipped
loudly — except under CI (``$CI`` set), where it fails instead, so parity is always proven there.
"""

from __future__ import annotations

import os
import secrets
from urllib.parse import urlsplit, urlunsplit

import pytest

#: The server (and the database to connect through) the run was given.
BASE_PG_URL = os.environ.get("TENURE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
#: The session's own database (set by pytest_configure); the given one when it cannot be created.
PG_URL = BASE_PG_URL
_private: dict[str, str] = {}


def _create_private_database(base: str) -> str | None:
    """A new empty database next to ``base``'s, answered as a URL; None when the server is
    unreachable or the role may not create databases (the run then uses ``base`` as is)."""
    try:
        import psycopg

        with psycopg.connect(base, autocommit=True, connect_timeout=3) as admin:
            name = f"tenure_test_{secrets.token_hex(6)}"
            admin.execute(f'CREATE DATABASE "{name}"')
    except Exception:  # noqa: BLE001 - unreachable or not allowed: the run says so where it needs it
        return None
    _private["name"] = name
    return urlunsplit(urlsplit(base)._replace(path=f"/{name}"))


def pytest_configure(config: pytest.Config) -> None:
    global PG_URL
    url = _create_private_database(BASE_PG_URL)
    if url is not None:
        PG_URL = os.environ["TENURE_TEST_PG_URL"] = url


def pytest_unconfigure(config: pytest.Config) -> None:
    name = _private.pop("name", None)
    if name is None:
        return
    os.environ["TENURE_TEST_PG_URL"] = BASE_PG_URL
    import psycopg

    try:
        with psycopg.connect(BASE_PG_URL, autocommit=True, connect_timeout=10) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception as exc:  # noqa: BLE001 - a leftover database is reported, never fatal
        print(f"\ntenure tests: could not drop the private database {name}: {exc}")


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
