"""The engine boundary: what a database must do for tenure, and nothing about queue semantics.

An :class:`Engine` owns connections, migrations and wake-up; a :class:`Session` is one
connection (inside or outside a transaction) with Noun+Verb methods, one per query. The
semantics (the fence's classification, backoff, dead letters, policies) live above, in
:mod:`tenure.jobs`, written once for every engine.

The Session contract is declared in two halves, :class:`~tenure.engine.job_contract.JobContract`
(a job's life: insert, claim, settle, dependencies, checkpoints, signals) and
:class:`~tenure.engine.admin_contract.AdminContract` (queues, schedules, leadership, workers,
retention, the read model); :class:`Session` is both, plus what spans them. Import every name from
here.

Rows cross the boundary as the named records of :mod:`tenure.engine.rows` (JSON columns still
as text), so the semantics layer never sees a driver type nor reads a column by position. ``now`` is an epoch-ms int or
``None``; ``None`` means "the database's clock" (PostgreSQL) or the wall clock (SQLite).
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from ..errors import StorageError
from .admin_contract import AdminContract
from .job_contract import JobContract


class Session(JobContract, AdminContract):
    """One connection's worth of queries. Not thread-safe; obtained from an :class:`Engine`.

    Every method a dialect must provide is declared on it, with its types: a job's life in
    :class:`~tenure.engine.job_contract.JobContract`, the rest in
    :class:`~tenure.engine.admin_contract.AdminContract`, what spans both here. Each dialect's
    session implements the job methods itself and the rest in its queues, maintenance and
    insights mixins."""

    dialect: str

    # -- transactions spanning both halves ------------------------------------------------------
    def dependency_atomic(self) -> AbstractContextManager[None]:
        """One transaction for an enqueue with dependencies (its rows appear together or not at
        all), joining the caller's open one."""
        return self.queue_atomic()

    # -- application SQL (outbox, handler transactions) ----------------------------------------
    @abc.abstractmethod
    def execute(self, sql: str, params: Any = None) -> Any:
        """Run the application's own SQL on this session's connection; answers the cursor."""

    @property
    @abc.abstractmethod
    def connection(self) -> Any:
        """The driver connection (sqlite3.Connection / psycopg.Connection) for user code."""


class Watcher(abc.ABC):
    """Cross-process wake-up: blocks until the jobs table may have new eligible work."""

    @abc.abstractmethod
    def wait(self, timeout: float) -> bool:
        """True when woken by a change, False on timeout."""

    @abc.abstractmethod
    def close(self) -> None: ...


class Engine(abc.ABC):
    """A database tenure can run on. Subclasses live in ``tenure.engine.<dialect>``."""

    dialect: str
    #: True when root calls must wait for an open application transaction in this process
    #: (SQLite: one writer; the store gate serialises). False on PostgreSQL (MVCC).
    exclusive_gate: bool

    @abc.abstractmethod
    def open(self) -> None:
        """Connect and migrate (under a lock where several processes may race)."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def session(self, cancel: threading.Event | None = None) -> AbstractContextManager[Session]:
        """A session for one root call, autocommitting each statement. While it waits for a
        connection (or the gate), a set ``cancel`` withdraws it with
        :class:`tenure.errors.OperationWithdrawn` before anything runs."""

    @abc.abstractmethod
    def transaction(self, cancel: threading.Event | None = None) -> AbstractContextManager[Session]:
        """A session inside one write transaction: committed on normal exit, rolled back on error."""

    @abc.abstractmethod
    def adopt(self, connection: Any) -> Session:
        """A session over the caller's own driver connection (the outbox ``conn=`` form); the
        caller owns its transaction."""

    @abc.abstractmethod
    def watcher(self) -> Watcher:
        """A new cross-process wake-up watcher."""

    @abc.abstractmethod
    def reset_for_tests(self) -> None:
        """Empty every tenure table (tests only)."""

    @abc.abstractmethod
    def classify(self, exc: BaseException) -> BaseException:
        """Map a driver exception to a coded :class:`tenure.errors.StorageError` (or return
        ``exc`` unchanged when it is already coded or not a driver error)."""

    @contextmanager
    def coded_errors(self, *, keep_statement_errors: bool = False) -> Iterator[None]:
        """Inside this block a driver exception leaves as its coded error (:meth:`classify`),
        chained to it; any other exception leaves as itself. With ``keep_statement_errors`` (the
        application's own SQL), an error :meth:`classify` can only call a plain
        :class:`~tenure.errors.StorageError` — the statement's own fault: a constraint, a syntax
        error — leaves as the driver raised it; a verdict on the database (lost connection, full
        disk, hard limit, corrupt file, busy, read-only) is still coded."""
        try:
            yield
        except Exception as exc:
            err = self.classify(exc)
            if err is exc or (keep_statement_errors and type(err) is StorageError):
                raise
            raise err from exc

    def cancel_watcher(self) -> Watcher | None:
        """A watcher woken when a cancel request is flagged (``jobs.request_cancel``) in any
        process, or None when the engine has none (the holders then poll; :mod:`tenure.worker.cancel_watch`)."""
        return None

    def describe(self) -> str:
        """A human description with no secret in it (for banners and logs)."""
        return self.dialect

    def deadline(self, seconds: float | None, group: Any = None) -> AbstractContextManager[None]:
        """Within the block, each call this thread makes must answer within ``seconds`` (None:
        no deadline); :meth:`interrupt` cuts the calls of ``group`` at once. Engines whose calls
        can hang on a network (PostgreSQL) enforce it; the default does nothing (SQLite is local)."""
        return nullcontext()

    def interrupt(self, group: Any) -> int:
        """Cut the calls of ``group`` in flight now; answers how many (default: none)."""
        return 0
