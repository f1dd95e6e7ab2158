"""The PostgreSQL engine: a psycopg 3 connection pool, MVCC instead of a gate, LISTEN/NOTIFY wake-up.

Why it looks the way it does:

* **No gate** (``exclusive_gate = False``). PostgreSQL has many writers; a claim locks its rows
  with ``FOR UPDATE SKIP LOCKED`` so concurrent claimers pass each other, and every settling
  statement carries the fence in its own ``WHERE`` clause.
* **The database's clock.** ``now=None`` means ``clock_timestamp()`` on the server, read once per
  statement, so hosts with skewed clocks agree on who holds a lease.
* **Sessions autocommit**; a multi-statement operation (a limited claim, a chunked bulk insert)
  opens its own transaction, or joins the caller's when there is one.
* **A dead connection never poisons the pool**: a connection idle for more than
  :data:`CHECK_IDLE_AFTER` seconds (and, for a moment after a connection was lost, every
  connection) is checked (one empty round trip) before it is handed out, and one that broke in use
  is discarded by the pool when it comes back.
* **No call waits forever**: a call (and its wait for a connection) made under a deadline
  (:meth:`PostgresEngine.deadline`, set by the worker and the maintenance service from the lease,
  and ``?call_timeout=`` for every root call) is cut by a watchdog that shuts its socket down
  (``deadline.py``); every connection has TCP keepalives and ``tcp_user_timeout``.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql as pgsql
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from ... import durations
from ...errors import (
    ForeignConnection,
    InvalidArgument,
    InvalidType,
    InvalidURL,
    OperationWithdrawn,
    ReadOnlyStore,
    SchemaTooNew,
    StorageError,
    StorageFull,
    StoreBusy,
    StoreClosed,
    StoreLimitExceeded,
    StoreUnavailable,
    TenureError,
)
from ...redact import credentials, redact_url, scrub
from ..base import Engine
from ..migrate import LATEST_VERSION_HINT, load_migrations, split_statements
from ..urls import POSTGRES_SCHEMES
from . import queries as Q
from .deadline import Watchdog, call_deadline
from .deadline import current as deadline_spec
from .session import REUSED_CURSORS, PostgresSession
from .watch import PostgresWatcher

#: A pooled connection idle longer than this is checked before use (after a server restart every
#: idle connection is dead; one returned a moment ago almost never is, and skipping its check
#: saves a round trip on the hot path).
CHECK_IDLE_AFTER = 1.0
#: After a connection is lost, every pooled connection is checked before use for this long (s).
SUSPECT_AFTER_LOSS = 2.0
#: Options tenure reads from the URL's query string (everything else goes to libpq).
URL_OPTIONS = ("schema", "pool_min", "pool_max", "pool_timeout", "call_timeout")
#: TCP settings of every connection (pooled, LISTEN, migration) unless the URL sets its own: a
#: silently dropped peer is noticed within ~25 s (keepalives) and unacknowledged writes give up
#: after TCP_USER_TIMEOUT_MS. They cannot see a path that still acknowledges packets (a stalled
#: proxy); the client-side deadlines (deadline.py) can.
TCP_SETTINGS = {"keepalives": "1", "keepalives_idle": "10", "keepalives_interval": "5",
                "keepalives_count": "3", "tcp_user_timeout": "30000"}
#: The deadline of a watcher's statements (its lead, follow and reconnect set-up) when neither
#: its thread nor ``call_timeout`` sets one: as long as ``tcp_user_timeout`` above.
WATCH_CALL_S = 30.0
#: How often a connection wait checks its caller's cancellation (seconds).
CANCEL_POLL = 0.02
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

log = logging.getLogger("tenure.engine.postgres")


# -- wake-up -------------------------------------------------------------------------------------


def _stamp_new(conn: psycopg.Connection) -> None:
    """A new pooled connection counts as just used: it is not checked before its first use. It
    gets the cursors its hot statements reuse (``session._cursor``): ``conn.execute`` builds a
    cursor, and its adapters, per call (~15 us of client CPU each). One set of
    :data:`REUSED_CURSORS`: a settle-and-claim pipelines three statements, each needing a cursor
    of its own to hold its answer; the first also serves the statements sent alone (the root
    enqueue's INSERT, a lone settlement, ``get``)."""
    conn._tenure_returned = time.monotonic()  # type: ignore[attr-defined]
    conn._tenure_cursors = tuple(conn.cursor(row_factory=tuple_row)  # type: ignore[attr-defined]
                                 for _ in range(REUSED_CURSORS))


class _LastInFirstOutPool(ConnectionPool):
    """A pool that hands out the connection returned LAST (psycopg_pool's own hands out the one
    returned first). An idle worker's claim then runs on the connection its last settlement just
    used, whose server process is awake, its caches and prepared claim warm; first-in-first-out,
    every connection a burst opened took its turn, and each one's first claim paid for a cold
    server process (4-40 ms on a loaded host: docs/performance.md, "Where enqueue->start latency
    goes"). The connections a burst opened stay at the bottom, unused, and the pool's shrinking
    (which closes from the bottom) retires them after ``max_idle``. If psycopg_pool's internals
    ever differ from what this overrides, the pool stays first-in-first-out (no error)."""

    def _get_ready_connection(self, timeout: float | None) -> Any:
        ready = getattr(self, "_pool", None)
        if not ready or not hasattr(self, "_nconns_min") or (timeout is not None and timeout <= 0.0):
            return super()._get_ready_connection(timeout)
        conn = ready.pop()  # the most recently returned (putconn appends on the right)
        if len(ready) < self._nconns_min:
            self._nconns_min = len(ready)
        return conn


# -- the engine ----------------------------------------------------------------------------------


class PostgresEngine(Engine):
    dialect = "postgres"
    exclusive_gate = False

    def __init__(self, url: str, *, schema: str | None = None, pool_min: int = 1, pool_max: int = 10,
                 pool_timeout: float | str = 10.0, connect_timeout: int = 10, prepare_threshold: int | None = 5,
                 application_name: str = "tenure", call_timeout: float | str | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme.lower() not in POSTGRES_SCHEMES:
            raise InvalidURL(f"not a PostgreSQL URL: {redact_url(url)!r}")
        query = parse_qsl(parts.query, keep_blank_values=True)
        ours = {k: v for k, v in query if k in URL_OPTIONS}
        rest = [(k, v) for k, v in query if k not in URL_OPTIONS]
        # Joined by hand: urlunsplit drops the "//" of an empty authority, and libpq reads
        # "postgresql://?host=/run/postgresql&dbname=app" (every parameter in the query: a socket
        # directory, any password character) but not "postgresql:?...".
        tail = urlunsplit(("", "", parts.path, urlencode(rest, quote_via=quote), parts.fragment))
        self.url = f"postgresql://{parts.netloc}{tail}"
        self._secrets = credentials(url)
        try:
            self.schema = schema if schema is not None else ours.get("schema") or None
            self.pool_min = int(ours.get("pool_min", pool_min))
            self.pool_max = int(ours.get("pool_max", pool_max))
        except ValueError as exc:
            raise InvalidURL(f"bad pool option in {redact_url(url)!r}: {exc}") from None
        try:  # durations: seconds, a timedelta, or text like 250ms, 10s (tenure.durations)
            self.pool_timeout = durations.seconds(ours.get("pool_timeout", pool_timeout), "pool_timeout")
            raw = ours.get("call_timeout", call_timeout)
            #: Seconds every root call may take before the client cuts it (None: only the
            #: worker's and maintenance's own deadlines apply); see deadline.py.
            self.call_timeout = None if raw in (None, "") else durations.seconds(raw, "call_timeout", positive=True)
        except TenureError as exc:
            raise InvalidURL(exc.message) from None
        if self.schema is not None and not _SCHEMA_NAME.match(self.schema):
            raise InvalidURL(f"schema must be a plain identifier (letters, digits, _), got {self.schema!r}")
        if not 0 <= self.pool_min <= self.pool_max or self.pool_max < 1:
            raise InvalidArgument(f"need 0 <= pool_min <= pool_max and pool_max >= 1, got "
                                  f"{self.pool_min}/{self.pool_max}")
        self.connect_timeout = int(connect_timeout)
        self.prepare_threshold = prepare_threshold
        given = dict(psycopg.conninfo.conninfo_to_dict(self.url))
        extra: dict[str, Any] = {"application_name": application_name,
                                 "connect_timeout": str(max(self.connect_timeout, 2)),
                                 **{k: v for k, v in TCP_SETTINGS.items() if k not in given}}
        if self.schema is not None:
            # search_path at connection start: tenure's tables first, the application's (public)
            # still visible to tx.execute.
            opts = dict(psycopg.conninfo.conninfo_to_dict(self.url)).get("options") or ""
            extra["options"] = f"{opts} -c search_path={self.schema},public".strip()
        try:
            self.conninfo = psycopg.conninfo.make_conninfo(self.url, **extra)
        except psycopg.ProgrammingError as exc:
            raise InvalidURL(f"cannot parse {redact_url(url)!r}: {self._scrub(str(exc))}") from None
        self._pool: ConnectionPool | None = None
        self._verify_until = 0.0
        self._watchdog = Watchdog()
        self._closed = False
        self._lock = threading.Lock()
        self._watchers: weakref.WeakSet[PostgresWatcher] = weakref.WeakSet()
        self._identity: tuple[Any, ...] | None = None  # (database, server start) of the pool
        self._adopted: set[tuple[Any, ...]] = set()  # conn= sessions found on the same database

    def describe(self) -> str:
        text = redact_url(self.url)
        return text if self.schema is None else f"{text} (schema {self.schema})"

    # -- lifecycle ---------------------------------------------------------------------------
    def open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")
        try:
            # A direct connection first: it surfaces the real reason (auth, unknown database, no
            # server) where a pool would only time out.
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                self._migrate(conn)
            pool = _LastInFirstOutPool(
                self.conninfo, min_size=self.pool_min, max_size=self.pool_max, open=False,
                kwargs={"autocommit": True, "prepare_threshold": self.prepare_threshold},
                configure=_stamp_new, timeout=self.pool_timeout,
                name="tenure", num_workers=2)
            pool.open(wait=self.pool_min > 0, timeout=max(self.connect_timeout, 2))
        except TenureError:
            raise
        except Exception as exc:
            err = self.classify(exc)
            if isinstance(err, ReadOnlyStore):
                raise ReadOnlyStore(f"cannot create tenure's tables in {self.describe()}: {err.message}") from exc
            if err is exc:
                raise
            raise err from exc
        with self._lock:
            if self._closed:
                pool.close()
                raise StoreClosed("the store is closed")
            self._pool = pool

    def _migrate(self, conn: psycopg.Connection) -> None:
        migrations = load_migrations(__package__)
        latest = migrations[-1].version
        wanted = {m.version for m in migrations}
        # SELECT EXISTS (...) answers exactly one row.
        if conn.execute(Q.MIGRATIONS_TABLE_EXISTS, {"schema": self.schema}).fetchone()[0]:  # type: ignore[index]
            applied = {r[0] for r in conn.execute(Q.APPLIED_VERSIONS)}
            self._refuse_newer(applied, latest)
            if applied >= wanted:
                return
        # Under one advisory lock for the whole transaction: of N processes opening an empty
        # database at once, one migrates and the others then find the work done.
        with conn.transaction():
            conn.execute(Q.MIGRATION_LOCK_TIMEOUT)
            conn.execute(Q.MIGRATION_LOCK)
            if self.schema is not None:
                conn.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(self.schema)))
            conn.execute(Q.MIGRATIONS_TABLE)
            applied = {r[0] for r in conn.execute(Q.APPLIED_VERSIONS)}
            self._refuse_newer(applied, latest)
            for mig in migrations:
                if mig.version in applied:
                    continue
                for stmt in split_statements(mig.sql):
                    conn.execute(stmt)
                conn.execute(Q.RECORD_MIGRATION, {"version": mig.version, "name": mig.name})

    def _refuse_newer(self, applied: set[int], latest: int) -> None:
        if applied and max(applied) > latest:
            raise SchemaTooNew(f"{self.describe()} has tenure schema version {max(applied)}; this tenure "
                               f"knows up to {latest}: {LATEST_VERSION_HINT}")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            watchers = list(self._watchers)
        for w in watchers:
            w.close()
        if pool is not None:
            pool.close(timeout=5.0)
        self._watchdog.close()

    # -- deadlines ---------------------------------------------------------------------------
    def deadline(self, seconds: float | None, group: Any = None) -> AbstractContextManager[None]:
        """Within the block, each call this thread makes must answer within ``seconds`` (capped by
        ``call_timeout``; None: no deadline at all) or is cut by the watchdog and fails with
        ``StoreUnavailable``; :meth:`interrupt` cuts the calls of ``group`` at once."""
        if seconds is not None and self.call_timeout is not None:
            seconds = min(seconds, self.call_timeout)
        return call_deadline(seconds, group)

    def interrupt(self, group: Any) -> int:
        """Cut the calls of ``group`` in flight now (a stopping worker); answers how many."""
        return self._watchdog.interrupt(group, "interrupted: the caller is stopping")

    # -- sessions ----------------------------------------------------------------------------
    def _live(self) -> ConnectionPool:
        pool = self._pool
        if pool is None or self._closed:
            raise StoreClosed("the store is closed")
        return pool

    @contextmanager
    def _connection(self, cancel: threading.Event | None, root: bool = True,
                    session: bool = False) -> Iterator[Any]:
        """A pooled connection for one block (committed or rolled back at its end like
        ``pool.connection()``), or with ``session`` a :class:`PostgresSession` on it (what
        :meth:`session` answers, without a second generator around this one: a root enqueue
        opens one per call). The wait for one is bounded by ``pool_timeout``; a set ``cancel``
        withdraws it with :class:`OperationWithdrawn` before anything ran. The block is watched
        by the deadline this thread set (:meth:`deadline`), else, for a ``root`` call (not the
        application's own transaction), by ``call_timeout``; a call cut at its deadline raises
        ``StoreUnavailable``."""
        spec = deadline_spec()
        seconds = spec.seconds if spec is not None else (self.call_timeout if root else None)
        pool = self._live()
        dog = self._watchdog
        # One watch for the whole block, from the wait for a connection to its return: the wait,
        # the check of a suspect connection and the call are all cut at the deadline.
        watched = seconds is not None and seconds < math.inf
        with dog.watch(-1, seconds, spec and spec.group) if seconds is not None and watched else nullcontext() as call:
            conn = self._getconn(pool, cancel, call)
            try:
                started = time.monotonic()
                if started < self._verify_until or \
                        started - getattr(conn, "_tenure_returned", started) > CHECK_IDLE_AFTER:
                    conn = self._verified(pool, conn, started + self.pool_timeout, call)
                if call is None:
                    with conn:  # a pooled connection is not closed by this, only committed/rolled back
                        yield PostgresSession(conn) if session else conn
                else:
                    dog.rebind(call, conn.pgconn.socket)
                    try:
                        with conn:
                            yield PostgresSession(conn) if session else conn
                    except Exception as exc:
                        if not call.fired:
                            raise
                        self._suspect()
                        raise StoreUnavailable(
                            f"no answer from {self.describe()}: {call.reason}; the connection was closed "
                            "(the call may or may not have taken effect)", retriable=True) from exc
            finally:
                if call is not None:
                    dog.rebind(call, -1)  # never cut a socket once it is back in the pool
                # Stamped here, not by a pool ``reset`` callback: with one, psycopg_pool hands every
                # returned connection to its worker thread (a thread hop per claim and per
                # settlement, ~12 us of GIL time per job in a drain, and a claim could wait for it).
                conn._tenure_returned = time.monotonic()  # type: ignore[attr-defined]
                pool.putconn(conn)

    def _getconn(self, pool: ConnectionPool, cancel: threading.Event | None, call: Any) -> psycopg.Connection:
        """A connection from the pool within ``pool_timeout``. A set ``cancel`` withdraws a call
        that has to wait (:class:`OperationWithdrawn`, nothing ran); a watched call (``call``) that
        reaches its deadline, or is interrupted, while waiting fails with ``StoreUnavailable``."""
        if cancel is None and call is None:
            return pool.getconn()
        # Like SQLite's gate: a free connection is taken even when ``cancel`` is set; the
        # cancellation only withdraws a call that would have to WAIT.
        deadline = time.monotonic() + self.pool_timeout
        while True:
            try:
                return pool.getconn(timeout=max(min(CANCEL_POLL, deadline - time.monotonic()), 0.001))
            except PoolTimeout:
                if cancel is not None and cancel.is_set():
                    raise OperationWithdrawn("withdrawn while waiting for a database connection; "
                                             "nothing ran") from None
                if call is not None and call.fired:
                    raise StoreUnavailable(f"no connection to {self.describe()}: {call.reason}; nothing ran",
                                           retriable=True) from None
                if time.monotonic() >= deadline:
                    raise PoolTimeout(f"couldn't get a connection after {self.pool_timeout:.2f} sec") from None

    def session(self, cancel: threading.Event | None = None) -> AbstractContextManager[PostgresSession]:
        return self._connection(cancel, session=True)

    @contextmanager
    def transaction(self, cancel: threading.Event | None = None) -> Iterator[PostgresSession]:
        spec = deadline_spec()
        with self._connection(cancel, root=False) as conn:
            with conn.transaction():
                if spec is not None and spec.seconds < math.inf:
                    # A transaction of several round trips under a deadline (a worker's failures and
                    # their dead letters): the server also ends it if it outlives the deadline or sits
                    # idle (a client that vanished mid-transaction), so its locks never linger.
                    ms = str(max(int(spec.seconds * 1000), 1))
                    conn.execute(Q.LOCAL_TIMEOUTS, {"ms": ms})
                yield PostgresSession(conn)

    def adopt(self, connection: Any) -> PostgresSession:
        if not isinstance(connection, psycopg.Connection):
            raise InvalidType(f"conn= must be a psycopg.Connection on a PostgreSQL store, got "
                              f"{type(connection).__name__}")
        if self.schema is not None:
            # A SELECT without FROM answers exactly one row.
            current = connection.execute(Q.CURRENT_SCHEMA).fetchone()[0]  # type: ignore[index]
            if current != self.schema:
                raise InvalidArgument(
                    f"conn= resolves tables in schema {current!r} but this store's tables are in "
                    f"{self.schema!r}: connect it with options='-c search_path={self.schema},public'")
        self._check_same_database(connection)
        return PostgresSession(connection)

    def _check_same_database(self, connection: psycopg.Connection) -> None:
        """Refuse (:class:`ForeignConnection`) a ``conn=`` on another database or server than the
        store's: its jobs would land where no worker of this store looks. One query per server
        session, remembered by its backend pid."""
        info = connection.info
        key = (info.host, info.port, info.dbname, info.backend_pid)
        if key in self._adopted:
            return
        if self._identity is None:
            with self._connection(None) as own:
                self._identity = tuple(own.execute(Q.DATABASE_IDENTITY).fetchone() or ())
        theirs = tuple(connection.execute(Q.DATABASE_IDENTITY).fetchone() or ())
        if theirs != self._identity:
            raise ForeignConnection(
                f"conn= is connected to database {theirs[0]!r} of another server or database than "
                f"this store ({self.describe()}, database {self._identity[0]!r}): a job enqueued "
                f"through it would never reach this store's workers")
        if len(self._adopted) > 1024:
            self._adopted.clear()
        self._adopted.add(key)

    def watcher(self) -> PostgresWatcher:
        return self._new_watcher(Q.CHANNEL)

    def _watch_call_s(self) -> float:
        """The deadline of a watcher's statements when its thread set none: ``call_timeout``,
        else :data:`WATCH_CALL_S` (never none: a silent network must not hold a watch thread)."""
        return self.call_timeout if self.call_timeout is not None else WATCH_CALL_S

    def cancel_watcher(self) -> PostgresWatcher:
        """``LISTEN tenure_cancel`` (migration 0010's trigger notifies it when a cancel request
        flags a running job), on a dedicated connection like :meth:`watcher`."""
        return self._new_watcher(Q.CANCEL_CHANNEL)

    def _new_watcher(self, channel: str) -> PostgresWatcher:
        """A watcher of ``channel`` on a dedicated connection, its statements under the engine's
        watchdog, closed with the store."""
        self._live()
        w = PostgresWatcher(self.conninfo, self.schema, {
            # Detect a silently dropped connection (a partition, a killed host) within ~30 s.
            "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3},
            channel=channel, watchdog=self._watchdog, call_s=self._watch_call_s())
        with self._lock:
            if self._closed:
                w.close()
                raise StoreClosed("the store is closed")
            self._watchers.add(w)
        return w

    def reset_for_tests(self) -> None:
        with self.session() as s:
            s.execute(s.execute(Q.TRUNCATE_STATEMENT).fetchone()[0])

    def _verified(self, pool: ConnectionPool, conn: psycopg.Connection, deadline: float,
                  call: Any = None) -> psycopg.Connection:
        """Check a connection (one empty round trip) before use when it sat idle longer than
        :data:`CHECK_IDLE_AFTER` (the server may have dropped it: a restart, an idle timeout), and
        every connection for :data:`SUSPECT_AFTER_LOSS` seconds after one was lost (terminated
        backends, a failover: its siblings are likely dead too, and a retry must get a live one).
        A dead one is discarded and the next taken at once, up to ``pool_max + 1`` of them (the
        pool's own check loop would sleep a second, then two, ... between tries)."""
        for _ in range(self.pool_max + 1):
            now = time.monotonic()
            if now >= self._verify_until and now - getattr(conn, "_tenure_returned", now) <= CHECK_IDLE_AFTER:
                return conn
            try:
                if call is not None:
                    self._watchdog.rebind(call, conn.pgconn.socket)  # the check is cut at the deadline
                ConnectionPool.check_connection(conn)
                return conn
            except Exception:  # noqa: BLE001 - any failure (a cut check too): the connection is not usable
                self._suspect()
                if call is not None:
                    self._watchdog.rebind(call, -1)
                pool.putconn(conn)  # broken: the pool discards it and opens another
                if call is not None and call.fired:
                    raise StoreUnavailable(f"no connection to {self.describe()}: {call.reason}; nothing ran",
                                           retriable=True) from None
                conn = self._getconn(pool, None, call) if call is not None else \
                    pool.getconn(timeout=max(deadline - time.monotonic(), 0.001))
        return conn

    def _suspect(self) -> None:
        """A connection was lost: check every pooled connection before use for a while."""
        self._verify_until = time.monotonic() + SUSPECT_AFTER_LOSS

    # -- errors ------------------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        return scrub(text, self._secrets)

    def classify(self, exc: BaseException) -> BaseException:
        if isinstance(exc, TenureError):
            return exc
        where = self.describe()
        if isinstance(exc, PoolTimeout):
            return StoreUnavailable(
                f"no connection to {where} within {self.pool_timeout:g} s: the server is unreachable "
                f"or all {self.pool_max} pooled connections are busy (raise pool_max or pool_timeout)")
        if isinstance(exc, PoolClosed):
            return StoreClosed("the store is closed")
        if not isinstance(exc, psycopg.Error):
            return exc
        state = exc.sqlstate or ""
        detail = self._scrub(" ".join(str(exc).split())) or type(exc).__name__
        if state.startswith("54"):  # program_limit_exceeded & co: permanent, never "could not reach"
            return StoreLimitExceeded(f"{where} refused a value or statement over one of its limits "
                                      f"(SQLSTATE {state}); nothing was written: {detail}")
        if state == "53100":
            return StorageFull(f"the disk holding {where} is full; nothing was written ({detail})")
        if state in ("55P03", "55006", "57014", "40P01") or state.startswith("40"):
            return StoreBusy(f"{where} stayed locked or busy (SQLSTATE {state}): {detail}")
        if state in ("25006", "42501"):
            return ReadOnlyStore(f"{where} cannot be written (SQLSTATE {state}): {detail}")
        if state.startswith("08") or state.startswith("57P") or state == "53300" or \
                isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            # ``retriable``: the connection broke (or never opened); a call whose repeat is
            # harmless (an enqueue with its minted ids) may retry on a fresh connection.
            self._suspect()
            return StoreUnavailable(f"lost or could not reach {where}: {detail}", retriable=True)
        return StorageError(f"PostgreSQL error on {where} (SQLSTATE {state or 'none'}): {detail}")


