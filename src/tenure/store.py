"""The store: one database, its clock and randomness, and the gate every root call takes."""

from __future__ import annotations

import os
import random as _random_mod
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from .engine import create_engine, redact_url
from .engine.base import Engine, Session
from .errors import (
    HandlersLeftRunning,
    InvalidType,
    NestedRootCall,
    StoreClosed,
    TenureError,
)
from .jobs import Jobs
from .open_tx import OpenTransactions, refuse_nested
from .transaction import Transaction

if TYPE_CHECKING:
    from .insights import Insights
    from .maintenance import Maintainer
    from .queues import Queues
    from .schedules import Schedules
    from .signals import Signals
    from .worker import Worker, WorkerConfig

DEFAULT_URL = "sqlite:///tenure.db"
Clock = Callable[[], int]
Random = Callable[[], float]


def connect(url: str | None = None, *, clock: Clock | None = None, random: Random | None = None,
            max_payload_bytes: int | None = None, **engine_options: Any) -> Store:
    """Open a store. ``url`` None reads ``$TENURE_URL``, else ``sqlite:///tenure.db``.

    ``clock`` answers epoch ms and ``random`` a float in [0, 1): inject both in tests. Without a
    clock, SQLite uses the wall clock and PostgreSQL the database's clock (so hosts with skewed
    clocks agree). Tables are created (or migrated) at first use of ``store.jobs``.
    """
    url = url or os.environ.get("TENURE_URL") or DEFAULT_URL
    if clock is not None and not callable(clock):
        raise InvalidType("clock must be a callable answering epoch milliseconds")
    if random is not None and not callable(random):
        raise InvalidType("random must be a callable answering a float in [0, 1)")
    engine = create_engine(url, **engine_options)
    return Store(engine, clock=clock, random=random, max_payload_bytes=max_payload_bytes)


class Store:
    """A connection to one tenure database. Thread-safe; one per process is the usual shape."""

    def __init__(self, engine: Engine, *, clock: Clock | None = None, random: Random | None = None,
                 max_payload_bytes: int | None = None) -> None:
        from . import _validate

        self.engine = engine
        self.clock = clock
        self.random = random
        self.max_payload_bytes = max_payload_bytes or _validate.MAX_PAYLOAD_BYTES
        self._rng = _random_mod.Random()
        self._open_lock = threading.Lock()
        self._opened = False
        self._closed = False
        self._local = OpenTransactions()  # per thread AND per asyncio task (tenure.open_tx)
        self._jobs = Jobs(self)
        self._queues: Queues | None = None
        self._insights: Insights | None = None
        self._wake_hooks: list[Callable[[], None]] = []
        self._workers: list[Worker] = []
        self._attempts: dict[str, Any] = {}  # token -> in-flight attempt of a local worker
        self._attempts_lock = threading.Lock()

    # -- identity ----------------------------------------------------------------------------
    @property
    def dialect(self) -> str:
        return self.engine.dialect

    def __repr__(self) -> str:
        return f"<tenure.Store {redact_url(self.engine.describe())}>"

    # -- views -------------------------------------------------------------------------------
    @property
    def jobs(self) -> Jobs:
        """The root jobs view. First use creates or migrates tenure's tables."""
        self._ensure_open()
        return self._jobs

    @property
    def queues(self) -> Queues:
        if self._queues is None:
            from .queues import Queues

            self._queues = Queues(self)
        return self._queues

    @property
    def signals(self) -> Signals:
        """Durable signals to waiting runs: ``send(key, payload)`` / ``pending(key)`` (see
        :mod:`tenure.signals`)."""
        from .signals import Signals

        return Signals(self)

    @property
    def schedules(self) -> Schedules:
        """Cron schedules: ``add`` / ``remove`` / ``get`` / ``list`` (see :mod:`tenure.schedules`)."""
        from .schedules import Schedules

        return Schedules(self)

    @property
    def insights(self) -> Insights:
        """The read model operators look at (counts, queues, throughput, workers, schema versions;
        briefly cached): what ``tenure stats``, the dashboard and ``/metrics`` show. See
        :mod:`tenure.insights`."""
        if self._insights is None:
            from .insights import Insights

            self._insights = Insights(self)
        return self._insights

    @property
    def maintenance(self) -> Maintainer:
        """The maintenance service shared by this store's workers; ``run_once()`` runs one pass by
        hand (``tenure maintain --once``). See :mod:`tenure.maintenance`."""
        return self._maintenance()

    # -- fan-out (delegates to store.queues) ----------------------------------------------------
    def publish(self, event: str, payload: Any = None, *, conn: Any = None, **enqueue_options: Any) -> list[str | None]:
        """Enqueue one job of kind ``event`` on every queue subscribed to it, in one transaction;
        answers the ids in queue-name order. See :meth:`tenure.queues.Queues.publish`."""
        return self.queues.publish(event, payload, conn=conn, **enqueue_options)

    def subscribe(self, event: str, queue: str) -> bool:
        """Subscribe ``queue`` to ``event``; True when new. See :meth:`tenure.queues.Queues.subscribe`."""
        return self.queues.subscribe(event, queue)

    def unsubscribe(self, event: str, queue: str) -> bool:
        """Remove a subscription; True when it existed."""
        return self.queues.unsubscribe(event, queue)

    # -- clock & randomness --------------------------------------------------------------------
    def _now(self) -> int | None:
        """The injected clock's ms, or None: the engine's own clock."""
        clock = self.clock
        return None if clock is None else int(clock())

    def _now_or(self, session: Session, now: int | None) -> int:
        return now if now is not None else session.now_ms()

    def _now_wall(self) -> int:
        return int(self.clock()) if self.clock is not None else time.time_ns() // 1_000_000

    def _random(self) -> float:
        return self.random() if self.random is not None else self._rng.random()

    # -- sessions ----------------------------------------------------------------------------
    def _ensure_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")
        if self._opened:
            return
        with self._open_lock:
            if not self._opened:
                if self._closed:
                    raise StoreClosed("the store is closed")
                self.engine.open()
                self._opened = True

    def _check_root(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")
        local = self._local
        if local.tx is not None:
            # SQLite: it would wait forever for the gate this thread holds. PostgreSQL: it would
            # run on another connection and commit outside the open transaction. Both engines
            # refuse it the same way (D7).
            # Remembered: the transaction will not commit, the running handler fails with it.
            raise refuse_nested(
                local.tx, "a root store.jobs call inside this thread's open store.transaction() would wait "
                "for (SQLite) or escape (PostgreSQL) that transaction: use tx.jobs inside the block")
        if self.engine.exclusive_gate and local.on_thread() and local.held_by_sibling():
            # Another asyncio task on this thread (an async handler awaiting inside its block)
            # holds SQLite's one connection: waiting here would freeze the loop it needs to finish.
            raise NestedRootCall(
                "another task on this event loop holds the SQLite store's write transaction (an async "
                "handler awaiting inside its ctx.transaction() block): a root call here would freeze the "
                "loop it needs; open your own `async with ctx.transaction()` (it waits its turn), or do "
                "not await inside a block (docs/guarantees.md)")

    def _session(self, cancel: threading.Event | None = None) -> AbstractContextManager[Session]:
        """A root session (autocommit), with driver errors classified (:meth:`_classified`'s
        block itself: no generator around it, one fewer per root call)."""
        return self._classified(self.engine.session, cancel)

    @contextmanager
    def _transaction_session(self, cancel: threading.Event | None = None) -> Iterator[Session]:
        """A root session inside one write transaction, with driver errors classified."""
        with self._classified(self.engine.transaction, cancel) as s:
            yield s

    @contextmanager
    def _classified(self, opener, cancel: threading.Event | None,
                    passthrough: list[BaseException] | None = None) -> Iterator[Session]:
        """``opener``'s session with driver errors mapped to coded ones; an exception listed in
        ``passthrough`` (the application's own, raised in the body of ``store.transaction()``)
        is re-raised as itself."""
        self._check_root()
        self._ensure_open()
        try:
            with opener(cancel) as s:
                yield s
        except TenureError:
            raise
        except Exception as exc:
            if passthrough and any(exc is e for e in passthrough):
                raise
            err = self.engine.classify(exc)
            if err is exc:
                raise
            raise err from exc

    def _adopt(self, conn: Any) -> Session:
        from ._unwrap import driver_connection

        self._ensure_open()
        return self.engine.adopt(driver_connection(conn))

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One transaction for the application's SQL and tenure's outbox: jobs enqueued through
        ``tx.jobs`` become visible with the commit and vanish with a rollback. Root calls from
        other threads wait for it (SQLite); a root call from this thread is refused (TN2071), and
        the transaction then refuses to commit: a block that caught the refusal and ended normally
        is rolled back and raises TN2071 at its end."""
        self._check_root()
        # The block's own exceptions (an IntegrityError of the application's SQL, a ValueError)
        # roll the transaction back and reach the caller as themselves; only tenure's own
        # statements (begin, commit, tx.jobs) answer coded errors.
        body_errors: list[BaseException] = []
        with self._classified(self.engine.transaction, None, body_errors) as s:
            tx = Transaction(self, s)
            self._local.tx = tx
            try:
                yield tx
                refusal = tx._commit_refusal()
                if refusal is not None:
                    raise refusal  # a root call inside the block was refused and caught: roll back
            except BaseException as exc:
                body_errors.append(exc)
                raise
            finally:
                self._local.tx = None
                tx._settle()
        if tx._enqueued:
            self._wake_local()

    # -- local coordination (same-process wake-up and cancellation) -------------------------------
    def _create_worker(self, handlers: dict[str, Callable[..., Any]], config: WorkerConfig | None,
                       options: dict[str, Any]) -> Worker:
        """``store.jobs.create_worker``: the worker package sits above the job semantics, so the
        store (above both) is what makes one."""
        from .worker import Worker, WorkerConfig

        return Worker(self, handlers, WorkerConfig.build(config, options))

    def _wake_local(self) -> None:
        for hook in list(self._wake_hooks):
            try:
                hook()
            except Exception:  # noqa: BLE001 - a wake hook never breaks an enqueue
                pass

    def _cancel_local(self, job_id: str, token: str | None) -> list[Any]:
        """Tell this process's attempts of ``job_id`` (the one holding ``token``, its first or its
        current lease's) that an operator cancelled the job, and wait for each at most its
        worker's ``stop_grace``. Answers the attempts that did not wind up (spec D5)."""
        with self._attempts_lock:
            attempts = [a for a in self._attempts.values() if a.lease.job_id == job_id
                        and (token is None or a.token == token or a.lease.token == token)]
        return [a for a in attempts if not a.cancel_by_operator()]

    def _cancel_requested_local(self, job_id: str) -> None:
        """A cancel request was just flagged from this process: this process's workers look at
        once (another process's holder sees it through tenure.worker.cancel_watch)."""
        for worker in list(self._workers):
            watch = getattr(worker, "_cancel_watch", None)
            if watch is not None:
                watch.poke()

    # -- background services shared by this store's workers ---------------------------------------
    def _maintenance(self):
        """The store's maintenance service (cron firing, sweeps, worker heartbeats), shared by
        every worker of this store: started by the first worker that acquires it, stopped when the
        last releases it. See :mod:`tenure.maintenance`."""
        with self._open_lock:
            svc = getattr(self, "_maintainer", None)
            if svc is None:
                from .maintenance import Maintainer

                svc = self._maintainer = Maintainer(self)
            return svc

    # -- tests ---------------------------------------------------------------------------------
    def _reset_for_tests(self) -> None:
        self._ensure_open()
        self.engine.reset_for_tests()

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self, grace: float | None = None) -> None:
        """Stop this store's workers (within ``grace``), then close the connection either way.
        Raises :class:`HandlersLeftRunning` AFTER closing if handlers were still running."""
        if self._closed:
            return
        left = 0
        for worker in list(self._workers):
            result = worker.stop(grace=grace)
            left += result.in_flight
        self._closed = True
        self.engine.close()
        if left:
            raise HandlersLeftRunning(f"the store closed with {left} handler(s) still running; "
                                      "their attempts cannot settle and will be reclaimed after their lease")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
