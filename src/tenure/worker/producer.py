"""The producer: claims jobs in batches as slots free up, and starts their attempts.

One dispatcher thread claims (``claim_many`` up to the free slots), woken at once by an enqueue on
the same store, by the engine's cross-process watcher (SQLite ``data_version``, PostgreSQL
``LISTEN``), by a slot freeing up when there may be work for it (a backlog, a limit that held a
job back, a deferred wake-up: ``Worker._release``), or by ``poll_interval``. A claim whose answer
was lost (the connection broke under it) is given back on the next turn."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from ..engine.waiter import LeadingWatcher
from ..errors import (
    OperationWithdrawn,
    StoreClosed,
    StoreUnavailable,
    TenureError,
)
from ..records import Claim
from .attempt import SHUTDOWN, Attempt
from .executor import Executor

if TYPE_CHECKING:
    from .core import Worker

log = logging.getLogger("tenure.worker")

#: How long one wait on the cross-process watcher lasts. The watch thread owns its watcher and
#: closes it itself when the worker stops (closing a SQLite connection from another thread while it
#: runs a statement is not safe), so ``stop()`` waits at most this long for it.
WATCH_SLICE = 0.05
#: How often a worker that is not the waiter tries to become it: the bound on how long the jobs of
#: a waiter that died (or stepped down, its slots full) go unheard by the others (who also poll
#: at ``poll_interval``).
TAKEOVER_S = 0.2


def _claim_size(free: int) -> int:
    """How many to claim for ``free`` slots: the largest of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... not
    above it. Each claim size is its own statement text on PostgreSQL (its LIMIT is written into
    the text so that its prepared plan is reused); claiming any number from 1 to 100 would keep
    ~100 statements un-prepared and re-planned. The rest of the free slots are claimed at once by
    the next claim (the dispatcher claims again without waiting after a full batch)."""
    if free <= 4:
        return free
    size = 1 << (free.bit_length() - 1)
    return size + size // 2 if free >= size + size // 2 else size


class Producer(Executor):
    """Claims and starts attempts (see the module docstring); hands each to the executor."""

    def _on_local_enqueue(self) -> None:
        self._wake_if_free()

    # -- dispatcher ------------------------------------------------------------------------------
    def _watch(self, watcher, stop: threading.Event) -> None:
        """The watch thread: wakes the dispatcher when the watcher hears a change. Of the workers
        claiming the same kinds from the same queues, only the waiter (:meth:`LeadingWatcher.lead`)
        hears changes; the others claim on their poll, on their own backlog and on local
        enqueues, and try to become the waiter every :data:`TAKEOVER_S`. A waiter whose slots
        stay full for :data:`TAKEOVER_S` steps down, so that a worker with room hears the next
        jobs, and tries again as soon as a slot frees. A slot reserved for a claim in progress is
        not a full one: a claim slowed by a lock wait or a loaded server does not make the waiter
        step down (another worker would be woken only to race it for the jobs it is claiming)."""
        key = self._lead_key()
        leading, next_try, full_since = False, 0.0, None
        if isinstance(watcher, LeadingWatcher):
            engine = self.store.engine

            def lead(key: str) -> bool:
                # Its statements answer within the worker's call deadline, and stop() cuts them
                # (group: the worker): on a silent network they would hold this thread for good.
                with engine.deadline(self.call_timeout, self):
                    return watcher.lead(key)

            def follow() -> None:
                with engine.deadline(self.call_timeout, self):
                    watcher.follow()
        else:  # no waiter to elect: every watcher waits
            lead, follow = (lambda key: True), (lambda: None)
        try:
            while not stop.is_set():
                try:
                    now = time.monotonic()
                    room = self._has_room()
                    full = not room and not self._reserved  # no claim in progress (a hint, unlocked)
                    full_since = (full_since or now) if full else None
                    if leading and full_since is not None and now - full_since >= TAKEOVER_S:
                        follow()  # full for a while: let a worker with room hear the jobs
                        leading, next_try = False, 0.0  # and wait again as soon as a slot frees
                    elif room and (leading or now >= next_try):
                        was, leading = leading, lead(key)
                        self._lead_tries += 1
                        if leading and not was:
                            self._wake_if_free()  # claim what came while this worker was not waiting
                        elif not leading:
                            next_try = now + TAKEOVER_S
                    self._leading = leading
                    if watcher.wait(WATCH_SLICE) and not stop.is_set():
                        self._heard(getattr(watcher, "own_change", False))
                except Exception:  # the poll is the fallback
                    log.debug("the watch failed; polling", exc_info=True)
                    if leading:
                        try:
                            follow()  # never keep the others unwoken while this one cannot wait
                        except Exception:
                            log.debug("stepping down failed", exc_info=True)
                    leading = self._leading = False
                    if stop.wait(min(self.poll_interval or 0.5, 0.5)):
                        return
        finally:
            self._leading = False
            try:
                watcher.close()
            except Exception:
                log.debug("closing the watcher failed", exc_info=True)

    def _heard(self, own_change: bool = False) -> None:
        """The watcher heard a change. Where the store has one in-process writer (SQLite,
        ``Engine.exclusive_gate``) and the dispatcher has nothing else to do, the watch thread
        claims for the free slots itself (:meth:`_claim_here`) instead of waking the dispatcher to
        claim: at a light pace every job came through that hand-off, a thread switch and a cold
        thread per job (docs/performance.md, "2026-12-04 evening"). Elsewhere, or when the
        dispatcher is awake or already woken, or the change is (also) a loud commit of this
        worker's own store (``own_change``: its enqueue wakes the dispatcher through the store's
        hook right after poking this watcher; one claim for it, not two), or the dispatcher has
        work of its own (a lost claim to give back), it wakes the dispatcher."""
        if (not self._claims_on_watch or own_change or self._lost_claims or self._dispatching
                or self._wake.is_set() or not self._claim_here()):
            self._wake_if_free()

    def _claim_here(self) -> bool:
        """Claim for the free slots on the calling thread and start what it claimed, as the
        dispatcher's claim would; True when that was done (or nothing was free: then a wake-up is
        deferred until a slot frees, as :meth:`_wake_if_free` does), False when the caller must
        wake the dispatcher instead (stop() has begun). A claim in progress here is waited for by
        stop() like a settle-and-claim (:meth:`_refill_section`), so what it claims is either seen
        and stopped or never claimed. A full claim (there may be more) or one a rate limit cut
        short wakes the dispatcher, which claims again or waits for the limit's window."""
        jobs = self.store._jobs
        with self._refill_section() as allowed:
            if not allowed:
                return False
            want = self._reserve()
            if want <= 0:
                with self._lock:
                    self._free_or_defer()
                return True
            self.events.mark("watch_claims")
            try:
                with self.store.engine.deadline(self.call_timeout, self._claim_group):
                    claims = self._claim_and_start(jobs, want, sweep=True)
            except OperationWithdrawn:
                return True
            except Exception as exc:  # noqa: BLE001 - counted; the dispatcher's next turn retries
                self._claim_failed(exc)
                self._count("claim_errors")
                log.warning("claim failed: %s", exc)
                return False
            self._count("wakes")
            if len(claims) == want or jobs.rate_wake_at is not None:
                self._wake.set()
            return True

    def _claim_and_start(self, jobs: Any, want: int, sweep: bool) -> list:
        """Claim up to ``want`` jobs (the slots reserved for it) and start what came back, inside
        the claim section; a claim that raises gives its reserved slots back first. The claim is
        withdrawn when the worker stops (``cancel``)."""
        with self._claim_section():
            try:
                claims = jobs.claim_many(self.kinds, owner=self.owner, limit=want, lease_ms=self.lease_ms,
                                         queues=self.queues, cancel=self._stop, instance=self.instance,
                                         sweep=sweep)
            except BaseException:
                self._start_attempts([], want)
                raise
            self._start_attempts(claims, want, jobs.limit_held)
        return claims

    def _lead_key(self) -> str:
        """The waiter key: workers share a waiter only when a change that wakes one would have
        been claimable by each (the same kinds, the same queues)."""
        queues = "*" if self.queues is None else ",".join(sorted(self.queues))
        return "tenure.waiter\n" + ",".join(self.kinds) + "\n" + queues

    def _has_room(self) -> bool:
        """Whether a claim could start now (a free slot, no quarantined attempt, ``max_jobs``
        not reached); unlocked, so a hint only."""
        if self.max_jobs is not None and self._stats["claims"] + self._reserved >= self.max_jobs:
            return False
        return (self._quarantine is None
                and self.concurrency - len(self._attempts) - self._reserved + self._credit > 0)

    def _dispatch(self, gen: int) -> None:
        with self.store.engine.deadline(self.call_timeout, self._claim_group):
            self._dispatch_loop(gen)

    def _dispatch_loop(self, gen: int) -> None:
        jobs = self.store._jobs
        stop, wake, events = self._stop, self._wake, self.events
        # Where a statement is a trip to a server (not SQLite's one in-process writer), the
        # claim's once-a-second clean-up of abandoned cancel requests runs after the claimed jobs
        # started: inside the claim it was a second trip before the first handler could start.
        sweep_after = not self.store.engine.exclusive_gate
        while not stop.is_set() and gen == self._generation:
            if self._lost_claims:
                self._release_lost_claims(jobs)
            want = self._reserve()
            if want <= 0:
                events.mark("turns")
                self._dispatching = False
                wake.wait(self.poll_interval or None)
                self._dispatching = True
                wake.clear()
                continue
            try:
                claims = self._claim_and_start(jobs, want, sweep=not sweep_after)
            except OperationWithdrawn:
                return
            except Exception as exc:  # noqa: BLE001 - counted and logged, never swallowed silently
                self._claim_failed(exc)
                self._count("claim_errors")
                if isinstance(exc, StoreClosed) or not isinstance(exc, TenureError):
                    log.error("claim failed: %s", exc)
                else:
                    log.warning("claim failed: %s", exc)
                if stop.wait(max(self.poll_interval, 0.05)):
                    return
                continue
            if sweep_after:  # ~2% of an idle worker's claims at 50 jobs/s, among its slowest
                try:
                    jobs.sweep_abandoned(stop)
                except OperationWithdrawn:
                    return
                except Exception as exc:  # noqa: BLE001 - its next turn is due in a second
                    log.warning("cleaning up abandoned cancel requests failed: %s", exc)
            events.mark("turns")
            if claims and len(claims) == want:
                continue  # there may be more: claim again without waiting
            events.mark("idle")
            pause = self._idle_wait(jobs.rate_wake_at)
            self._dispatching = False
            woke = wake.wait(pause) if pause is not None else wake.wait()
            self._dispatching = True
            wake.clear()
            self._count("wakes" if woke else "polls")

    def _idle_wait(self, rate_wake_at: int | None) -> float | None:
        """How long the dispatcher waits after a short claim (None: until woken): the poll
        interval, or less when a rate limit stopped the claim and its window opens sooner (then
        it claims as the window opens, instead of up to a poll interval late; never sooner than
        5 ms from now, so a rate-limited queue is never busy-polled: docs/queues.md, "Rate limits")."""
        if rate_wake_at is None:
            return self.poll_interval if self.poll_interval > 0 else None
        until = max(0.005, (rate_wake_at - self.store._now_wall()) / 1000)
        return min(until, self.poll_interval) if self.poll_interval > 0 else until

    @contextmanager
    def _refill_section(self) -> Iterator[bool]:
        """Enter a settle-and-claim (True), unless stop() has begun (False)."""
        with self._refills:
            entered = not self._stop.is_set()
            if entered:
                self._refilling += 1
        self._tls.refilling = entered
        try:
            yield entered
        finally:
            if entered:
                self._tls.refilling = False
                with self._refills:
                    self._refilling -= 1
                    self._refills.notify_all()

    @contextmanager
    def _claim_section(self) -> Iterator[None]:
        """Around a claim and the registration of what it claimed: waits while a lost-claim
        release runs (and that release waits for the sections in progress)."""
        cv = self._claims_cv
        with cv:
            while self._releasing and not self._stop.is_set():
                cv.wait(0.05)
            self._claiming += 1
        try:
            yield
        finally:
            with cv:
                self._claiming -= 1
                cv.notify_all()

    def _claim_failed(self, exc: BaseException) -> None:
        """A claim raised. When the connection broke under it (TN0005: the server may have
        committed it and the answer is lost), give back at once whatever it leased to this
        instance, on the dispatcher's next turn, instead of letting those jobs wait a lease."""
        if isinstance(exc, StoreUnavailable):
            self._lost_claims = True
            self._wake.set()

    def _release_lost_claims(self, jobs, stopping: bool = False) -> None:
        """Give back the leases stamped with this worker's instance that it does not run (see
        :meth:`tenure.jobs.Jobs.release_lost_claims`), with no claim of its own in progress. On
        failure (the store still unreachable) it is tried again on the next turn."""
        cv = self._claims_cv
        with cv:
            self._releasing = True
            while self._claiming and not self._stop.is_set():
                cv.wait(0.05)
        try:
            if self._stop.is_set() and not stopping:
                return
            with self._lock:
                held = [a.job.id for a in self._attempts.values()]
            ids = jobs.release_lost_claims(self.instance, keep=held, cancel=None if stopping else self._stop)
            self._lost_claims = False
            if ids:
                self._count("claims_released", len(ids))
                log.warning("gave back %d job(s) claimed by a call whose answer was lost: %s",
                            len(ids), ", ".join(ids[:5]) + (" ..." if len(ids) > 5 else ""))
        except OperationWithdrawn:
            return
        except Exception as exc:  # noqa: BLE001 - retried on the next turn
            log.warning("could not give back lost claims yet (retrying): %s", exc)
            if not stopping:
                self._stop.wait(max(min(self.poll_interval, 1.0), 0.05))
        finally:
            with cv:
                self._releasing = False
                cv.notify_all()

    def _reserve(self, settling: Sequence[Attempt] = ()) -> int:
        """How many jobs to claim now, reserved against the free slots (under the worker's lock,
        so the dispatcher and the settlers never claim the same slot twice), bucketed by
        :func:`_claim_size`. The caller hands the reservation back to :meth:`_start_attempts`.

        ``settling``: attempts the caller settles in the same transaction as this claim (their
        slots are freed before its claims start). Up to the reservation they are *credited*: each
        funds one reserved slot, so ``len(attempts) + reserved - credit`` never exceeds
        ``concurrency``, and since no reservation is smaller than its credit, neither does the
        number of attempts in flight (6.3), however many settlers claim at once. Where any claim
        size costs the same statement (``Engine.any_claim_size``: SQLite), it claims every free
        slot at once: a bucketed claim left the rest of the slots a settle-and-claim freed to a
        second claim by the dispatcher, a transaction and a thread switch more per cycle."""
        with self._lock:
            if self._quarantine is not None:
                return 0  # a reclaimed attempt is running: it runs alone (see _start_attempts)
            free = self.concurrency - len(self._attempts) - self._reserved + self._credit + len(settling)
            if self.max_jobs is not None:
                free = min(free, self.max_jobs - self._stats["claims"] - self._reserved)
            if free <= 0:
                return 0
            want = min(free, self.claim_batch)
            if not getattr(self.store.engine, "any_claim_size", False):
                want = _claim_size(want)
            self._reserved += want
            for a in settling[:want]:
                a.credited = True
            self._credit += min(want, len(settling))
            return want

    def _uncredit(self, settling: Sequence[Attempt]) -> None:
        """A settle-and-claim that did not happen: its attempts fund nothing any more."""
        with self._lock:
            for a in settling:
                if a.credited:
                    a.credited = False
                    self._credit -= 1

    def _start_attempts(self, claims: list[Claim], reserved: int, held: bool = False) -> None:
        """Register a claimed batch (one lock round for all of it, which also returns the claim's
        ``reserved`` slots) and hand each attempt to a slot or to the event loop. ``held``: the
        claim's :attr:`tenure.jobs.Jobs.limit_held` (a settling attempt then wakes the dispatcher,
        see :meth:`_release`)."""
        handlers, asyncs, default_timeout = self.handlers, self._async, self.default_timeout_ms
        attempts = []
        worker = cast("Worker", self)  # a producer is always part of a Worker
        for claim in claims:
            job = claim.job
            attempts.append(Attempt(worker, claim, handlers[job.kind], job.timeout_ms or default_timeout))
        with self._lock:
            self._reserved -= reserved
            self._backlog = bool(claims) and len(claims) == reserved
            self._held = held
            if not claims:
                wake = self._wake_deferred and self._free_or_defer()
                if wake:
                    self._wake.set()
                return
            self._stats["claims"] += len(claims)
            mine = self._attempts
            for attempt in attempts:
                mine[attempt.token] = attempt
            # A short claim leaves slots free: a wake-up deferred while they were reserved is due.
            wake = self._wake_deferred and self._free_or_defer()
            if claims[0].reclaimed:
                # Reclaimed from an expired lease, so it comes alone (the claim's rule), and no
                # claim starts until it ends: if it is what killed its last worker, it can take
                # no job claimed after it down with it (docs/guarantees.md, "Liveness").
                self._quarantine = attempts[0]
        registry = self.store._attempts
        stopping = self._stop.is_set()
        sync: list[Attempt] = []
        nonblocking: list[Attempt] = []
        for attempt in attempts:
            registry[attempt.token] = attempt
            if stopping:
                attempt.cancel(SHUTDOWN)
            (nonblocking if asyncs[attempt.job.kind] else sync).append(attempt)
        if nonblocking:
            self._spawn_async(nonblocking)
        if sync:
            self._slots.put_many(sync)
        if wake:
            self._wake.set()
