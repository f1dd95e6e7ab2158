"""The handler transaction: a handler's writes and its fenced completion in ONE transaction.

``with ctx.transaction() as tx:`` (or ``async with``) opens a transaction on the store's own
database. ``tx.execute`` runs the application's SQL; ``tx.jobs.enqueue`` adds follow-up jobs;
``tx.result = value`` sets the completion value. When the block exits normally, the job's
completion is written in the same transaction, guarded by the lease's fence at COMMIT time: if the
fence refuses (superseded, expired, cancelled), everything rolls back, the application's writes
included, and the attempt ends ``lost`` (or ``cancelled``). So writes made through ``tx`` happen
exactly once per job, however many attempts run the handler.

**The block holds the lease.** The fence is checked when the block opens, and
the job row is locked from then until COMMIT or ROLLBACK (PostgreSQL ``FOR UPDATE``; SQLite's
single write transaction), so nothing else can claim, renew, cancel or settle the job while the
block runs: the lease is, in effect, extended for as long as the block holds it. The completion at
COMMIT therefore checks the token and state as usual but judges expiry at the instant the block
opened. A block that waits on a hot row for several leases completes exactly once, where it used to
be refused at COMMIT (TN2067), reclaimed, and refused again, forever.

**Per task.** The open transaction is tracked per asyncio task (:mod:`tenure.open_tx`), so an async
handler awaiting inside its block no longer makes its siblings on the worker's event loop fail with
TN2071. On SQLite a sibling's own ``async with ctx.transaction()`` waits its turn without blocking
the loop (the store has one connection); on PostgreSQL it simply opens its own.

**A refused root call is not swallowed.** A root call inside the block (a durable step, a root
enqueue, a nested block) is refused with TN2071 and remembered (:func:`tenure.open_tx.refuse_nested`):
a block that ends normally after it is rolled back, without the completion, and raises TN2071 at
its end; the attempt fails with it whatever the handler does next (docs/guarantees.md).
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Literal

from .. import _validate as v
from ..errors import FENCE_CODES, LeaseNotHeld, OperationWithdrawn, TenureError
from ..fence import refusal
from ..open_tx import refuse_nested
from ..transaction import Transaction
from .lifecycle import DETACHED, RUNNING

if TYPE_CHECKING:
    from ..engine.base import Session
    from .attempt import Attempt

_UNSET = object()
#: How often an async block on SQLite looks again whether a sibling task's block has ended.
SIBLING_POLL_S = 0.002


class HandlerTransaction(Transaction):
    """A :class:`tenure.transaction.Transaction` whose commit also completes the job, fenced."""

    def __init__(self, store, session, attempt: Attempt) -> None:
        super().__init__(store, session)
        self._attempt = attempt
        self.result: Any = None


class _HandlerTxScope:
    def __init__(self, attempt: Attempt) -> None:
        self._attempt = attempt
        self._cm: AbstractContextManager[Session] | None = None
        self._tx: HandlerTransaction | None = None
        self._opened: int | None = None

    def _refuse_early(self) -> BaseException | None:
        """Why this attempt cannot open a handler transaction at all (checked under its lock)."""
        a = self._attempt
        if a.state is DETACHED:
            return OperationWithdrawn(f"job {a.job.id!r}: the worker stopped and detached this attempt; "
                                      "it can no longer write")
        if a.lost is not None:
            return a.lost
        if a.operator_cancelled:
            return LeaseNotHeld(f"job {a.job.id!r} was cancelled by an operator", job_id=a.job.id)
        if a.state is not RUNNING:
            return LeaseNotHeld(f"job {a.job.id!r}: this attempt already settled it", job_id=a.job.id)
        if a.timed_out:
            return TimeoutError(f"job {a.job.id!r} timed out")
        return None

    def __enter__(self) -> HandlerTransaction:
        a = self._attempt
        store = a.worker.store
        if store._local.tx is not None:
            raise refuse_nested(store._local.tx, "a handler transaction cannot open inside another "
                                "transaction of this thread: use the open one")
        a.settle_lock.acquire()  # renewals pause while the block runs (the fence is re-checked at commit)
        try:
            early = self._refuse_early()
            if early is not None:
                raise early
            cm = store._transaction_session()
            session = cm.__enter__()
            try:
                lease = a.lease
                # One instant for the fence at the open and for the completion at COMMIT: from here
                # on the row lock keeps every other writer off the job (see the module docstring).
                now = store._now_or(session, store._now())
                if not session.job_lock(lease.job_id, lease.token, now):
                    err = refusal(session.job_get(lease.job_id), lease, now,
                                  "open a handler transaction for") \
                        or LeaseNotHeld(f"job {lease.job_id!r} is already settled")
                    self._lost(err)
                    raise err
                self._opened = now
            except BaseException as exc:
                cm.__exit__(type(exc), exc, exc.__traceback__)
                raise
        except BaseException:
            a.settle_lock.release()
            raise
        self._cm = cm
        self._tx = HandlerTransaction(store, session, a)
        store._local.tx = self._tx
        return self._tx

    def __exit__(self, exc_type, exc, tb) -> Literal[False]:
        a, tx, cm = self._attempt, self._tx, self._cm
        assert tx is not None and cm is not None  # set by __enter__, which returned
        store = a.worker.store
        try:
            store._local.tx = None
            if exc_type is not None:
                tx._settle()
                cm.__exit__(exc_type, exc, tb)  # ROLLBACK
                return False
            try:
                if a.timed_out:
                    raise TimeoutError(f"job {a.job.id!r} timed out; its handler transaction was rolled back")
                if a.state is DETACHED:
                    raise OperationWithdrawn(f"job {a.job.id!r}: the worker stopped and detached this "
                                             "attempt; its handler transaction was rolled back")
                refused = tx._commit_refusal()
                if refused is not None:
                    raise refused  # a root call in the block was refused and caught: no completion
                result = tx.result
                text = None if result is None else v.dump_json(result, "tx.result", store.max_payload_bytes)
                err = self._complete(store, tx._session_obj, text)
            except BaseException as failure:
                tx._settle()
                cm.__exit__(type(failure), failure, failure.__traceback__)  # ROLLBACK, gate released
                raise
            tx._settle()
            if err is not None:
                cm.__exit__(type(err), err, None)  # roll back the application's writes too
                self._lost(err)
                raise err
            cm.__exit__(None, None, None)  # COMMIT: the writes and the completion land together
            a.worker._handler_tx_completed(a)
            if tx._enqueued:
                store._wake_local()
            return False
        finally:
            a.settle_lock.release()

    def _complete(self, store, session, text: str | None) -> TenureError | None:
        """The job's fenced completion inside the block's transaction, its expiry judged at the
        instant the block opened (the row has been locked since); None, or the refusal."""
        return store._jobs._complete_locked(session, self._attempt.lease, text, self._opened)

    async def __aenter__(self) -> HandlerTransaction:
        store = self._attempt.worker.store
        if store.engine.exclusive_gate:
            # SQLite: a sibling task of this loop holds the store's one connection in its block;
            # wait for it here, without blocking the loop it needs to finish.
            local = store._local
            while local.tx is None and local.on_thread():
                await asyncio.sleep(SIBLING_POLL_S)
        return self.__enter__()

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        return self.__exit__(exc_type, exc, tb)

    def _lost(self, err: TenureError) -> None:
        a = self._attempt
        if getattr(err, "code", None) in FENCE_CODES and not a.operator_cancelled:
            a.lost = err
            a.cancel(err)


def handler_transaction(attempt: Attempt) -> _HandlerTxScope:
    return _HandlerTxScope(attempt)
