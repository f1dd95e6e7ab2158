"""What a handler gets beside its payload: :class:`JobContext`."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .. import worker_log
from ..errors import OperationWithdrawn
from ..records import Dependency, Job, Lease
from .lifecycle import DETACHED

if TYPE_CHECKING:
    from ..durable import Park
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

    @property
    def parents(self) -> list[Dependency]:
        """This job's parents (``enqueue(depends_on=...)``) in the order it listed them, each with
        the parent's record: its state, result and last error (docs/composition.md). Read from
        the store at each access; [] for a job without dependencies."""
        return self._attempt.worker.store.jobs.dependencies(self._attempt.job.id)

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

    # -- durable steps (tenure.durable): park without holding the slot or the lease ----------
    def _steps(self) -> Any:
        attempt = self._attempt
        if attempt.steps is None:
            from ..durable import Steps

            attempt.steps = Steps(attempt.worker.store, lambda: attempt.lease)
        return attempt.steps

    def sleep(self, seconds: Any) -> None:
        """Durable sleep (:mod:`tenure.durable`): park the job for ``seconds``; the handler runs
        again from the start after it, and this step then returns at once."""
        self._steps().sleep(seconds)

    def sleep_until(self, when: Any) -> None:
        """Durable sleep until ``when`` (epoch ms or a datetime): :meth:`sleep`'s twin."""
        self._steps().sleep_until(when)

    def wait_for_signal(self, key: str, timeout: Any = None) -> Any:
        """The payload of the next signal of ``key`` (``store.signals.send``), parking the job until
        one is sent; raises :class:`tenure.errors.SignalTimeout` after ``timeout`` seconds."""
        return self._steps().wait_for_signal(key, timeout)

    def map(self, kind: str, payloads: Any, **options: Any) -> list[Any]:
        """Child jobs of ``kind``, one per payload; their results in order once all are done
        (parking until then). :class:`tenure.errors.ChildFailed` when one ends dead/cancelled."""
        return self._steps().map(kind, payloads, **options)

    def call(self, kind: str, payload: Any = None, **options: Any) -> Any:
        """One child job (e.g. a flow's run) and its result: :meth:`map` of one payload."""
        return self._steps().call(kind, payload, **options)

    def transaction(self):
        """The handler transaction (exactly-once effects on the store's own database): the
        block's writes and the job's fenced completion commit together, or not at all. After a
        durable step parked (its park swallowed), raises that park again; after a root call was
        refused inside an earlier block (TN2071, the refusal caught), raises that refusal again:
        nothing completes."""
        from ..open_tx import refused
        from .handler_tx import handler_transaction

        if self._attempt.steps is not None:
            self._attempt.steps.raise_pending()
        earlier = refused()
        if earlier is not None:
            raise earlier

        return handler_transaction(self._attempt)


def swallowed_park(attempt: Attempt, ok: bool, value: Any) -> Park | None:
    """The park a durable step of ``attempt`` raised (``ctx.sleep``, ``wait_for_signal``, ``map``,
    ``call``), which the attempt then settles as, whatever the handler did after it: returned
    (``ok``) or raised ``value``. None when no step parked. When the handler caught the park (an
    ``except`` around the step), logs a WARNING on ``tenure.jobs`` saying so: what the code
    did after the step ran on a step that had not finished, and is discarded (docs/workflows.md)."""
    steps = attempt.steps
    park: Park | None = None if steps is None else steps.pending
    if park is not None and (value is not park or steps.caught):
        from ..durable import what_then

        did = what_then(park, ok, value)
        worker_log.event(logging.WARNING, attempt.job, attempt.lease.attempt, "swallowed_park",
                         f"swallowed the park of a durable step (an except caught "
                         f"tenure.durable.Park, {park}) and then {did}; the job parks as the step "
                         "asked, and runs from the start when it wakes", attempt.worker.owner)
    return park


def swallowed_refusal(attempt: Attempt, ok: bool, value: Any) -> BaseException:
    """The error ``attempt`` fails with after a root call was refused inside one of its handler's
    own transactions (TN2071, ``attempt.refused``), whatever the handler did next: the refusal
    itself (or the one its block raised at its end) when the handler let it through; else the
    first refusal, with a WARNING on ``tenure.jobs`` saying the handler caught it and then
    returned (``ok``) or raised ``value`` (docs/guarantees.md)."""
    from ..durable import what_then
    from ..errors import NestedRootCall

    err = attempt.refused
    assert err is not None  # called only then
    if isinstance(value, NestedRootCall):
        return value
    worker_log.event(logging.WARNING, attempt.job, attempt.lease.attempt, "swallowed_refusal",
                     f"swallowed a root call refused inside its own transaction ({err}) and then "
                     f"{what_then(err, ok, value)}; the attempt fails with that refusal",
                     attempt.worker.owner)
    return err
