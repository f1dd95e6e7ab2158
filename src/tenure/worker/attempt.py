"""One attempt in a worker: its lease, its cancellation (:class:`CancelEvent`), its lifecycle
(:mod:`tenure.worker.lifecycle`) and why it ends."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import LeaseNotHeld, TenureError
from ..job_control import CANCEL_REQUESTED
from ..records import Claim, Job, Lease
from .context import JobContext
from .lifecycle import DETACHED, RUNNING

if TYPE_CHECKING:
    from .core import Worker

log = logging.getLogger("tenure.worker")

class ShutdownReason:
    """The ``ctx.cancelled.reason`` when the worker is stopping (not a fence refusal)."""

    code = "shutdown"

    def __repr__(self) -> str:
        return "<tenure worker shutting down>"

    __str__ = __repr__


class TimeoutReason:
    """The ``ctx.cancelled.reason`` when the job ran past its timeout."""

    code = "timeout"

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms

    def __repr__(self) -> str:
        return f"<job timed out after {self.timeout_ms} ms>"

    __str__ = __repr__


SHUTDOWN = ShutdownReason()


#: Guards the lazy creation of the one-shot events below (rare: only a waiter creates one).
_LAZY = threading.Lock()
#: The attempt a slot thread is running (``.attempt``), so a cancel from inside it does not wait.
_RUNNING = threading.local()


class _Flag:
    """A one-shot event whose ``threading.Event`` is made only if somebody waits for it.

    Almost no attempt is ever waited for or cancelled, and building an Event (a Condition, a
    lock, a deque) per attempt was ~8% of a worker's GIL time (docs/performance.md, proposal 2).
    ``is_set()`` reads a bool; ``set()`` and the first ``wait()`` meet under :data:`_LAZY`, so a
    waiter can never miss a ``set()``."""

    __slots__ = ("_set", "_event")

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> bool:
        """Set it; False if it was already set."""
        with _LAZY:
            if self._set:
                return False
            self._set = True
            event = self._event
        if event is not None:
            event.set()
        return True

    def wait(self, timeout: float | None = None) -> bool:
        if self._set:
            return True
        with _LAZY:
            event = self._event
            if event is None:
                event = self._event = threading.Event()
                if self._set:
                    event.set()
        return event.wait(timeout)


class CancelEvent:
    """The attempt's cancellation: ``is_set()``, ``wait(timeout)``, and ``reason`` — a fence
    refusal (``.code`` TN2065/2066/2067), :data:`SHUTDOWN`, or a :class:`TimeoutReason`; ``at``
    is when it was set (``time.monotonic()``; None while clear), which tells a zombie slot
    (:mod:`tenure.worker_health`)."""

    __slots__ = ("_flag", "reason", "_callbacks", "at")

    def __init__(self) -> None:
        self._flag = _Flag()
        self.reason: Any = None
        self._callbacks: list[Callable[[], None]] | None = None
        self.at: float | None = None

    def is_set(self) -> bool:
        return self._flag._set

    def wait(self, timeout: float | None = None) -> bool:
        return self._flag.wait(timeout)

    async def wait_async(self, poll: float = 0.05) -> None:
        """Await the cancellation from an async handler."""
        while not self._flag._set:
            await asyncio.sleep(poll)

    def _on_set(self, cb: Callable[[], None]) -> None:
        if self._callbacks is None:
            self._callbacks = []
        self._callbacks.append(cb)

    def _set(self, reason: Any) -> bool:
        flag = self._flag
        with _LAZY:  # the first reason wins, and a waiter never misses it
            if flag._set:
                return False
            self.reason = reason
            self.at = time.monotonic()
            flag._set = True
            event = flag._event
        if event is not None:
            event.set()
        for cb in self._callbacks or ():
            try:
                cb()
            except Exception:
                log.exception("cancellation callback failed")
        return True

    def __bool__(self) -> bool:
        return self._flag._set


class Attempt:
    """One claimed attempt in this worker: its current lease and how it ends."""

    __slots__ = ("worker", "job", "lease", "token", "handler", "cancelled", "started", "last_renew",
                 "deadline", "state", "lost", "operator_cancelled", "timed_out", "finished",
                 "task", "loop", "settle_lock", "renew_failing", "timeout_ms", "credited", "progress",
                 "steps", "refused", "__weakref__")

    def __init__(self, worker: Worker, claim: Claim, handler: Callable[..., Any], timeout_ms: int | None):
        self.worker = worker
        self.job: Job = claim.job
        self.lease: Lease = claim.lease
        self.token = claim.lease.token  # the key; stays the first token even across renewals
        self.handler = handler
        self.cancelled = CancelEvent()
        now = time.monotonic()
        self.started = now
        self.last_renew = now
        self.timeout_ms = timeout_ms
        self.deadline = None if not timeout_ms else now + timeout_ms / 1000
        #: The lifecycle (module docstring); moves to and from SETTLING under ``settle_lock``.
        self.state = RUNNING
        # Why it ends (beside the state): the fence's refusal, an operator's cancel, its timeout.
        self.lost: TenureError | None = None
        self.operator_cancelled = False
        self.timed_out = False
        #: Set once its slot is free again (after it settled, or it cannot settle).
        self.finished = _Flag()
        self.task: asyncio.Future | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.settle_lock = threading.Lock()
        self.renew_failing = False  # the keeper said so once already (logged once per run of failures)
        # Its slot funds a claim made in the same transaction as its settlement (see _reserve).
        self.credited = False
        self.progress: Any = None  # a tenure.progress.Throttle once the handler reports progress
        self.steps: Any = None  # a tenure.durable.Steps once the handler sleeps, waits or starts children
        #: A root call refused inside the handler's own transaction (TN2071): the attempt fails with it.
        self.refused: BaseException | None = None

    @property
    def detached(self) -> bool:
        """``stop()`` or ``abandon()`` gave up on it (a late return writes nothing)."""
        return self.state is DETACHED

    @property
    def ctx(self) -> JobContext:
        """A fresh context for this attempt. Not stored on the attempt: an attempt <-> context
        reference cycle made every finished attempt cyclic garbage, and the collector was a quarter
        of a worker's GIL time (docs/performance.md, proposal 1)."""
        return JobContext(self)

    def cancel(self, reason: Any) -> None:
        """Set the cancellation (the first reason wins). For a reason that stops the handler
        (:func:`cancels_task`), an async attempt's running task is also cancelled; one whose task has
        not started yet is cancelled as it starts (``Executor._run_async``)."""
        if self.cancelled._set(reason):
            task, loop = self.task, self.loop
            if task is not None and loop is not None and cancels_task(reason):
                loop.call_soon_threadsafe(task.cancel)

    def cancel_by_operator(self) -> bool:
        """``jobs.cancel`` reached this attempt: the row is already cancelled; wind up. Waits at
        most the worker's ``stop_grace`` and answers whether the attempt wound up (spec D5). Called
        from the attempt's own handler, or from the event loop its async handler runs on, it does
        not wait at all: the attempt cannot wind up while this call blocks it."""
        self.operator_cancelled = True
        self.cancel(LeaseNotHeld(f"job {self.job.id!r} was cancelled by an operator", job_id=self.job.id))
        if getattr(_RUNNING, "attempt", None) is self or (self.loop is not None and _loop_here() is self.loop):
            return self.finished.is_set()
        return self.finished.wait(self.worker.stop_grace)


def cancels_task(reason: Any) -> bool:
    """Whether a cancellation for ``reason`` is delivered to an async handler as ``task.cancel()``
    (an ``asyncio.CancelledError`` at its next await) rather than only through ``ctx.cancelled``:
    the worker shutting down, and an operator's cancel request (``jobs.request_cancel``). The same
    rule whether it arrives while the task runs or before the task started."""
    return reason is SHUTDOWN or reason is CANCEL_REQUESTED


def _loop_here() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
