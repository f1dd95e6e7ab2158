"""Which tenure store a Django database is, decided at each call, and one store per process.

A ``TenureBackend`` with ``OPTIONS = {"DATABASE": alias}`` (the default: ``"default"``) never
keeps a URL of its own. Every enqueue, read and worker start asks :func:`database_url` for the
store URL of ``connections[alias]`` AS IT IS NOW, so under ``manage.py test`` (where Django points
the alias at ``test_<name>``) jobs land in the test database, outside and inside ``atomic()``.

The URL is built from Django's own connection parameters, never by hand from ``NAME``/``HOST``:
on PostgreSQL, ``connection.get_connection_params()`` (the OPTIONS included: ``sslmode``,
``sslrootcert``, ``options``, ``service``, a Unix-socket ``host``...) filtered to libpq's
keywords, each carried percent-encoded in the query of ``postgresql://?...``, so any password
character survives; on SQLite, the database file's absolute path.

:func:`store_for` keeps ONE :class:`tenure.Store` per URL for the whole process (not one per
backend instance or thread: Django makes a backend per thread and per settings change).
:func:`close_stores` closes them; it runs before Django destroys a test database (the
``destroy_test_db`` hook installed by :func:`install_test_database_hook`), so the drop never
waits for tenure's pooled connections, and at interpreter exit.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any
from urllib.parse import quote

import tenure
from tenure.errors import InvalidURL

_STORES: dict[str, tenure.Store] = {}
_LOCK = threading.Lock()
_LIBPQ_KEYWORDS: frozenset[str] | None = None


def _libpq_keywords() -> frozenset[str]:
    global _LIBPQ_KEYWORDS
    if _LIBPQ_KEYWORDS is None:
        from psycopg import pq

        _LIBPQ_KEYWORDS = frozenset(o.keyword.decode() for o in pq.Conninfo.get_defaults())
    return _LIBPQ_KEYWORDS


def database_url(alias: str) -> str:
    """The tenure store URL of Django's database ``alias`` as it is configured right now (the
    test database under ``manage.py test``). SQLite and PostgreSQL; anything else, or SQLite's
    in-memory test database, is refused with :class:`tenure.errors.InvalidURL` (TN0007)."""
    from django.db import connections

    conn = connections[alias]
    _refuse_a_real_database_under_tests(alias, conn)
    if conn.vendor == "sqlite":
        if conn.is_in_memory_db():
            raise InvalidURL(
                f"Django database {alias!r} is an in-memory SQLite database (Django's default test "
                f"database); tenure's worker needs a file: set DATABASES[{alias!r}]['TEST']['NAME'] "
                f"to a file name (docs/integrations.md, 'Tests')")
        path = os.path.abspath(str(conn.settings_dict["NAME"]))
        return "sqlite:///" + quote(path)
    if conn.vendor == "postgresql":
        keywords = _libpq_keywords()
        params = conn.get_connection_params()
        pairs = [(k, v) for k, v in params.items()
                 if k in keywords and v is not None and isinstance(v, (str, int, float)) and not isinstance(v, bool)]
        query = "&".join(f"{quote(k, safe='')}={quote(str(v), safe='')}" for k, v in sorted(pairs))
        return "postgresql://?" + query
    raise InvalidURL(f"tenure cannot share Django database {alias!r} ({conn.vendor}): "
                     f"use SQLite or PostgreSQL, or give the backend OPTIONS['URL']")


def _in_test_environment() -> bool:
    """True between Django's ``setup_test_environment()`` and its teardown (``manage.py test``,
    pytest-django)."""
    try:
        from django.test.utils import _TestState
    except ImportError:  # pragma: no cover - every supported Django has it
        return False
    return hasattr(_TestState, "saved_data")


def _refuse_a_real_database_under_tests(alias: str, conn: Any) -> None:
    """Under Django's test runner a test may only reach a TEST database: a test that has none
    (a ``SimpleTestCase``, or a run where no test asked for a database) would otherwise enqueue
    into the development or production database, where a running worker acts on it. Refused with
    :class:`tenure.errors.InvalidURL` (TN0007), nothing written."""
    if not _in_test_environment():
        return
    name = str(conn.settings_dict.get("NAME") or "")
    test_name = (conn.settings_dict.get("TEST") or {}).get("NAME")
    if conn.vendor == "sqlite" and conn.is_in_memory_db():
        return  # refused below, with its own reason
    if test_name:
        ok = name == str(test_name) or name.startswith(os.path.splitext(str(test_name))[0] + "_")
    else:
        ok = name.startswith("test_")
    if not ok:
        raise InvalidURL(
            f"Django database {alias!r} ({name!r}) is not a test database, and Django's test runner "
            f"is active: tenure will not enqueue into a real database from a test. Give the test a "
            f"database (TestCase / TransactionTestCase, or databases = {{{alias!r}}}) so Django "
            f"creates its test database")


def store_for(url: str) -> tenure.Store:
    """The process's one store for ``url`` (opened at first use, reused by every backend
    instance and thread)."""
    with _LOCK:
        store = _STORES.get(url)
        if store is None:
            store = _STORES[url] = tenure.connect(url)
        return store


def close_stores(grace: float | None = 5.0) -> None:
    """Close every store opened by :func:`store_for` (their workers stopped within ``grace``);
    the next call opens a fresh one."""
    with _LOCK:
        stores = list(_STORES.values())
        _STORES.clear()
    for store in stores:
        store.close(grace=grace)


def open_stores() -> int:
    """How many stores :func:`store_for` holds open (tests check that there is one)."""
    with _LOCK:
        return len(_STORES)


def install_test_database_hook() -> None:
    """Close tenure's stores before Django destroys a test database (``manage.py test``), so the
    drop is not refused for open connections. Installed once, when the backend is imported."""
    from django.db.backends.base.creation import BaseDatabaseCreation

    original: Any = BaseDatabaseCreation.destroy_test_db
    if getattr(original, "_tenure_closes_stores", False):
        return

    def destroy_test_db(self: Any, *args: Any, **kwargs: Any) -> Any:
        close_stores()
        return original(self, *args, **kwargs)

    destroy_test_db._tenure_closes_stores = True  # type: ignore[attr-defined]
    destroy_test_db.__doc__ = original.__doc__
    BaseDatabaseCreation.destroy_test_db = destroy_test_db


atexit.register(close_stores, 1.0)
