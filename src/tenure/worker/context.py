"""What a handler gets beside its payload: :class:`JobContext`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import OperationWithdrawn
from ..records import Job, Lease
from .lifecycle import DETACHED

if TYPE_CHECKING:
    from ..store import Store
    from .attempt import Attempt, CancelEvent


class JobContext:
    """What a handler gets beside its payload."""

    __slots__ = ("_attempt",)

    def __init__(self, attempt: Attempt) -> None:
        self._attempt = attempt

    @property
    def job(self) -> Job:
        return self._attempt.job

    @property
    def lease(self) -> Lease:
        """The attempt's CURRENT lease (it changes at every renewal)."""
        return self._attempt.lease

    @property
    def cancelled(self) -> CancelEvent:
        return self._attempt.cancelled

    @property
    def attempt(self) -> int:
        return self._attempt.lease.attempt

    @property
    def idempotency_key(self) -> str:
        """Stable across every attempt of this job (the job id): thread it into external effects."""
        return self._attempt.job.id

    @property
    def checkpoints(self):
        """The fenced checkpoint store bound to this attempt; follows its current lease."""
        attempt = self._attempt

        def current() -> Lease:
            if attempt.state is DETACHED:
                raise OperationWithdrawn(f"job {attempt.job.id!r}: the worker stopped and detached this "
                                         "attempt; it can no longer write")
            return attempt.lease

        return attempt.worker.store.jobs.checkpoints(current)

    @property
    def store(self) -> Store:
        return self._attempt.worker.store

    def progress(self, fraction: float, note: str | None = None) -> bool:
        """Report how far the job is: ``fraction`` in [0, 1], an optional ``note`` (at most 200
        characters), stored on the job as ``Job.progress``. Throttled to one write per second
        per attempt (True when written now); the last report is always written before the
        attempt settles. Fenced: a stale attempt's write is refused (:mod:`tenure.progress`)."""
        attempt = self._attempt
        if attempt.progress is None:
            from ..progress import Throttle

            attempt.progress = Throttle(attempt.worker.store, lambda: attempt.lease)
        return attempt.progress.report(fraction, note)

    def transaction(self):
        """The handler transaction (exactly-once effects on the store's own database): the
        block's writes and the job's fenced completion commit together, or not at all."""
        from .handler_tx import handler_transaction

        return handler_transaction(self._attempt)
