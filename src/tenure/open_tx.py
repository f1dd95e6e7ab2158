"""Which store transaction is open: per asyncio task, not merely per thread.

A store refuses a root call made inside the caller's own open transaction (``NestedRootCall``,
TN2071, D7): on SQLite it would wait for the gate its own caller holds, on
PostgreSQL it would escape the transaction. "The caller" used to mean the thread. But every async
handler of a worker runs on the worker's ONE event-loop thread, so an async handler that awaited
inside ``async with ctx.transaction()`` made every sibling handler on that loop look like it was
inside that transaction: their store calls and their own blocks were refused with TN2071.

:class:`OpenTransactions` keeps the open transaction in a :class:`contextvars.ContextVar`, which
is per thread AND per asyncio task (each task runs in its own copy of the context), so a sibling
task sees no open transaction of its own. It also counts, per thread, the transactions open on
that thread by any task, because on SQLite one open transaction holds the store's single
connection (the gate) for its thread: a sibling task on the same loop cannot wait for it without
freezing the loop that the holder needs to finish. Such a sibling's root call is refused at once
(TN2071, saying why) rather than deadlocking; its own ``async with ctx.transaction()`` waits its
turn without blocking the loop (:mod:`tenure.worker.handler_tx`). On PostgreSQL each transaction has its
own connection, and siblings are not affected at all.

Tests: ``tests/worker/test_handler_tx_liveness.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .errors import NestedRootCall

#: (owner, transaction) pairs open in the current context (thread, or asyncio task).
_OPEN: ContextVar[tuple[tuple[Any, Any], ...]] = ContextVar("tenure_open_transactions", default=())


class OpenTransactions:
    """One store's open transactions: ``tx`` is the one open in the calling task (or thread),
    ``on_thread()`` how many are open on the calling thread by any task."""

    __slots__ = ("_threads",)

    def __init__(self) -> None:
        self._threads = threading.local()

    @property
    def tx(self) -> Any:
        """The transaction open in the calling task (outside a task: the calling thread), or None."""
        for owner, tx in _OPEN.get():
            if owner is self:
                return tx
        return None

    @tx.setter
    def tx(self, value: Any) -> None:
        entries = _OPEN.get()
        had = any(owner is self for owner, _ in entries)
        rest = tuple(e for e in entries if e[0] is not self)
        _OPEN.set(rest if value is None else (*rest, (self, value)))
        delta = (value is not None) - had
        if delta:
            self._threads.count = getattr(self._threads, "count", 0) + delta

    def on_thread(self) -> int:
        """Transactions of this store open on the calling thread, by any task."""
        return getattr(self._threads, "count", 0)

    def held_by_sibling(self) -> bool:
        """True when another task on the calling thread holds one of this store's transactions."""
        return self.on_thread() > (1 if self.tx is not None else 0)


# -- a root call refused inside the caller's own transaction (TN2071) ----------------------------------
class Refusals:
    """Where the first root call refused (TN2071) inside its caller's own transaction is kept
    while a flow task or an inline task runs (a worker's attempt keeps it itself, in the same
    ``refused`` attribute)."""

    __slots__ = ("refused",)

    def __init__(self) -> None:
        self.refused: BaseException | None = None


#: What notes the root calls refused in this context: the running attempt
#: (:class:`tenure.worker.attempt.Attempt`), flow task or inline task (:class:`Refusals`), any
#: object with a ``refused`` attribute; None when nothing runs here. Tasks a handler starts copy
#: the context, so they note into their handler's.
REFUSAL_SINK: ContextVar[Any] = ContextVar("tenure_refused_root_calls", default=None)


@contextmanager
def refusals() -> Iterator[Refusals]:
    """Note, for the code run in the block (this thread, or this asyncio task and the tasks it
    starts), the first root call refused inside its own open transaction. The caller fails that
    code with it whatever the code did next: an ``except`` that swallowed the refusal cannot let
    the node or the task finish as if the refused call had run (docs/guarantees.md)."""
    sink = Refusals()
    token = REFUSAL_SINK.set(sink)
    try:
        yield sink
    finally:
        REFUSAL_SINK.reset(token)


def refused() -> BaseException | None:
    """The root call refused so far in the code running in this context (None: none, or nothing
    notes refusals here)."""
    sink = REFUSAL_SINK.get()
    return None if sink is None else sink.refused


def refuse_nested(tx: Any, message: str) -> NestedRootCall:
    """The refusal (TN2071) of a root call made inside ``tx``, the caller's own open transaction,
    to raise. ``tx`` remembers it and will not commit
    (:meth:`tenure.transaction.Transaction._commit_refusal`), and the attempt or task running here,
    if any, fails with it (:data:`REFUSAL_SINK`): a caught refusal cannot let the block commit, or
    the job finish, without the call it refused."""
    err = NestedRootCall(message)
    if getattr(tx, "_refused", None) is None:
        tx._refused = err
    sink = REFUSAL_SINK.get()
    if sink is not None and sink.refused is None:
        sink.refused = err
    return err


def open_here() -> Any:
    """The transaction of any store open in the calling task (or thread), or None."""
    entries = _OPEN.get()
    return entries[-1][1] if entries else None
