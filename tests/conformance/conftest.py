"""Fixtures for the docs/spec.md conformance suite (tests/conformance).

Every test runs once per engine (``sqlite`` and ``postgres``) against a real database, with an
injected clock (:class:`_support.Clock`) and an injected random source (:class:`_support.Rand`),
so no test ever sleeps to wait for a lease: tests move the clock instead.

PostgreSQL: the server comes from ``TENURE_TEST_PG_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``). The session works in a private database created
next to it (see ``pg_url``), and each test starts from ``store._reset_for_tests()``. An unreachable
server skips the postgres half loudly, except under ``CI`` where it fails. Until the PostgreSQL
engine exists, ``tenure.connect`` failing with InvalidURL/ImportError skips it too.
"""

from __future__ import annotations

import os
import secrets
from urllib.parse import urlsplit, urlunsplit

import pytest

# pytest puts this directory (it has no __init__.py) on sys.path, so the test modules import
# _support, and processes spawned by them (which inherit sys.path) import _mp_claimer.
from _support import APP_TABLES, PG_URL, Clock, Rand, Target

import tenure


def _pg_unavailable(reason: str):
    msg = (
        f"PostgreSQL at {PG_URL} is NOT reachable ({reason}); "
        "the postgres half of the conformance suite did NOT run"
    )
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def pg_url():
    """A private database for this test session, created next to ``TENURE_TEST_PG_URL`` and dropped
    afterwards, so concurrent runs against one server cannot truncate each other's tables. When the
    role may not create databases, the URL's own database is used as is."""
    try:
        import psycopg
    except ImportError:
        pytest.skip("postgres engine not available (psycopg is not installed)")
    try:
        admin = psycopg.connect(PG_URL, autocommit=True, connect_timeout=3)
    except Exception as exc:  # noqa: BLE001 - any failure to reach the server means the same thing
        _pg_unavailable(f"{type(exc).__name__}: {exc}")
    name = f"tenure_conformance_{os.getpid()}_{secrets.token_hex(3)}"
    try:
        admin.execute(f'create database "{name}"')
    except psycopg.Error:
        admin.close()
        yield PG_URL
        return
    parts = urlsplit(PG_URL)
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        admin.close()  # a session-long connection may have died (a test restarts the server)
        with psycopg.connect(PG_URL, autocommit=True, connect_timeout=10) as admin:
            try:
                admin.execute(f'drop database if exists "{name}" with (force)')
            except psycopg.Error:
                admin.execute(f'drop database if exists "{name}"')


def _pg_prepare(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=3) as conn:
        for table in APP_TABLES:
            conn.execute(f"drop table if exists {table}")


def connect(target: Target, clock, rand, **kwargs):
    """``tenure.connect`` for the target; skips while the postgres engine does not exist yet."""
    if target.engine == "postgres":
        try:
            return tenure.connect(target.url, clock=clock, random=rand, **kwargs)
        except (tenure.errors.InvalidURL, ImportError, NotImplementedError) as exc:
            pytest.skip(f"postgres engine not available ({type(exc).__name__}: {exc})")
    return tenure.connect(target.url, clock=clock, random=rand, **kwargs)


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request) -> str:
    return request.param


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def rand() -> Rand:
    return Rand()


@pytest.fixture
def target(engine, tmp_path, request) -> Target:
    if engine == "sqlite":
        path = tmp_path / "t.db"
        return Target("sqlite", f"sqlite:///{path}", path)
    url = request.getfixturevalue("pg_url")
    _pg_prepare(url)
    return Target("postgres", url)


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
    s = open_store()
    if target.engine == "postgres":
        reset = getattr(s, "_reset_for_tests", None)
        if reset is None:
            pytest.skip("postgres engine not available (store._reset_for_tests is missing)")
        reset()
    return s


@pytest.fixture
def jobs(store):
    return store.jobs
