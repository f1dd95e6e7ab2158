"""The completer: settles finished attempts in batches (group commit), each item still fenced.

A settler thread takes everything that finished meanwhile and settles it in one transaction;
while the queue has a backlog it also claims the slots it frees in that same transaction
(settle-and-claim, through the producer's slot accounting). On PostgreSQL two to four settlers
(:func:`settler_count`) each gather their share of the slots, so one share's round trip overlaps
the others' handlers."""

from __future__ import annotations

import logging
import queue as _queue
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from .. import _validate as v
from .. import worker_log
from ..errors import (
    FENCE_CODES,
    OperationWithdrawn,
    StorageError,
    StoreBusy,
    StoreUnavailable,
    TenureError,
    UnstorableValue,
)
from ..handler_control import Snooze
from ..records import Claim
from .attempt import Attempt
from .lifecycle import DETACHED, SETTLED
from .producer import Producer

log = logging.getLogger("tenure.worker")

MAX_SETTLE_BATCH = 500
#: Settler threads on an engine with concurrent writers (PostgreSQL), at least; one on SQLite.
SETTLERS_MVCC = 2
#: Slots per settler on such an engine, and the most settlers: one settler per 128 slots, so that
#: at 512 slots four round trips of ~128 settlements and claims overlap instead of two of ~256.
#: Alternating in-process drains of 20 000 jobs at load 3-7: 512 slots with four settlers beat
#: 256 with two in 13 pairs of 15 (medians 12.2k against 7.9k jobs/s in one set of six pairs),
#: and 512 with two in 3 of 6; 6-9% more CPU per job (docs/performance.md, "Four settlers").
SETTLE_SLOTS = 128
SETTLERS_MAX = 4
#: How long a settler waits for still-running handlers to join a batch below its target share.
SETTLE_GATHER_S = 0.001
#: A settler's share of the slots (concurrency / settlers) from which its batch stops at that
#: share, leaving the rest to the next settler, whose round trip then overlaps this one's: at 256
#: slots a settler otherwise took nearly every finished attempt (~250 a batch) while the other sat
#: idle (bench.peers rounds alternating with and without the cap: 12.4-14.0k against 9.1-11.2k
#: jobs/s, docs/performance.md). Below it a batch takes everything finished: at 64 slots, batches
#: capped at 32 cost ~35% more CPU per job for no more jobs/s.
SETTLE_SHARE_MIN = 100
#: Backoff bounds when a settlement fails for a storage reason (retried while the lease lasts).
SETTLE_RETRY_MIN = 0.02
SETTLE_RETRY_MAX = 1.0


def gather(done: _queue.SimpleQueue, first: Any, cap: int, target: int,
           running_besides: Callable[[int], bool]) -> tuple[list, bool]:
    """A settler's batch, from ``first`` (None: stop) and what else finished: up to ``cap``
    items, waiting :data:`SETTLE_GATHER_S` at a time for more while the batch is below ``target``
    and ``running_besides(len(batch))`` says other handlers are about to finish. Answers
    ``(batch, stopping)``; ``stopping`` when it took a None (one per settler: the others keep
    theirs). Every wait is bounded, whatever the other settlers do.

    The wait is a sleep, then a non-blocking take, never a timed ``done.get``: on CPython before
    3.13 a ``SimpleQueue.get(timeout=...)`` woken by a put whose item another settler took first
    finds its timeout spent, and its next wait has none: it lasts until the NEXT put. At the end
    of a drain there is none, and the batch it held (92 of 1 500 jobs in a 256-slot drain on
    PostgreSQL) stayed unsettled for good: slots idle, the dispatcher finding nothing to claim,
    the jobs leased until their leases expired."""
    batch = [] if first is None else [first]
    if first is None:
        return batch, True
    get_nowait = done.get_nowait
    while len(batch) < cap:
        try:
            item = get_nowait()
        except _queue.Empty:
            if len(batch) >= target or not running_besides(len(batch)):
                break
            time.sleep(SETTLE_GATHER_S)  # other handlers are about to finish: let them join
            try:
                item = get_nowait()
            except _queue.Empty:
                break
        if item is None:
            return batch, True
        batch.append(item)
    return batch, False


def settler_count(concurrency: int, exclusive_gate: bool) -> int:
    """How many settler threads a worker of ``concurrency`` slots runs: one where the store has
    one writer (SQLite: a second would only queue at the gate) or there is one slot; else one per
    :data:`SETTLE_SLOTS` slots, from :data:`SETTLERS_MVCC` to :data:`SETTLERS_MAX` (each gathers
    its share of the slots, so one share's round trip overlaps the others' handlers)."""
    if exclusive_gate or concurrency == 1:
        return 1
    return min(SETTLERS_MAX, max(SETTLERS_MVCC, concurrency // SETTLE_SLOTS))


class Completer(Producer):
    """Settles finished attempts (see the module docstring)."""

    def _complete_loop(self, done: _queue.SimpleQueue) -> None:
        with self.store.engine.deadline(self.call_timeout, self):
            self._settle_loop(done)

    def _settle_loop(self, done: _queue.SimpleQueue) -> None:
        get = done.get
        jobs = self.store._jobs
        share = self._settle_target
        cap = share if share >= SETTLE_SHARE_MIN else MAX_SETTLE_BATCH
        # Where slot threads may settle their own attempt (_to_settle), the settler takes the
        # same token for each batch: one settlement at a time, as with one settler alone.
        token = self._settle_token if self._inline_settle else nullcontext()
        while True:
            first = get()
            with token:
                batch, stopping = gather(done, first, cap, self._settle_target, self._running_besides)
                if batch:
                    try:
                        self._settle(jobs, batch)
                    except Exception:  # the settler never dies; the leases expire
                        log.exception("settling %d job(s) failed", len(batch))
                    self.events.mark("settle_batches")
            if stopping:
                return

    def _to_settle(self, item: tuple[Attempt, bool, Any]) -> None:
        """Hand a finished attempt to be settled. Where the store has one in-process writer
        (SQLite: one settler) and this sync attempt is the only one in flight, the slot thread
        settles it itself (with anything else already queued), holding the settle token the
        settler holds for each of its batches: waking the settler thread for it was a thread
        switch and a cold thread per job at a light pace, and with no other attempt running there
        is nothing it could have batched with. Otherwise (the settler is busy, other attempts
        run and will batch, an ``on_outcome`` observer, which may stop its own worker from the
        settling thread, or an async attempt, whose loop must not block) it goes to the settler.
        stop() takes the token after the settlers end, so no settlement runs once it returns."""
        attempt = item[0]
        if (not self._inline_settle or self.on_outcome is not None or attempt.loop is not None or self._halt.is_set()
                or len(self._attempts) - self._credit > 1 or not self._settle_token.acquire(blocking=False)):
            self._done.put(item)
            return
        try:
            batch, stopping = gather(self._done, item, MAX_SETTLE_BATCH, 0, self._running_besides)
            try:
                with self.store.engine.deadline(self.call_timeout, self):
                    self._settle(self.store._jobs, batch)
            except Exception:  # as on the settler: the leases expire
                log.exception("settling %d job(s) failed", len(batch))
            self.events.mark("inline_settles")
            self.events.mark("settle_batches")  # a batch settled all the same (hosts wait on it)
            if stopping:
                self._done.put(None)  # stop()'s marker, for the settler thread
        finally:
            self._settle_token.release()

    def _running_besides(self, settling: int) -> bool:
        """Attempts still running (beyond ``settling`` finished ones and those being settled)."""
        return len(self._attempts) - self._credit - settling > 0

    def _settle(self, jobs, batch) -> None:  # noqa: C901 - the settlement batch, kept in one place
        completes, fails = [], []
        for attempt, ok, value in batch:
            if attempt.state is DETACHED:
                continue  # stop() gave up on it: nothing is written
            if attempt.lost is not None or attempt.operator_cancelled:
                self._end_unsettled(attempt)
            elif ok:
                completes.append((attempt, value))
            else:
                fails.append((attempt, value))
        if completes:
            items = [(a.lease, val) for a, val in completes]
            with self._refill_section() as allowed, self._claim_section():
                errors, claims, want = self._complete_and_refill(jobs, items, [a for a, _ in completes]) \
                    if allowed else (None, [], 0)
                if errors is not None:
                    self._completed(completes, errors)
                    self._start_attempts(claims, want, jobs.limit_held)  # after the release: in flight stays <= N
            if errors is None:  # settled alone (no lock held: this may retry while leases last)
                try:
                    errors = self._retrying(lambda: jobs.complete_many(
                        items, encoded=True, cancel=self._halt, backoff_base_ms=self.backoff_base_ms,
                        backoff_cap_ms=self.backoff_cap_ms),
                                            [a for a, _ in completes])
                except Exception as exc:  # noqa: BLE001 - storage trouble: the lease will expire
                    self._count("settle_errors", len(completes))
                    log.error("completing %d job(s) failed: %s", len(completes), exc)
                    errors = [exc] * len(completes)
                self._completed(completes, errors)
        if fails and any(isinstance(err, Snooze) for _, err in fails):
            for attempt, err in fails:
                if isinstance(err, Snooze):
                    self._snooze(jobs, attempt, err)
            fails = [(a, err) for a, err in fails if not isinstance(err, Snooze)]
        if fails:
            items = [(a.lease, err) for a, err in fails]
            now = time.monotonic()
            details = [{"duration_ms": int((now - a.started) * 1000)} for a, _ in fails]
            try:
                results = self._retrying(
                    lambda: jobs.fail_many(items, cancel=self._halt, backoff_base_ms=self.backoff_base_ms,
                                           backoff_cap_ms=self.backoff_cap_ms, details=details),
                    [a for a, _ in fails])
            except Exception as exc:  # noqa: BLE001
                self._count("settle_errors", len(fails))
                log.error("failing %d job(s) failed: %s", len(fails), exc)
                results = [exc] * len(fails)
            for (attempt, error), res in zip(fails, results, strict=True):
                code = getattr(error, "code", None)
                refused = res if isinstance(res, BaseException) else None
                if refused is None:
                    worker_log.failed(attempt.job, attempt.lease.attempt, error, res, self.owner)
                self._after_settle(attempt, "failed", refused, reason=v.error_message(error),
                                   code=code if isinstance(code, str) else None,
                                   error=error if isinstance(error, BaseException) else None)
        self._check_exhausted()

    def _snooze(self, jobs, attempt: Attempt, snooze: Snooze) -> None:
        """Settle one attempt whose handler raised :class:`tenure.Snooze` (fenced)."""
        try:
            job = self._retrying(lambda: snooze.settle(jobs, attempt.lease), [attempt])
        except TenureError as exc:
            if exc.code not in FENCE_CODES:
                self._count("settle_errors")
                log.error("snoozing job %s failed: %s", attempt.job.id, exc)
            self._after_settle(attempt, "snoozed", exc)
            return
        except Exception as exc:  # noqa: BLE001
            self._count("settle_errors")
            log.error("snoozing job %s failed: %s", attempt.job.id, exc)
            self._after_settle(attempt, "snoozed", exc)
            return
        worker_log.event(logging.INFO, attempt.job, attempt.lease.attempt, "snoozed",
                         f"snoozed until {job.run_at} (epoch ms)", self.owner)
        self._after_settle(attempt, "snoozed", None, reason=str(snooze))

    def _completed(self, completes: list[tuple[Attempt, Any]], errors: list) -> None:
        if self.on_outcome is None and not any(errors):
            self._completed_all([a for a, _ in completes])
        else:
            for (attempt, _), err in zip(completes, errors, strict=True):
                if isinstance(err, UnstorableValue):  # the store refused the result: the attempt
                    # was FAILED with this reason instead (Jobs.complete_many), not lost
                    self._after_settle(attempt, "failed", None, reason=str(err), code=err.code)
                else:
                    self._after_settle(attempt, "completed", err)

    def _completed_all(self, attempts: list[Attempt]) -> None:
        """A batch whose completions all landed, with no observer to tell: count it and free its
        slots in one lock round and one wake-up."""
        for a in attempts:
            a.state = SETTLED
        self._count("completions", len(attempts))
        self._release(*attempts)

    def _complete_and_refill(self, jobs, items, settling: list[Attempt]) -> tuple[list | None, list[Claim], int]:
        """Settle a batch of completions and claim the slots it frees in ONE transaction, while
        the queue has a backlog (the last claim came back full) and the worker is not stopping:
        one commit and one trip to the store per cycle instead of two, and no wait for the
        dispatcher to wake. Answers ``(errors, claims, reserved)``; ``errors`` is None when
        nothing was settled here (no backlog, or the combined call failed and rolled back), and
        the caller then settles the batch alone, retrying as usual."""
        if not self._backlog or self._stop.is_set():
            return None, [], 0
        want = self._reserve(settling)
        if not want:
            return None, [], 0
        try:
            with self.store.engine.deadline(self.call_timeout, self._claim_group):
                errors, claims = jobs.complete_and_claim(items, self.kinds, owner=self.owner, limit=want,
                                                         lease_ms=self.lease_ms, queues=self.queues,
                                                         cancel=self._stop, instance=self.instance)
        except Exception as exc:  # noqa: BLE001 - rolled back: settle alone, claim later
            self._uncredit(settling)
            self._start_attempts([], want)
            self._claim_failed(exc)
            if not isinstance(exc, OperationWithdrawn):
                self._count("claim_errors")
                log.warning("settle-and-claim failed, settling alone: %s", exc)
            return None, [], 0
        return errors, claims, want

    def _retrying(self, call: Callable[[], Any], attempts: list[Attempt]) -> Any:
        """Run a settling call; a storage failure is retried with backoff until ``stop()`` halts.
        A busy or unreachable store (TN0003, TN0005) is retried until it answers, however long
        that takes, so that the fence decides: a lease that expired meanwhile is then recorded as
        lost with TN2067, never with the storage code (docs/spec.md 6.13). Any other storage
        failure is retried while every lease in the batch still stands by this process's
        reckoning. Settling twice from one attempt is idempotent, so a retry is always safe."""
        delay = SETTLE_RETRY_MIN
        warned = False
        while True:
            try:
                return call()
            except StorageError as exc:
                if self._halt.is_set():
                    raise
                if not isinstance(exc, StoreBusy | StoreUnavailable):
                    expiry = min(a.last_renew for a in attempts) + self.lease_ms / 1000
                    if time.monotonic() + delay >= expiry:
                        raise
                if not warned:
                    log.warning("settling %d job(s) failed, retrying while their leases last (a busy or "
                                "unreachable store: until it answers, and the fence decides): %s",
                                len(attempts), exc)
                    warned = True
                if self._halt.wait(delay):
                    raise
                delay = min(delay * 2, SETTLE_RETRY_MAX)

    def _after_settle(self, attempt: Attempt, outcome: str, err: BaseException | None,
                      reason: str | None = None, code: str | None = None,
                      error: BaseException | None = None) -> None:
        """Count and report one settled attempt. ``err`` is the settling call's refusal (or
        storage error); ``code`` is the handler's own coded error, reported with a failure
        (a refused workflow resume fails with TN2069, D6); ``error`` is the
        exception the handler raised (given to ``on_outcome`` as ``exception``)."""
        attempt.state = SETTLED
        if err is None:
            self._count({"completed": "completions", "snoozed": "snoozes"}.get(outcome, "failures"))
            if outcome == "failed" and attempt.timed_out:
                self._count("timeouts")
            self._outcome(attempt, outcome, code=code, reason=reason, error=error)
        elif (fence_code := getattr(err, "code", None)) in FENCE_CODES:
            if attempt.operator_cancelled:
                self._count("cancellations")
                self._outcome(attempt, "cancelled", code=fence_code, reason=str(err))
            else:
                self._count("lost_settlements")
                self._outcome(attempt, "lost", code=fence_code, reason=str(err))
        else:
            # Storage failure at settlement: nothing landed; the lease expires and the job is
            # reclaimed (at-least-once). Reported as lost, with the storage code.
            self._count("lost_settlements")
            self._outcome(attempt, "lost", code=getattr(err, "code", None), reason=str(err))
        self._release(attempt)

    def _end_unsettled(self, attempt: Attempt) -> None:
        attempt.state = SETTLED
        if attempt.operator_cancelled:
            self._count("cancellations")
            reason = attempt.cancelled.reason
            self._outcome(attempt, "cancelled", code=getattr(reason, "code", None), reason=str(reason))
        else:
            lost = attempt.lost
            assert lost is not None  # _settle ends an attempt unsettled only when lost or cancelled
            self._count("lost_settlements")
            self._outcome(attempt, "lost", code=lost.code, reason=str(lost))
        self._release(attempt)

    def _handler_tx_completed(self, a: Attempt) -> None:
        """The handler transaction committed the completion: count it once."""
        a.state = SETTLED
        self._count("completions")
        self._outcome(a, "completed")
        self._check_exhausted()
