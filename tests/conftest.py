"""Shared fixtures for every suite: an injected clock and random, and stores on both engines.

How the fixtures work (docs/architecture.md, "Tests"):

- ``engine_url`` is THE engine fixture, parametrised over ``sqlite`` and ``postgres``; every store
  fixture (``any_store``, ``live_store``, ``store``, ``other``, ``other_store``) is built on it, and
  no suite overrides it. SQLite: a fresh file in the test's own ``tmp_path`` (:func:`sqlite_url`).
  PostgreSQL: the session's private database, emptied first by :func:`empty_pg`.
- The session's private database: the server comes from ``$TENURE_TEST_PG_URL`` (default: the
  local test server); when this module is first imported (before any other conftest, so every
  ``from tests.conftest import PG_URL`` sees it) a database ``tenure_test_<random>`` is created next
  to it, ``$TENURE_TEST_PG_URL`` is pointed at it for the session and its subprocesses, and it is
  dropped at the end together with any database a test made beside it (``tenure_test_<random>_*``).
  So two runs can share one server. When the role may not create databases the given one is used.
- :func:`empty_pg` is the one way to empty PostgreSQL between tests: one statement on one kept
  connection, deleting every row of every tenure table (the migration log kept, so nothing
  re-migrates) and dropping every other table of the schema (an application table a test made),
  so a test starts from what a fresh SQLite file gives. DELETE, because it measured fastest: about
  1-2 ms against ~45 ms for a TRUNCATE of the same tables and ~120 ms for a fresh migrated schema.
- Where no server is reachable the PostgreSQL half is skipped loudly (:func:`require_pg`), except
  under CI (``$CI`` set), where it fails instead, so parity is always proven there.
"""

from __future__ import annotations

import atexit
import os
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

#: Set in the process that created the session's database; a subprocess inherits it and reuses it.
_SESSION_DB_ENV = "TENURE_TEST_SESSION_DB"
#: The server (and the database to connect through) the run was given.
BASE_PG_URL = os.environ.get("TENURE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
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


def _drop_private_database() -> None:
    """Drop the session's database and every database a test made beside it (``<name>_*``);
    a leftover is reported, never fatal. Runs once (pytest_unconfigure, else at exit)."""
    name = _private.pop("name", None)
    if name is None:
        return
    for conn in _kept.values():
        conn.close()
    _kept.clear()
    os.environ["TENURE_TEST_PG_URL"] = BASE_PG_URL
    os.environ.pop(_SESSION_DB_ENV, None)
    try:
        import psycopg

        with psycopg.connect(BASE_PG_URL, autocommit=True, connect_timeout=10) as admin:
            beside = [r[0] for r in admin.execute(
                "SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (f"{name}_",))]
            for db in [*beside, name]:
                admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    except Exception as exc:  # noqa: BLE001 - a leftover database is reported, never fatal
        print(f"\ntenure tests: could not drop the private database {name}: {exc}")


def _session_pg_url() -> str:
    """The PostgreSQL URL every test of this session uses (see the module docstring)."""
    if os.environ.get(_SESSION_DB_ENV):  # a subprocess of a session: its database, as given
        return BASE_PG_URL
    url = _create_private_database(BASE_PG_URL)
    if url is None:
        return BASE_PG_URL
    os.environ["TENURE_TEST_PG_URL"] = url
    os.environ[_SESSION_DB_ENV] = _private["name"]
    atexit.register(_drop_private_database)
    return url


#: The session's own database (the given one when it cannot be created).
PG_URL = _session_pg_url()


def pytest_unconfigure(config: pytest.Config) -> None:
    _drop_private_database()


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
    """A settable random source: ``rand()`` answers ``value``; ``calls`` counts the draws."""

    def __init__(self, value: float = 0.0) -> None:
        self.value = value
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
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


def sqlite_path(tmp_path: Path, name: str = "tenure.db") -> Path:
    """The one fresh-SQLite path: a new file ``name`` in the test's own ``tmp_path``."""
    return tmp_path / name


def sqlite_url(tmp_path: Path, name: str = "tenure.db") -> str:
    """The store URL of :func:`sqlite_path`."""
    return f"sqlite:///{sqlite_path(tmp_path, name)}"


#: Empties the current schema in one round trip: every tenure table's rows deleted (the migration
#: log kept), every other table (an application table a test made) dropped.
EMPTY_PG = r"""DO $$
DECLARE t text;
BEGIN
  FOR t IN SELECT tablename FROM pg_tables
           WHERE schemaname = current_schema() AND tablename <> 'tenure_migrations' LOOP
    IF t LIKE 'tenure\_%' THEN
      EXECUTE format('DELETE FROM %I', t);
    ELSE
      EXECUTE format('DROP TABLE IF EXISTS %I CASCADE', t);
    END IF;
  END LOOP;
END $$"""
_kept: dict[str, Any] = {}


def empty_pg(url: str | None = None) -> None:
    """Empty the PostgreSQL database at ``url`` (default: the session's) with :data:`EMPTY_PG`
    on one connection kept per URL; tenure's tables are created (migrated) on first use, so a
    test may read them raw before opening a store. A connection lost since the last call (a test
    terminated backends, a server restart) is replaced once."""
    import psycopg

    url = url or PG_URL
    for attempt in (1, 2):
        conn = _kept.get(url)
        if conn is None or conn.closed:
            import tenure

            store = tenure.connect(url)
            store.jobs  # noqa: B018 - migrate
            store.close()
            conn = _kept[url] = psycopg.connect(url, autocommit=True, connect_timeout=10)
        try:
            conn.execute(EMPTY_PG)
            return
        except psycopg.OperationalError:
            conn.close()
            if attempt == 2:
                raise


@pytest.fixture(params=["sqlite", "postgres"])
def engine_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL on each engine: a fresh SQLite file, or the session's PostgreSQL database
    just emptied by :func:`empty_pg`."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path)
    require_pg()
    empty_pg()
    return PG_URL


def _close(store: Any, grace: float = 1) -> None:
    try:
        store.close(grace=grace)
    except Exception:  # noqa: BLE001 - a test may leave handlers behind, or close it itself
        pass


@pytest.fixture
def any_store(engine_url, clock, rand):
    """A store on each engine with the injected clock and random."""
    import tenure

    store = tenure.connect(engine_url, clock=clock, random=rand)
    store.jobs  # noqa: B018 - open (migrate) now
    yield store
    _close(store)


@pytest.fixture
def store(any_store):
    """``any_store`` under the short name the suites use."""
    return any_store


@pytest.fixture
def live_store(engine_url):
    """A store on each engine with the real clock (for worker tests that run in real time)."""
    import tenure

    store = tenure.connect(engine_url)
    store.jobs  # noqa: B018
    yield store
    _close(store)


@pytest.fixture
def other(engine_url, clock, rand):
    """A second store on the same database, same clock and random: what another process sees."""
    import tenure

    s = tenure.connect(engine_url, clock=clock, random=rand)
    s.jobs  # noqa: B018 - open now
    yield s
    _close(s)


@pytest.fixture
def other_store(engine_url, clock):
    """``other_store(**connect_kwargs)``: another store on the same database, by default with the
    same injected clock (pass ``clock=None`` for the real one); closed at teardown."""
    import tenure

    opened = []

    def _open(**kwargs):
        kwargs.setdefault("clock", clock)
        s = tenure.connect(engine_url, **kwargs)
        opened.append(s)
        return s

    yield _open
    for s in opened:
        _close(s, grace=0.5)


@pytest.fixture
def make_worker():
    """``make_worker(store, handlers, **options)``: a worker (not started) stopped at teardown."""
    made = []

    def _make(store, handlers, **options):
        w = store.jobs.create_worker(handlers, **options)
        made.append(w)
        return w

    yield _make
    for w in made:
        w.stop(grace=0.5)
