"""``with store.transaction() as tx``: the application's SQL and tenure's outbox in one
transaction (:class:`Transaction`), and its job view ``tx.jobs`` (:class:`TxJobs`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .engine.base import Session
from .errors import (
    NestedRootCall,
    ScopeSettled,
)
from .jobs_base import _JobsBase

if TYPE_CHECKING:
    from .store import Store
    from .worker import Worker


class TxJobs(_JobsBase):
    """``tx.jobs``: the transactional outbox. Runs in exactly its transaction; refused after it."""

    def __init__(self, store: Store, tx: Any) -> None:
        self._store = store
        self._tx = tx

    @contextmanager
    def _session(self) -> Iterator[Session]:
        # tenure's own statements in the transaction answer coded errors; the application's
        # (tx.execute) are its own and pass through store.transaction() unchanged.
        with self._tx._scoped_session() as s, self._store.engine.coded_errors():
            yield s

    def _after_enqueue(self) -> None:
        self._tx._enqueued = True

    def _atomic_session(self):
        return self._session()

    def create_worker(self, handlers: dict[str, Callable[..., Any]], **options: Any) -> Worker:
        """A worker is root-owned even when created here: it is not bound to this transaction."""
        return self._store.jobs.create_worker(handlers, **options)


class Transaction:
    """``with store.transaction() as tx``: the application's SQL and tenure's outbox in one
    transaction. ``tx.execute`` runs app SQL; ``tx.jobs`` enqueues; both die with the block."""

    def __init__(self, store: Store, session: Session) -> None:
        self._store = store
        self._session_obj: Session | None = session
        self._enqueued = False
        #: The first root call refused inside this transaction (TN2071, set by
        #: :func:`tenure.open_tx.refuse_nested`): it will not commit.
        self._refused: NestedRootCall | None = None
        self.jobs = TxJobs(store, self)

    def _scoped_session(self):
        from contextlib import nullcontext

        if self._session_obj is None:
            raise ScopeSettled("this transaction has committed or rolled back; its tx.jobs (and any "
                               "checkpoint store made from it) cannot be used any more")
        return nullcontext(self._session_obj)

    def execute(self, sql: str, params: Any = None) -> Any:
        """Run the application's own SQL in this transaction (the dialect's placeholders).

        An error of the SQL itself (a constraint it violates, a syntax error: what the database
        reports as a plain error) reaches the caller as the driver raised it, so the application
        catches its own ``IntegrityError``. A verdict on the database rather than on the statement
        (the connection lost, the disk full, a hard limit, a corrupt file, a lock that never
        freed, a read-only store) is the coded error the rest of tenure raises for it."""
        with self._scoped_session() as s, self._store.engine.coded_errors(keep_statement_errors=True):
            return s.execute(sql, params)

    @property
    def connection(self) -> Any:
        """The driver connection of this transaction, to hand to the application's own code."""
        with self._scoped_session() as s:
            return s.connection

    def _commit_refusal(self) -> NestedRootCall | None:
        """Why this transaction must roll back instead of committing, though its block ended
        normally: a root call inside it was refused (TN2071) and the block went on past it (an
        ``except`` caught the refusal). Committing would keep the block's writes without what the
        refused call was to do (a durable step, an enqueue). None: it may commit."""
        if self._refused is None:
            return None
        err = NestedRootCall(
            "this transaction was rolled back, not committed: a root call inside it was refused and "
            f"the block went on past it (an except caught the refusal: {self._refused})")
        err.__cause__ = self._refused
        return err

    def _settle(self) -> None:
        self._session_obj = None
