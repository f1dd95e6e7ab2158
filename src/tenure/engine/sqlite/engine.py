"""The SQLite engine: one file, WAL, one shared connection per process behind the store gate.

Why one connection: SQLite has one writer per file. Inside a process, tenure serialises its own
statements on a lock (the gate) instead of letting threads collide on ``SQLITE_BUSY`` and sleep
in SQLite's busy handler; across processes, the bounded busy timeout arbitrates. The gate is also
what makes a root call wait for an open application transaction (spec §3, "Ownership").
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ... import durations
from ...errors import (
    InvalidArgument,
    InvalidURL,
    OperationWithdrawn,
    ReadOnlyStore,
    SchemaTooNew,
    StorageError,
    StorageFull,
    StoreBusy,
    StoreClosed,
    StoreCorrupt,
    StoreLimitExceeded,
    StoreUnavailable,
    TenureError,
)
from ..base import Engine
from ..migrate import LATEST_VERSION_HINT, load_migrations, split_statements
from . import queries as Q
from .session import SQLiteSession, _wall_ms
from .watch import IDLE_BOUND_S, Poker, SQLiteWatcher


def _busy_timeout(keyword: Any, keyword_ms: Any, query: dict[str, str]) -> float:
    """The busy timeout in seconds: the ``busy_timeout`` keyword, else ``?busy_timeout=`` (a
    duration: ``5``, ``250ms``, ``2s``), else 5 s; at most an hour. The ``_ms`` spellings of
    earlier releases (keyword and URL) warn and are read as ms. A bad one is InvalidURL."""
    try:
        given = {k: val for k, val in (("busy_timeout", keyword), ("busy_timeout_ms", keyword_ms)) if val is not None}
        if not given and "busy_timeout" in query:
            given = {"busy_timeout": query["busy_timeout"]}
        elif not given and "busy_timeout_ms" in query:
            raw = query["busy_timeout_ms"]
            if not raw.isdigit():
                raise InvalidArgument(f"busy_timeout_ms must be a whole number of ms, got {raw!r}")
            given = {"busy_timeout_ms": int(raw)}
        given = durations.renamed_ms(given, {"busy_timeout_ms": "busy_timeout"}, "sqlite store")
        return durations.seconds(given.get("busy_timeout", 5), "busy_timeout", maximum=3600)
    except TenureError as exc:
        raise InvalidURL(f"{exc.message} (at most an hour)") from None


class SQLiteEngine(Engine):
    dialect = "sqlite"
    exclusive_gate = True
    #: A claim of any size is one and the same statement (its LIMIT is a bound parameter), so a
    #: worker claims exactly its free slots (``Producer._reserve``); PostgreSQL, which prepares
    #: each size's text, has no such attribute and keeps to a few sizes.
    any_claim_size = True

    def __init__(self, url: str, *, busy_timeout: float | str | None = None, durable: bool | None = None,
                 watch_interval: float = 0.002, busy_timeout_ms: int | None = None) -> None:
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        raw_path = unquote((parts.netloc or "") + parts.path)
        if raw_path.startswith("/") and not parts.netloc:
            raw_path = raw_path[1:] if raw_path.startswith("//") else raw_path
        # sqlite:///rel.db -> "rel.db" is spelled "/rel.db" by urlsplit; sqlite:////abs -> "//abs".
        path = parts.path
        if path.startswith("//"):
            path = path[1:]
        elif path.startswith("/"):
            path = path[1:]
        if parts.netloc == ":memory:" or path == ":memory:":
            path = ":memory:"
        if not path:
            raise InvalidURL("a sqlite URL needs a file: sqlite:///tenure.db or sqlite:////abs/path.db")
        self.path = unquote(path)
        self.read_only = query.get("mode") == "ro"
        #: ``PRAGMA quick_check`` at open (``?quick_check=0`` skips it): a corrupt page is found
        #: before anything is read or written, not after writes were accepted (TN0010).
        self.quick_check = query.get("quick_check", "1") not in ("0", "false", "no")
        self._ro_target: str | None = None  # the URI a read-only connection was opened with
        #: How long a write waits for another process's lock (ms) before TN0003.
        self.busy_timeout_ms = durations.to_ms(_busy_timeout(busy_timeout, busy_timeout_ms, query))
        self.durable = durable if durable is not None else query.get("durable") in ("1", "true", "yes")
        self.watch_interval = watch_interval
        self.gate = threading.Lock()
        #: Sessions of this store that changed rows a worker may claim or that may make a job
        #: claimable (an enqueue, a settlement whose trigger released a dependent, a failure...),
        #: as opposed to claims and plain completions. A watcher wakes on it as on another
        #: connection's commit (:meth:`own_data_version`).
        self.loud_commits = 0
        #: Wakes the waiters of other processes (and this one's) after a loud commit
        #: (:class:`~tenure.engine.sqlite.watch.Poker`); made at the first loud commit.
        self._poker: Poker | None = None
        #: The longest an idle waiter of this store goes between two ``data_version`` polls.
        self.watch_idle_bound = IDLE_BOUND_S
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    def describe(self) -> str:
        return f"sqlite:///{self.path}"

    # -- lifecycle ---------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if not self.read_only and self.path != ":memory:" and _read_only_media(self.path):
            # The file or its directory cannot be written (read-only media, a read-only mount, no
            # write permission): open it read-only, so it can still be read; writes answer
            # ReadOnlyStore (TN0002), never "could not reach" (docs/operations.md).
            self.read_only = True
        if self.read_only:
            conn = self._connect_read_only()
        else:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_ms / 1000,
                                   check_same_thread=False, isolation_level=None)
        if self.quick_check and self.path != ":memory:":
            _check_pages(conn, self.path)
        conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
        if not self.read_only and self.path != ":memory:":
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode.lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {'FULL' if self.durable else 'NORMAL'}")
        conn.execute("PRAGMA temp_store = MEMORY")
        # A dependent cancelled by its parent's failure cancels its own dependents in turn: the
        # settlement trigger (migration 0013) fires again for it (docs/composition.md).
        conn.execute("PRAGMA recursive_triggers = ON")
        conn.execute("PRAGMA cache_size = -16000")
        return conn

    def _connect_read_only(self) -> sqlite3.Connection:
        target = f"file:{self.path}?mode=ro"
        conn = sqlite3.connect(target, uri=True, timeout=self.busy_timeout_ms / 1000,
                               check_same_thread=False, isolation_level=None)
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError:
            # A WAL database on read-only media (no -shm to map): nobody can write it, so it
            # is safe to read it as immutable.
            conn.close()
            target = f"file:{self.path}?mode=ro&immutable=1"
            conn = sqlite3.connect(target, uri=True, check_same_thread=False, isolation_level=None)
        self._ro_target = target
        return conn

    def open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")
        try:
            conn = self._connect()
            self._migrate(conn)
        except TenureError:
            raise
        except sqlite3.Error as exc:
            err = self.classify(exc)
            if isinstance(err, ReadOnlyStore):
                raise ReadOnlyStore(
                    f"cannot create tenure's tables in {self.path!r}: the database is read-only") from exc
            raise err from exc
        self._conn = conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        migrations = load_migrations(__package__)
        latest = migrations[-1].version
        have_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='tenure_migrations'").fetchone()
        if have_table:
            applied = {r[0] for r in conn.execute("SELECT version FROM tenure_migrations")}
            if applied and max(applied) > latest:
                raise SchemaTooNew(f"{self.path!r} has tenure schema version {max(applied)}; this tenure "
                                   f"knows up to {latest}: {LATEST_VERSION_HINT}")
            if applied >= {m.version for m in migrations}:
                return
        if self.read_only:
            raise ReadOnlyStore(f"cannot create tenure's tables in {self.path!r}: opened read-only")
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(Q.MIGRATIONS_TABLE)
            applied = {r[0] for r in conn.execute("SELECT version FROM tenure_migrations")}
            for mig in migrations:
                if mig.version in applied:
                    continue
                for stmt in split_statements(mig.sql):
                    if _column_exists(conn, stmt):
                        continue  # presence check: a column added by hand or a prior partial run
                    conn.execute(stmt)
                conn.execute("INSERT INTO tenure_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                             (mig.version, mig.name, _wall_ms()))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._closed = True
        poker, self._poker = self._poker, None
        if poker is not None:
            poker.close()
        with self.gate:
            if self._conn is not None:
                try:
                    self._conn.close()
                finally:
                    self._conn = None

    # -- sessions ----------------------------------------------------------------------------
    def _live(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            raise StoreClosed("the store is closed")
        return conn

    def _acquire(self, cancel: threading.Event | None) -> None:
        if cancel is None:
            self.gate.acquire()
            return
        while not self.gate.acquire(timeout=0.02):
            if cancel.is_set():
                raise OperationWithdrawn("withdrawn while waiting for the store gate; nothing ran")

    @contextmanager
    def session(self, cancel: threading.Event | None = None) -> Iterator[SQLiteSession]:
        self._acquire(cancel)
        loud = self.loud_commits
        try:
            conn = self._live()
            before = conn.total_changes
            session = SQLiteSession(conn)
            try:
                yield session
            finally:
                if conn.in_transaction:  # a failed statement inside an implicit batch
                    conn.execute("ROLLBACK")
                self._count_loud(conn, before, session)
        finally:
            self.gate.release()
            if self.loud_commits != loud:
                self._poke()

    @contextmanager
    def transaction(self, cancel: threading.Event | None = None) -> Iterator[SQLiteSession]:
        self._acquire(cancel)
        loud = self.loud_commits
        try:
            conn = self._live()
            before = conn.total_changes
            conn.execute("BEGIN IMMEDIATE")
            session = SQLiteSession(conn)
            try:
                yield session
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._count_loud(conn, before, session)
            conn.execute("COMMIT")
        finally:
            self.gate.release()
            if self.loud_commits != loud:
                self._poke()

    def _poke(self) -> None:
        """After a loud commit, outside the gate: wake the waiters of this file in every process
        (docs/operations.md, "Files beside a SQLite database"). Never raises."""
        poker = self._poker
        if poker is None:
            if self.path == ":memory:" or self.read_only or self._closed:
                return
            poker = self._poker = Poker(self.path)
        poker.poke()

    def _count_loud(self, conn: sqlite3.Connection, before: int, session: SQLiteSession) -> None:
        """Called holding the gate, as a session ends: count it in :attr:`loud_commits` when it
        changed rows other than its quiet ones (a trigger's included)."""
        if conn.total_changes - before > session._quiet_changes:
            self.loud_commits += 1

    def own_data_version(self) -> int | None:
        """``PRAGMA data_version`` on the store's own connection, which changes only when ANOTHER
        connection commits (another process, another store): None when the connection is busy
        (the gate held) or closed. The watcher reads it instead of its private connection's,
        which every commit of this store moves too (the worker's own claims and settlements:
        each woke the dispatcher for an empty claim)."""
        if not self.gate.acquire(blocking=False):
            return None
        try:
            conn = self._conn
            if conn is None or conn.in_transaction:
                return None
            return conn.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error:
            return None
        finally:
            self.gate.release()

    def adopt(self, connection: Any) -> SQLiteSession:
        if not isinstance(connection, sqlite3.Connection):
            from ...errors import InvalidType

            raise InvalidType(f"conn= must be a sqlite3.Connection on a SQLite store, got "
                              f"{type(connection).__name__}")
        if connection is not self._conn:
            self._check_same_database(connection)
        return SQLiteSession(connection, owns_tx=False)

    def _check_same_database(self, connection: sqlite3.Connection) -> None:
        """Refuse (:class:`ForeignConnection`) a ``conn=`` on another database file than the
        store's (an in-memory store has no other connection): its jobs would land where no worker
        of this store looks."""
        from ...errors import ForeignConnection

        rows = connection.execute("PRAGMA database_list").fetchall()
        theirs = next((r[2] for r in rows if r[1] == "main"), "") or ""
        ours = "" if self.path == ":memory:" else os.path.realpath(self.path)
        if not ours or not theirs or os.path.realpath(theirs) != ours:
            raise ForeignConnection(
                f"conn= is connected to {theirs or 'an in-memory database'!r}, not this store's "
                f"{self.describe()}: a job enqueued through it would never reach this store's workers")

    def watcher(self) -> SQLiteWatcher:
        if self.path == ":memory:":
            raise StorageError("cross-process watching needs a file, not :memory:")
        if self.read_only:
            return SQLiteWatcher(self._ro_target or f"file:{self.path}?mode=ro", True, self.watch_interval)
        return SQLiteWatcher(self.path, False, self.watch_interval, self, self.watch_idle_bound)

    def reset_for_tests(self) -> None:
        with self.session() as s:
            for t in Q.TABLES:
                s.execute(f"DELETE FROM {t}")

    def classify(self, exc: BaseException) -> BaseException:
        if isinstance(exc, OverflowError) and "sqlite" in str(exc).lower():
            # an int beyond 64 bits reached the driver (PostgreSQL answers 22003, also TN0001)
            return StorageError(f"SQLite error on {self.path!r}: {exc}")
        if isinstance(exc, TenureError) or not isinstance(exc, sqlite3.Error):
            return exc
        msg = str(exc).lower()
        code = getattr(exc, "sqlite_errorcode", None)
        if code == sqlite3.SQLITE_TOOBIG or "too big" in msg:
            return StoreLimitExceeded(f"{self.path!r} refused a value over SQLite's length limit "
                                      f"(SQLITE_TOOBIG); nothing was written: {exc}")
        if code is not None and code & 0xFF == sqlite3.SQLITE_CORRUPT or "malformed" in msg:
            return StoreCorrupt(f"{self.path!r} is corrupt ({exc}); restore a backup or salvage it "
                                "with `sqlite3 FILE .recover`")
        if isinstance(exc, sqlite3.ProgrammingError) and "closed" in msg:
            return StoreClosed("the store is closed")
        if "locked" in msg or "busy" in msg:
            return StoreBusy(f"the database {self.path!r} stayed locked for more than "
                             f"{self.busy_timeout_ms} ms (another process holds a write lock)")
        if "readonly" in msg or "read-only" in msg:
            return ReadOnlyStore(f"the database {self.path!r} is read-only")
        if "full" in msg:
            return StorageFull(f"the disk holding {self.path!r} is full; nothing was written")
        if "unable to open" in msg or "disk i/o" in msg:
            return StoreUnavailable(f"cannot open or read {self.path!r}: {exc}{_missing_directory(self.path)}")
        return StorageError(f"SQLite error on {self.path!r}: {exc}")


def _missing_directory(path: str) -> str:
    """A hint for SQLite's bare "unable to open database file": the file's directory is missing
    (SQLite creates the file, never its directory)."""
    if path.startswith("file:") or path == ":memory:":
        return ""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(directory):
        return ""
    return f" (its directory {directory!r} does not exist; create it first)"


def _column_exists(conn: sqlite3.Connection, stmt: str) -> bool:
    words = stmt.split()
    if len(words) >= 6 and [w.upper() for w in words[:2]] == ["ALTER", "TABLE"] and \
            [w.upper() for w in words[3:5]] == ["ADD", "COLUMN"]:
        table, column = words[2], words[5]
        cols = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        return column in cols
    return False


def _read_only_media(path: str) -> bool:
    """True when an existing database file, or the directory its journal files go to, cannot be
    written. ``access(2)`` answers EROFS on a read-only mount even for root."""
    if not os.path.exists(path):
        return False
    if not os.access(path, os.W_OK):
        return True
    if os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
        return False
    # The directory is read-only: WAL mode still works when its -wal and -shm files already exist
    # and can be written (another process created them); otherwise nothing could be written.
    return not all(os.access(path + suffix, os.W_OK) for suffix in ("-wal", "-shm"))


def _check_pages(conn: sqlite3.Connection, path: str) -> None:
    """``PRAGMA quick_check``: every page's structure, without the index-content cross-check of
    ``integrity_check`` (linear in the file's size). A corrupt page refuses the open (TN0010)."""
    try:
        verdict = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        if "malformed" not in str(exc).lower() and "not a database" not in str(exc).lower():
            raise
        verdict = str(exc)
    if verdict != "ok":
        conn.close()
        raise StoreCorrupt(f"{path!r} failed its integrity check at open ({' '.join(verdict.split())}); tenure will not read or "
                           "write it: restore a backup, or salvage it with `sqlite3 FILE .recover` "
                           "(?quick_check=0 in the URL skips this check)")


def file_exists(path: str) -> bool:
    return os.path.exists(path)
