"""The worker: one object that puts its parts together and starts and stops their threads.

- the **producer** (:mod:`~tenure.worker.producer`): a dispatcher thread claims in batches as
  slots free up;
- the **executor** (:mod:`~tenure.worker.executor`): ``concurrency`` slot threads run sync
  handlers, one event-loop thread runs async ones; at most ``concurrency`` attempts are in flight
  either way;
- the **completer** (:mod:`~tenure.worker.completer`): settler threads settle finished attempts in
  batches, each item fenced, and refill the slots they free in the same transaction;
- the **keeper** (:mod:`~tenure.worker.keeper`): renews leases at a third of the lease and
  enforces per-job timeouts;
- the **cancel watch** (:mod:`~tenure.worker.cancel_watch`): hears cancel requests for the jobs
  this worker runs.

In-flight state is keyed by lease TOKEN, never by owner or job id.
"""

from __future__ import annotations

import asyncio
import logging
import queue as _queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from .. import worker_log
from ..errors import InvalidType
from ..job_control import release
from ..limits import RELEASE_CALL_TIMEOUT_S
from ..records import Lease
from ..worker_health import Health, assess, count_zombies, zombie_limit
from .attempt import SHUTDOWN, Attempt
from .cancel_watch import CancelRequests, CancelWatch
from .completer import Completer, settler_count
from .keeper import Keeper
from .lifecycle import DETACHED, SETTLED
from .slots import SlotPool
from .state import _new_instance

log = logging.getLogger("tenure.worker")

#: How long stop() lets a database call in flight finish before it cuts it (seconds; never past
#: the grace): a healthy server answers well within it, a silent one never does.
STOP_CUT_AFTER = 0.25


@dataclass(frozen=True, slots=True)
class StopResult:
    """What ``stop()`` answers: whether every handler wound up within the grace, and how many
    were still running (detached: they can never settle)."""

    drained: bool
    in_flight: int


class Worker(Completer, Keeper, CancelRequests):
    """Claims jobs of the handled kinds and runs them (see the module docstring); made by
    ``store.jobs.create_worker(handlers, config, **options)``. Its options are the fields of one
    :class:`tenure.WorkerConfig` (:attr:`config`), every duration in seconds (a number, a
    timedelta or text like ``"30s"``), checked before the worker exists:

    - ``handlers``: ``{kind: fn}``, each ``fn(payload, ctx)`` sync or ``async``.
    - ``concurrency`` (1): attempts in flight at most, a positive int.
    - ``poll_interval`` (0.5 s): an idle worker's claim cadence; same-store enqueues wake it at once
      and ``watch`` (True) adds the engine's cross-process wake-up (SQLite ``data_version``,
      PostgreSQL ``LISTEN``).
    - ``lease`` (30 s) and ``renew`` (True): leases are renewed at a third of ``lease``; a
      renewal refused by the fence is a loss (the attempt's event is set with the refusal), a
      renewal failing for a storage reason is not. With ``renew=False`` the event is set with
      :class:`~tenure.errors.LeaseExpired` when the lease ends, and the attempt cannot settle.
    - ``owner``: diagnostics only (never a guard); ``on_outcome``: called once per settled attempt
      with ``{outcome, job_id, kind, attempt, generation, code?, reason?}``.
    - ``backoff_base`` / ``backoff_cap`` (1 s / 60 s): the retry delay ``min(cap, base*2^(n-1))``,
      jittered between half and all of it.
    - ``stop_grace`` (5 s): what ``stop()`` waits for handlers by default.
    - ``queues``: claim only from these queues; ``timeout``: the default per-job timeout (seconds)
      for jobs enqueued without one.
    - ``max_jobs``: stop claiming once that many jobs have been claimed over the worker's lifetime
      and set :attr:`exhausted` once they have all settled; a host (``App.run_worker``, the
      supervisor) then stops the worker and, for a recycled process, starts a fresh one.
    - ``maintenance`` (True): share the store's maintenance service (cron, sweeps, heartbeats).
    - ``zombie_share`` (0.5) and ``zombie_grace`` (None: ``stop_grace``): a handler still running
      ``zombie_grace`` seconds after it was asked to stop (timeout, lost lease, operator cancel)
      is a zombie slot; when zombies reach ``zombie_share`` of the slots the worker is unhealthy
      (:meth:`health`, ``stats()``, the heartbeat, ``/metrics``; see :mod:`tenure.worker_health`).
    """

    # -- public --------------------------------------------------------------------------------
    def start(self) -> Worker:
        """Start claiming. Refused (TypeError) while already running; :class:`StoreClosed` on a
        closed store. A worker stopped earlier starts with fresh threads (spec 6.27)."""
        with self._stop_lock:
            if self._running:
                raise InvalidType("this worker is already running; stop() it before start() again")
            self.store.jobs  # noqa: B018 - opens the store (and raises StoreClosed) now, not in a thread
            self._start_threads()
        if self.maintenance:
            try:
                self._maintainer = self.store._maintenance()
                self._maintainer.acquire(self)
            except Exception:  # upkeep never prevents work
                log.exception("could not start the maintenance service; jobs still run")
                self._maintainer = None
        return self

    def _start_threads(self) -> None:
        self._running = True
        if self._generation:
            # A restart is a new instance: the detached attempts of the last run keep the old one,
            # so nothing this run does (the lost-claim release) can end their leases early.
            self.instance = _new_instance()
        self._generation += 1
        gen = self._generation
        self._stop = threading.Event()
        self._halt = threading.Event()
        self._wake = threading.Event()
        self._reserved = 0
        self._credit = 0
        self._backlog = False
        self._held = False
        self._quarantine = None
        self._slots = SlotPool()
        self._done = _queue.SimpleQueue()
        self._loop = None
        self._watch_thread = None
        self._watcher = None
        # One settler where the store has one writer (SQLite: a second would only queue at the
        # gate). On PostgreSQL one per 128 slots (two to four), each settling its share of the
        # slots, so one share's round trip overlaps the others' handlers (see _complete_loop).
        settlers = settler_count(self.concurrency, self.store.engine.exclusive_gate)
        self._settlers = [threading.Thread(target=self._complete_loop, args=(self._done,),
                                           name=f"tenure-settle-{i}", daemon=True) for i in range(settlers)]
        self._settle_target = 0 if settlers == 1 else max(1, self.concurrency // settlers)  # 0: never gather
        gate = bool(self.store.engine.exclusive_gate)
        self._claims_on_watch = self._inline_settle = gate
        self._dispatching = True
        self._settle_token = threading.Lock()
        threads = [threading.Thread(target=self._dispatch, args=(gen,), name="tenure-dispatch", daemon=True),
                   threading.Thread(target=self._keeper, args=(gen,), name="tenure-keeper", daemon=True),
                   *self._settlers]
        if not all(self._async.values()):
            threads += [threading.Thread(target=self._slot, args=(self._slots,), name=f"tenure-slot-{i}",
                                         daemon=True) for i in range(self.concurrency)]
        if any(self._async.values()):
            self._loop = asyncio.new_event_loop()
            threads.append(threading.Thread(target=self._loop.run_forever, name="tenure-async", daemon=True))
        if self.watch:
            try:
                watcher = self.store.engine.watcher()
            except Exception as exc:  # noqa: BLE001 - the poll is the fallback
                log.info("no cross-process watcher (%s); polling every %.3fs", exc, self.poll_interval)
            else:
                self._watcher = watcher  # its connection also hears cancel requests (CancelWatch)
                self._watch_thread = threading.Thread(target=self._watch, args=(watcher, self._stop),
                                                      name="tenure-watch", daemon=True)
                threads.append(self._watch_thread)
        self._threads = threads
        self.store._wake_hooks.append(self._on_local_enqueue)
        self.store._workers.append(self)
        for t in threads:
            t.start()
        self._cancel_watch = CancelWatch(self, self._stop, notified=self.watch)
        self._cancel_watch.start()

    def stop(self, grace: float | None = None, *, release: bool = False) -> StopResult:
        """Cancel in-flight handlers, wait up to ``grace`` (default ``stop_grace``) for them, then
        return ``StopResult(drained, in_flight)``. A handler still running then is detached: it can
        never settle, and its job is reclaimed after its lease — or, with ``release=True`` (what
        ``App.run_worker`` and ``tenure worker`` do), released at once, fenced by its current
        lease: pending again now with its retries left unchanged. Before this returns, no database
        call this worker started is running or will run (quiescence), so ``store.close()`` right
        after always releases the database. Never raises; a second call returns at once."""
        if threading.current_thread() in self._settlers:
            # An on_outcome observer stopping its own worker, on a settler: a stop already under
            # way in another thread joins this settler, so waiting for it would never end. That
            # stop finishes the job; this call returns at once.
            if not self._stop_lock.acquire(blocking=False):
                return StopResult(False, len(self._attempts))
        else:
            self._stop_lock.acquire()
        try:
            if not self._running:
                return StopResult(True, 0)
            try:
                return self._stop_running(grace, release)
            except Exception:  # stop() never raises
                log.exception("stopping the worker failed")
                return StopResult(False, len(self._attempts))
        finally:
            self._stop_lock.release()

    def _stop_running(self, grace: float | None, release: bool = False) -> StopResult:  # noqa: C901 - the shutdown state machine, kept in one place
        grace = self.stop_grace if grace is None else max(0.0, float(grace))
        me = threading.current_thread()
        self._running = False
        try:
            self.store._wake_hooks.remove(self._on_local_enqueue)
        except ValueError:
            pass
        self._stop.set()
        self._wake.set()
        engine = self.store.engine
        dispatcher, keeper = self._threads[:2]
        cut_at = time.monotonic() + min(STOP_CUT_AFTER, grace)
        if dispatcher is not me:
            # A claim waiting on the gate (or the pool) is withdrawn by _stop; one that a silent
            # server does not answer is cut (its leases are given back below).
            self._join_cutting(dispatcher, self._claim_group, cut_at)
        with self._refills:  # settle-and-claims in progress register their claims first
            mine = 1 if getattr(self._tls, "refilling", False) else 0  # stop() from an on_outcome
            while not self._refills.wait_for(lambda: self._refilling <= mine, timeout=0.05):
                if time.monotonic() >= cut_at:
                    engine.interrupt(self._claim_group)
        if self._lost_claims:
            with engine.deadline(RELEASE_CALL_TIMEOUT_S):
                self._release_lost_claims(self.store._jobs, stopping=True)
        with self._lock:
            attempts = list(self._attempts.values())
        for a in attempts:
            a.cancel(SHUTDOWN)
        deadline = time.monotonic() + grace
        for a in attempts:
            a.finished.wait(max(0.0, deadline - time.monotonic()))
        with self._lock:
            left = [a for a in self._attempts.values() if not a.finished.is_set()]
            abandoned = [a for a in left if a.state is not SETTLED]
            for a in left:
                a.state = DETACHED  # a late return writes nothing (6.26)
                self.store._attempts.pop(a.token, None)
        # Quiescence: an attempt that finished was settled before its ``finished`` was set, so
        # what is left in the queue belongs to detached attempts and is skipped; then the settler,
        # the keeper and the watcher stop, each joined.
        self._halt.set()
        for _ in self._settlers:
            self._done.put(None)  # each settler takes one and stops
        cut_at = time.monotonic() + STOP_CUT_AFTER  # what settles now is quick, or never answers
        for t in (*self._settlers, keeper):
            if t is not me:
                self._join_cutting(t, self, cut_at)
        if self._inline_settle and me not in self._settlers:
            # A slot thread settling its own attempt (Completer._to_settle) finishes first; the
            # token is never given back, so none starts after this (a restart makes a new one).
            # (A stop() from an observer on the settler runs holding it: no slot thread settles.)
            while not self._settle_token.acquire(timeout=0.05):
                if time.monotonic() >= cut_at:
                    engine.interrupt(self)
        self._slots.close()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._watch_thread is not None and self._watch_thread is not me:
            self._join_cutting(self._watch_thread, self, cut_at)  # a lead/follow on a silent network
        self._cancel_watch.join()
        if abandoned and release:
            self._release_abandoned(abandoned)
        if self._maintainer is not None:
            try:
                self._maintainer.release(self)
            except Exception:
                log.exception("stopping the maintenance service failed")
            self._maintainer = None
        try:
            self.store._workers.remove(self)
        except ValueError:
            pass
        return StopResult(not left, len(left))

    def _join_cutting(self, thread: threading.Thread, group: Any, cut_at: float) -> None:
        """Join ``thread``; from ``cut_at`` on, cut its database calls in flight (a silent server
        never answers them), so stop() returns within its grace whatever the server does."""
        engine = self.store.engine
        while thread.is_alive():
            thread.join(max(0.0, min(0.05, cut_at - time.monotonic())) or 0.05)
            if thread.is_alive() and time.monotonic() >= cut_at:
                engine.interrupt(group)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until :attr:`exhausted` (``max_jobs`` attempts settled); True if it is."""
        return self.exhausted.wait(timeout)

    def stats(self) -> dict[str, int]:
        """Counters since construction, plus the current ``in_flight``: ``claims``,
        ``completions``, ``failures``, ``lost_settlements``, ``cancellations``, ``renewals``,
        ``renewal_errors``, ``wakes``, ``polls``, ``claim_errors``, ``settle_errors``, ``timeouts``,
        ``snoozes``, ``claims_released`` (jobs given back after a claim whose answer was
        lost); and the current ``zombies`` and ``healthy`` (a bool) of :meth:`health`."""
        with self._lock:
            out = dict(self._stats)
            out["in_flight"] = len(self._attempts)
            attempts = list(self._attempts.values())
        health = Health(count_zombies(attempts, self.zombie_grace),
                        zombie_limit(self.concurrency, self.zombie_share), self.concurrency)
        out["zombies"] = health.zombies
        out["healthy"] = health.healthy
        return out

    def health(self) -> Health:
        """Zombie slots now and whether they stay below ``zombie_share`` of the slots (see
        :mod:`tenure.worker_health`); ``health().error()`` is the coded error for an unhealthy one."""
        return assess(self)

    def leases(self) -> list[Lease]:
        """The leases this worker holds right now, one per in-flight attempt."""
        with self._lock:
            return [a.lease for a in self._attempts.values() if a.state is not SETTLED]

    @property
    def running(self) -> bool:
        return self._running

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- immediate shutdown ------------------------------------------------------------------------
    def abandon(self) -> list[str]:
        """Immediate shutdown (a second signal): detach every attempt still running (a late return
        writes nothing) and release its job at once, fenced by its current lease: back to
        ``pending`` now with its retries left unchanged, instead of leased until the lease expires.
        Answers the released job ids. Never raises; call :meth:`stop` as usual afterwards."""
        # Stop claiming first (and let a claim in progress register what it took), or a released
        # job could be claimed straight back by this worker.
        self._stop.set()
        self._wake.set()
        dispatcher = self._threads[0] if self._threads else None
        if dispatcher is not None and dispatcher is not threading.current_thread():
            dispatcher.join(1.0)
        with self._refills:
            self._refills.wait_for(lambda: self._refilling == 0, timeout=1.0)
        with self._lock:
            left = [a for a in self._attempts.values() if a.state is not SETTLED and a.state is not DETACHED]
            for a in left:
                a.state = DETACHED
                self.store._attempts.pop(a.token, None)
        return self._release_abandoned(left) if left else []

    def _release_abandoned(self, attempts: list[Attempt]) -> list[str]:
        try:
            released = release(self.store, [a.lease for a in attempts])
        except Exception as exc:  # noqa: BLE001 - their leases expire instead
            log.warning("releasing %d abandoned job(s) failed (reclaimed after their lease): %s", len(attempts), exc)
            return []
        done = set(released)
        for a in attempts:
            if a.job.id in done:
                worker_log.event(logging.INFO, a.job, a.lease.attempt, "released",
                                 "released: the worker stopped before it finished (pending again now)", self.owner)
        return released
