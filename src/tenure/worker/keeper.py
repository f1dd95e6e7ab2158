"""The keeper: renews each running attempt's lease at a third of ``lease_ms`` and enforces
per-job timeouts (spec 6.10-6.14)."""

from __future__ import annotations

import logging
import time

from .. import worker_log
from ..errors import (
    FENCE_CODES,
    LeaseExpired,
    OperationWithdrawn,
    TenureError,
)
from .attempt import Attempt, TimeoutReason
from .lifecycle import RUNNING, SETTLED, SETTLING
from .state import WorkerState

log = logging.getLogger("tenure.worker")

class Keeper(WorkerState):
    """Renewals and timeouts (see the module docstring)."""

    def _keeper(self, gen: int) -> None:
        with self.store.engine.deadline(self.call_timeout, self):
            self._keep(gen)

    def _keep(self, gen: int) -> None:
        every = self.lease_ms / 3000
        tick = max(0.005, min(every / 4, 0.25))
        jobs = self.store._jobs
        halt = self._halt
        while not halt.wait(tick):
            now = time.monotonic()
            with self._lock:
                attempts = [a for a in self._attempts.values() if a.state is RUNNING and a.lost is None]
            for a in attempts:
                if halt.is_set():
                    return
                if a.deadline is not None and not a.timed_out and now >= a.deadline:
                    self._time_out(a)
                    continue
                if not self.renew and not a.cancelled.is_set():
                    self._tell_if_expired(a, now)
                if self.renew and now - a.last_renew >= every and a.settle_lock.acquire(blocking=False):
                    try:
                        if a.state is RUNNING and a.lost is None:
                            self._renew(jobs, a)
                    finally:
                        a.settle_lock.release()
            self.events.mark("keeper_ticks")

    def _tell_if_expired(self, a: Attempt, now: float) -> None:
        """Renewal off: once the attempt's lease has expired, set its event with LeaseExpired as
        the reason (docs/spec.md 6.14), so the handler can stop: it can no longer settle. The
        lease ends at ``expires_at`` on the store's injected clock; without one, ``lease_ms``
        after the claim on this process's monotonic clock (never earlier than the store's own
        expiry, since the claim began before it returned). The settlement, if the handler still
        returns, meets the fence and is recorded with the fence's code. An open handler
        transaction holds the lease (its row is locked, its completion judged at the open; see
        :mod:`tenure.worker.handler_tx`), so nothing is said while one is open."""
        if a.settle_lock.locked():
            return
        clock_ms = self.store._now()
        if clock_ms is not None:
            overrun = clock_ms - a.lease.expires_at
        else:
            overrun = int((now - a.last_renew) * 1000) - self.lease_ms
        if overrun < 0:
            return
        a.cancel(LeaseExpired(
            f"job {a.job.id!r}: the lease of generation {a.lease.generation} expired {overrun} ms ago "
            "and renewal is off (renew=False); this attempt can no longer settle",
            job_id=a.job.id, overrun_ms=overrun))

    def _renew(self, jobs, a: Attempt) -> None:
        try:
            new = jobs.renew(a.lease, self.lease_ms, cancel=self._halt)
        except OperationWithdrawn:
            return
        except TenureError as exc:
            if exc.code in FENCE_CODES:
                if a.operator_cancelled or a.state is SETTLED:
                    return
                a.lost = exc
                a.cancel(exc)  # the coded refusal is the reason (6.14)
                return
            self._renewal_failed(a, exc)  # storage trouble is NOT loss (6.12)
            return
        except Exception as exc:  # noqa: BLE001
            self._renewal_failed(a, exc)
            return
        a.lease = new
        a.last_renew = time.monotonic()
        a.renew_failing = False
        self._count("renewals")

    def _renewal_failed(self, a: Attempt, exc: BaseException) -> None:
        """The lease stands, the event stays clear, and the next tick tries again."""
        self._count("renewal_errors")
        if not a.renew_failing:
            log.warning("renewing job %s failed (lease kept, retrying): %s", a.job.id, exc)
            a.renew_failing = True

    def _time_out(self, a: Attempt) -> None:
        """Past its timeout the attempt's event is set (reason: :class:`TimeoutReason`) and the
        attempt fails at once with "job timed out"; a handler that keeps running keeps its slot
        until it returns, but its late result is ignored. With a handler transaction open, the
        transaction refuses to commit and the handler's return records the failure instead."""
        a.timed_out = True
        assert a.timeout_ms is not None  # only an attempt with a deadline times out
        a.cancel(TimeoutReason(a.timeout_ms))
        if a.task is not None and a.loop is not None:
            a.loop.call_soon_threadsafe(a.task.cancel)
        if not a.settle_lock.acquire(blocking=False):
            return
        try:
            if a.state is not RUNNING:
                return
            a.state = SETTLING
            if not self._timeout_settle(a):
                a.state = RUNNING  # storage trouble: the handler's return settles it
        finally:
            a.settle_lock.release()

    def _timeout_settle(self, a: Attempt) -> bool:
        try:
            res = self.store._jobs.fail_many([(a.lease, "job timed out")], cancel=self._halt,
                                             backoff_base_ms=self.backoff_base_ms,
                                             backoff_cap_ms=self.backoff_cap_ms,
                                             details=[{"duration_ms": int((time.monotonic() - a.started) * 1000)}])[0]
        except Exception as exc:  # noqa: BLE001
            log.warning("failing timed-out job %s failed: %s", a.job.id, exc)
            return False
        a.state = SETTLED
        if isinstance(res, TenureError):
            a.lost = res
            self._count("lost_settlements")
            self._outcome(a, "lost", code=res.code, reason=str(res))
        else:
            self._count("failures")
            self._count("timeouts")
            worker_log.failed(a.job, a.lease.attempt, "job timed out", res, self.owner)
            self._outcome(a, "failed", reason="job timed out")
        self._check_exhausted()
        return True
