"""The worker: claims, runs, renews and settles (JOBS-FORMAT §6 and §6.1).

Shape (one worker):

- a **dispatcher** thread claims in batches (``claim_many`` up to the free slots), woken at once by
  an enqueue on the same store, by the engine's cross-process watcher (SQLite ``data_version``,
  PostgreSQL ``LISTEN``), by a slot freeing up, or by ``poll_interval``;
- ``concurrency`` **slot** threads run sync handlers; async handlers run on one event-loop thread;
  at most ``concurrency`` attempts are in flight either way;
- a **settler** thread settles finished attempts in batches (group commit: one transaction for
  everything that finished meanwhile), each item still individually fenced, and while the queue
  has a backlog claims the slots it frees in the same transaction; on PostgreSQL two settlers each
  gather about half the slots, so one half's round trip overlaps the other half's handlers;
- a **keeper** thread renews leases at a third of ``lease_ms`` and enforces per-job timeouts.

In-flight state is keyed by lease TOKEN, never by owner or job id (checklist 6.19).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import queue as _queue
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _validate as v
from . import worker_log
from .cancel_watch import CancelWatch
from .errors import (
    FENCE_CODES,
    InvalidType,
    LeaseExpired,
    LeaseNotHeld,
    OperationWithdrawn,
    StorageError,
    StoreBusy,
    StoreClosed,
    StoreUnavailable,
    TenureError,
    UnstorableValue,
)
from .handler_control import Snooze
from .job_control import CANCEL_REQUESTED, release, settle_requested
from .jobs import DEFAULT_LEASE_MS
from .limits import RELEASE_CALL_TIMEOUT_S, call_timeout_for_lease
from .records import Claim, Job, Lease
from .tracing import run_span
from .worker_health import (
    DEFAULT_ZOMBIE_SHARE,
    Health,
    assess,
    check_grace,
    check_share,
    count_zombies,
    zombie_limit,
)

if TYPE_CHECKING:
    from .maintenance import Maintainer
    from .store import Store

log = logging.getLogger("tenure.worker")

MAX_CLAIM_BATCH = 100
MAX_SETTLE_BATCH = 500
#: Settler threads on an engine with concurrent writers (PostgreSQL); one on SQLite.
SETTLERS_MVCC = 2
#: How long a settler waits for still-running handlers to join a batch below its target share.
SETTLE_GATHER_S = 0.001


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


@dataclass(frozen=True, slots=True)
class StopResult:
    """What ``stop()`` answers: whether every handler wound up within the grace, and how many
    were still running (detached: they can never settle)."""

    drained: bool
    in_flight: int


class Attempt:
    """One claimed attempt in this worker: its current lease and how it ends."""

    __slots__ = ("worker", "job", "lease", "token", "handler", "cancelled", "started", "last_renew",
                 "deadline", "lost", "operator_cancelled", "timed_out", "finished", "detached",
                 "task", "loop", "settled", "settling", "settle_lock", "renew_failing", "timeout_ms",
                 "credited", "progress", "__weakref__")

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
        self.lost: TenureError | None = None
        self.operator_cancelled = False
        self.timed_out = False
        self.finished = _Flag()
        self.detached = False
        self.task: asyncio.Future | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.settled = False
        # ``settling`` flips once, under ``settle_lock``, when one path takes the attempt's
        # settlement (the handler's return, its timeout, or its handler transaction). The keeper
        # renews only under the same lock and never once it is set, so a settlement always uses
        # the attempt's final lease (a renewal racing a completion would retire its token).
        self.settling = False
        self.settle_lock = threading.Lock()
        self.renew_failing = False
        # Its slot funds a claim made in the same transaction as its settlement (see _reserve).
        self.credited = False
        self.progress: Any = None  # a tenure.progress.Throttle once the handler reports progress

    @property
    def ctx(self) -> JobContext:
        """A fresh context for this attempt. Not stored on the attempt: an attempt <-> context
        reference cycle made every finished attempt cyclic garbage, and the collector was a quarter
        of a worker's GIL time (docs/performance.md, proposal 1)."""
        return JobContext(self)

    def cancel(self, reason: Any) -> None:
        if self.cancelled._set(reason):
            task, loop = self.task, self.loop
            if task is not None and loop is not None and (reason is SHUTDOWN or reason is CANCEL_REQUESTED):
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


def _loop_here() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


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
            if attempt.detached:
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
            from .progress import Throttle

            attempt.progress = Throttle(attempt.worker.store, lambda: attempt.lease)
        return attempt.progress.report(fraction, note)

    def transaction(self):
        """The handler transaction (exactly-once effects on the store's own database): the
        block's writes and the job's fenced completion commit together, or not at all."""
        from .handler_tx import handler_transaction

        return handler_transaction(self._attempt)


def _is_async(fn: Callable[..., Any]) -> bool:
    target = fn if inspect.isroutine(fn) else type(fn).__call__
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target)


#: How long stop() lets a database call in flight finish before it cuts it (seconds; never past
#: the grace): a healthy server answers well within it, a silent one never does.
STOP_CUT_AFTER = 0.25
#: How long one wait on the cross-process watcher lasts. The watch thread owns its watcher and
#: closes it itself when the worker stops (closing a SQLite connection from another thread while it
#: runs a statement is not safe), so ``stop()`` waits at most this long for it.
WATCH_SLICE = 0.05
#: Backoff bounds when a settlement fails for a storage reason (retried while the lease lasts).
SETTLE_RETRY_MIN = 0.02
SETTLE_RETRY_MAX = 1.0


def _new_instance() -> str:
    """A worker instance id, unique per process and per run: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


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


class Worker:
    """Claims jobs of the handled kinds and runs them (see the module docstring); made by
    ``store.jobs.create_worker(handlers, **options)`` (JOBS-FORMAT §6).

    - ``handlers``: ``{kind: fn}``, each ``fn(payload, ctx)`` sync or ``async``.
    - ``concurrency`` (1): attempts in flight at most, a positive int.
    - ``poll_interval`` (0.5 s): an idle worker's claim cadence; same-store enqueues wake it at once
      and ``watch`` (True) adds the engine's cross-process wake-up (SQLite ``data_version``,
      PostgreSQL ``LISTEN``).
    - ``lease_ms`` (30000) and ``renew`` (True): leases are renewed at a third of ``lease_ms``; a
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

    def __init__(self, store: Store, handlers: dict[str, Callable[..., Any]], *, concurrency: int = 1,
                 poll_interval: float = 0.5, lease_ms: int = DEFAULT_LEASE_MS, owner: str | None = None,
                 renew: bool = True, on_outcome: Callable[[dict[str, Any]], Any] | None = None,
                 backoff_base: float = 1.0, backoff_cap: float = 60.0, stop_grace: float = 5.0,
                 queues: str | list[str] | None = None, timeout: float | None = None,
                 claim_batch: int = MAX_CLAIM_BATCH, watch: bool = True, maintenance: bool = True,
                 max_jobs: int | None = None, zombie_share: float = DEFAULT_ZOMBIE_SHARE,
                 zombie_grace: float | None = None) -> None:
        if not isinstance(handlers, dict) or not handlers:
            raise InvalidType("handlers must be a non-empty dict of {kind: callable}")
        for kind, fn in handlers.items():
            v.name(kind, "handler kind")
            if not callable(fn):
                raise InvalidType(f"the handler for {kind!r} is not callable: {fn!r}")
        v.positive_int(concurrency, "concurrency", maximum=10_000)
        v.lease_ms(lease_ms)
        v.positive_int(claim_batch, "claim_batch", maximum=10_000)
        v.positive_int(max_jobs, "max_jobs", allow_none=True)
        zombie_share = check_share(zombie_share)
        zombie_grace = check_grace(zombie_grace)
        for name, val in (("poll_interval", poll_interval), ("backoff_base", backoff_base),
                          ("backoff_cap", backoff_cap), ("stop_grace", stop_grace)):
            v.seconds_setting(val, name)  # finite, >= 0, at most ten years (one verdict per input)
        if on_outcome is not None and not callable(on_outcome):
            raise InvalidType("on_outcome must be callable")
        if owner is not None and (not isinstance(owner, str) or not owner):
            raise InvalidType("owner must be a non-empty string (it is diagnostics, never a guard)")
        if owner is not None:
            v.text(owner, "owner", max_chars=v.MAX_ID)  # refused now, not at every claim
        self.store = store
        self.handlers = dict(handlers)
        self.kinds = sorted(self.handlers)
        self.queues = None if queues is None else v.names(queues, "queues")
        self.concurrency = concurrency
        self.poll_interval = float(poll_interval)
        self.lease_ms = lease_ms
        #: Each database call of this worker must answer within this many seconds, else it is cut
        #: and fails like an unreachable store (tenure.limits; PostgreSQL only, SQLite is local).
        self.call_timeout = call_timeout_for_lease(lease_ms, getattr(store.engine, "call_timeout", None))
        self._claim_group = object()  # the deadline group of this worker's claims (see stop())
        #: This worker's identity, unique per process and per worker (``host:pid:random``): every
        #: lease it claims is stamped with it (``lease_instance``), and the maintenance reaper and
        #: the lost-claim release match leases by it. ``owner`` (defaulting to it) is diagnostics.
        self.instance = _new_instance()
        self.owner = owner or self.instance
        self.renew = renew
        self.on_outcome = on_outcome
        self.backoff_base_ms = int(backoff_base * 1000)
        self.backoff_cap_ms = int(backoff_cap * 1000)
        self.stop_grace = float(stop_grace)
        self.default_timeout_ms = v.duration_ms(timeout, "timeout", seconds=True, positive=True)
        self.claim_batch = claim_batch
        self.watch = watch
        self.maintenance = maintenance
        self.max_jobs = max_jobs
        self.zombie_share = zombie_share
        self.zombie_grace = self.stop_grace if zombie_grace is None else zombie_grace
        #: Set once ``max_jobs`` attempts have settled (never set without ``max_jobs``).
        self.exhausted = threading.Event()
        self._maintainer: Maintainer | None = None
        self._async = {k: _is_async(fn) for k, fn in self.handlers.items()}
        self._lock = threading.Lock()
        self._stop_lock = threading.Lock()
        # Settle-and-claim calls in progress (one per settler at most). stop() waits for them to
        # register what they claimed before it looks at what is in flight, and none starts once
        # stop() has begun, so a job claimed that way is either seen (and stopped) or never claimed.
        self._refills = threading.Condition()
        self._refilling = 0
        self._tls = threading.local()
        self._attempts: dict[str, Attempt] = {}
        self._settlers: list[threading.Thread] = []
        self._stats = dict.fromkeys(
            ("claims", "completions", "failures", "lost_settlements", "cancellations", "renewals",
             "renewal_errors", "wakes", "polls", "claim_errors", "settle_errors", "timeouts", "snoozes",
             "claims_released"), 0)
        # Claims whose answer was lost (see _release_lost_claims): claims in progress, and whether
        # a release is due or running (a release waits for the claims in progress; claims wait
        # for a release), so the release never gives back a lease a concurrent claim just took.
        self._claims_cv = threading.Condition()
        self._claiming = 0
        self._releasing = False
        self._lost_claims = False
        self._running = False
        self._threads: list[threading.Thread] = []
        self._watch_thread: threading.Thread | None = None
        self._generation = 0  # bumps at every start(): a cancelled loop can never be revived

    # -- public --------------------------------------------------------------------------------
    def start(self) -> Worker:
        """Start claiming. Refused (TypeError) while already running; :class:`StoreClosed` on a
        closed store. A worker stopped earlier starts with fresh threads (checklist 6.27)."""
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
        self._stop = threading.Event()  # stop claiming; cancel handlers
        self._halt = threading.Event()  # after the grace: keeper exits, gate waits are withdrawn
        self._wake = threading.Event()
        self._reserved = 0  # slots promised to a claim in progress (see _reserve)
        self._credit = 0  # slots of credited attempts (being settled by a settle-and-claim)
        self._backlog = False  # the last claim came back full: more jobs are likely waiting
        # A job reclaimed from an expired lease (its last worker was lost, maybe BY it) runs alone:
        # while it runs, this worker claims nothing more (docs/guarantees.md, "Liveness").
        self._quarantine: Attempt | None = None
        self._slots: _queue.SimpleQueue = _queue.SimpleQueue()
        self._done: _queue.SimpleQueue = _queue.SimpleQueue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watch_thread = None
        # One settler where the store has one writer (SQLite: a second would only queue at the
        # gate). On PostgreSQL two, each settling about half the slots, so one half's round trip
        # overlaps the other half's handlers (see _complete_loop).
        settlers = 1 if self.store.engine.exclusive_gate or self.concurrency == 1 else SETTLERS_MVCC
        self._settlers = [threading.Thread(target=self._complete_loop, args=(self._done,),
                                           name=f"tenure-settle-{i}", daemon=True) for i in range(settlers)]
        self._settle_target = 0 if settlers == 1 else max(1, self.concurrency // settlers)  # 0: never gather
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
            for a in left:
                a.detached = True  # a late return writes nothing (6.26)
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
        for _ in range(self.concurrency):
            self._slots.put(None)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._watch_thread is not None and self._watch_thread is not me:
            self._watch_thread.join()
        self._cancel_watch.join()
        abandoned = [a for a in left if not a.settled]
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
            return [a.lease for a in self._attempts.values() if not a.settled]

    @property
    def running(self) -> bool:
        return self._running

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals: counting and outcomes -----------------------------------------------------------
    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._stats[key] += n

    def _check_exhausted(self) -> None:
        if self.max_jobs is None or self.exhausted.is_set():
            return
        s = self._stats
        with self._lock:
            settled = s["completions"] + s["failures"] + s["lost_settlements"] + s["cancellations"] + s["snoozes"]
        if settled >= self.max_jobs:
            self.exhausted.set()

    def _outcome(self, attempt: Attempt, outcome: str, code: str | None = None, reason: str | None = None,
                 error: BaseException | None = None):
        cb = self.on_outcome
        if cb is None:
            return
        event = {"outcome": outcome, "job_id": attempt.job.id, "kind": attempt.job.kind,
                 "attempt": attempt.lease.attempt, "generation": attempt.lease.generation}
        if code is not None:
            event["code"] = code
        if reason is not None:
            event["reason"] = reason
        if error is not None:
            event["exception"] = error
        try:
            cb(event)
        except Exception:  # an observer never affects the loop (6.17)
            log.exception("on_outcome observer raised; ignored")

    def _on_local_enqueue(self) -> None:
        self._wake.set()

    # -- dispatcher ------------------------------------------------------------------------------
    def _watch(self, watcher, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                try:
                    if watcher.wait(WATCH_SLICE) and not stop.is_set():
                        self._wake.set()
                except Exception:  # noqa: BLE001 - the poll is the fallback
                    if stop.wait(self.poll_interval or 0.5):
                        return
        finally:
            try:
                watcher.close()
            except Exception:
                log.debug("closing the watcher failed", exc_info=True)

    def _dispatch(self, gen: int) -> None:
        with self.store.engine.deadline(self.call_timeout, self._claim_group):
            self._dispatch_loop(gen)

    def _dispatch_loop(self, gen: int) -> None:
        jobs = self.store._jobs
        stop, wake = self._stop, self._wake
        while not stop.is_set() and gen == self._generation:
            if self._lost_claims:
                self._release_lost_claims(jobs)
            want = self._reserve()
            if want <= 0:
                wake.wait(self.poll_interval or None)
                wake.clear()
                continue
            try:
                with self._claim_section():
                    try:
                        claims = jobs.claim_many(self.kinds, owner=self.owner, limit=want,
                                                 lease_ms=self.lease_ms, queues=self.queues, cancel=stop,
                                                 instance=self.instance)
                    except BaseException:
                        self._start_attempts([], want)
                        raise
                    self._start_attempts(claims, want)
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
            if claims and len(claims) == want:
                continue  # there may be more: claim again without waiting
            woke = wake.wait(self.poll_interval) if self.poll_interval > 0 else wake.wait()
            wake.clear()
            self._count("wakes" if woke else "polls")

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
        number of attempts in flight (6.3), however many settlers claim at once."""
        with self._lock:
            if self._quarantine is not None:
                return 0  # a reclaimed attempt is running: it runs alone (see _start_attempts)
            free = self.concurrency - len(self._attempts) - self._reserved + self._credit + len(settling)
            if self.max_jobs is not None:
                free = min(free, self.max_jobs - self._stats["claims"] - self._reserved)
            if free <= 0:
                return 0
            want = _claim_size(min(free, self.claim_batch))
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

    def _start_attempts(self, claims: list[Claim], reserved: int) -> None:
        """Register a claimed batch (one lock round for all of it, which also returns the claim's
        ``reserved`` slots) and hand each attempt to a slot or to the event loop."""
        handlers, asyncs, default_timeout = self.handlers, self._async, self.default_timeout_ms
        attempts = []
        for claim in claims:
            job = claim.job
            attempts.append(Attempt(self, claim, handlers[job.kind], job.timeout_ms or default_timeout))
        with self._lock:
            self._reserved -= reserved
            self._backlog = bool(claims) and len(claims) == reserved
            if not claims:
                return
            self._stats["claims"] += len(claims)
            mine = self._attempts
            for attempt in attempts:
                mine[attempt.token] = attempt
            if claims[0].reclaimed:
                # Reclaimed from an expired lease, so it comes alone (the claim's rule), and no
                # claim starts until it ends: if it is what killed its last worker, it can take
                # no job claimed after it down with it (docs/guarantees.md, "Liveness").
                self._quarantine = attempts[0]
        registry = self.store._attempts
        stopping = self._stop.is_set()
        sync = []
        for attempt in attempts:
            registry[attempt.token] = attempt
            if stopping:
                attempt.cancel(SHUTDOWN)
            if asyncs[attempt.job.kind]:
                loop = self._loop
                assert loop is not None  # started with the worker when any handler is async
                attempt.loop = loop
                asyncio.run_coroutine_threadsafe(self._run_async(attempt), loop)
            else:
                sync.append(attempt)
        put = self._slots.put
        for attempt in sync:
            put(attempt)

    # -- running handlers ------------------------------------------------------------------------
    def _slot(self, slots: _queue.SimpleQueue) -> None:
        get = slots.get
        while True:
            attempt = get()
            if attempt is None:
                return
            _RUNNING.attempt = attempt  # see Attempt.cancel_by_operator
            try:
                with run_span(attempt.job, attempt.lease.attempt):
                    result = attempt.handler(attempt.job.payload, attempt.ctx)
                    if inspect.isawaitable(result):
                        result = asyncio.run(_await(result))
            except BaseException as exc:  # noqa: BLE001 - a handler cannot break the loop (6.22)
                _RUNNING.attempt = None
                self._finish(attempt, False, exc)
            else:
                _RUNNING.attempt = None
                self._finish(attempt, True, result)

    async def _run_async(self, attempt: Attempt) -> None:
        task = attempt.task = asyncio.current_task()
        assert task is not None  # this coroutine runs as a task
        if attempt.cancelled.is_set() and attempt.cancelled.reason is SHUTDOWN:
            task.cancel()
        try:
            with run_span(attempt.job, attempt.lease.attempt):
                result = await attempt.handler(attempt.job.payload, attempt.ctx)
        except BaseException as exc:  # noqa: BLE001
            self._finish(attempt, False, exc)
        else:
            self._finish(attempt, True, result)

    def _finish(self, attempt: Attempt, ok: bool, value: Any) -> None:
        """The handler returned (ok) or raised: queue its settlement, unless it cannot settle.
        Never raises (it runs on a slot thread or the event loop)."""
        try:
            if attempt.progress is not None and not attempt.detached:
                attempt.progress.flush()  # the last report is stored before the attempt settles
            if attempt.detached:
                return  # stop() gave up on it: write nothing, count nothing (6.26)
            with attempt.settle_lock:
                taken = not attempt.settling
                attempt.settling = True
            if not taken:  # the handler transaction or the timeout already settled it
                self._release(attempt)
                return
            if attempt.timed_out:
                ok, value = False, "job timed out"
            elif ok:
                if value is not None:
                    try:
                        value = v.dump_json(value, "the handler's result", self.store.max_payload_bytes)
                    except Exception as exc:  # noqa: BLE001 - whatever a strange object raises
                        # The attempt fails with TN1004 (retried within max_attempts), never loops.
                        ok, value = False, exc if isinstance(exc, UnstorableValue) else UnstorableValue(
                            f"the handler's result cannot be stored: {v.error_message(exc)}")
            elif isinstance(value, asyncio.CancelledError) and attempt.cancelled.reason is SHUTDOWN:
                value = "the worker stopped while the job ran (cancelled)"
            self._done.put((attempt, ok, value))
        except BaseException:  # last resort: the lease expires, the job is reclaimed
            log.exception("finishing job %s failed", attempt.job.id)

    def _completed_all(self, attempts: list[Attempt]) -> None:
        """A batch whose completions all landed, with no observer to tell: count it and free its
        slots in one lock round and one wake-up."""
        for a in attempts:
            a.settled = True
        self._count("completions", len(attempts))
        self._release(*attempts)

    def _release(self, *attempts: Attempt) -> None:
        """Free the attempts' slots (one lock round for all of them) and wake the dispatcher."""
        with self._lock:
            mine = self._attempts
            for a in attempts:
                mine.pop(a.token, None)
                if a is self._quarantine:
                    self._quarantine = None
                if a.credited:
                    a.credited = False
                    self._credit -= 1
        registry = self.store._attempts
        for a in attempts:
            registry.pop(a.token, None)
            a.finished.set()
        self._wake.set()

    # -- settling --------------------------------------------------------------------------------
    def _complete_loop(self, done: _queue.SimpleQueue) -> None:
        with self.store.engine.deadline(self.call_timeout, self):
            self._settle_loop(done)

    def _settle_loop(self, done: _queue.SimpleQueue) -> None:
        get, get_nowait = done.get, done.get_nowait
        jobs = self.store._jobs
        while True:
            first = get()
            batch = [first] if first is not None else []
            stopping = first is None
            while not stopping and len(batch) < MAX_SETTLE_BATCH:
                try:
                    item = get_nowait()
                except _queue.Empty:
                    if len(batch) >= self._settle_target or not self._running_besides(len(batch)):
                        break
                    try:  # other handlers are about to finish: let them join this batch
                        item = get(timeout=SETTLE_GATHER_S)
                    except _queue.Empty:
                        break
                if item is None:  # one per settler: leave the others theirs
                    stopping = True
                    break
                batch.append(item)
            if batch:
                try:
                    self._settle(jobs, batch)
                except Exception:  # the settler never dies; the leases expire
                    log.exception("settling %d job(s) failed", len(batch))
            if stopping:
                return

    def _running_besides(self, settling: int) -> bool:
        """Attempts still running (beyond ``settling`` finished ones and those being settled)."""
        return len(self._attempts) - self._credit - settling > 0

    def _settle(self, jobs, batch) -> None:  # noqa: C901 - the settlement batch, kept in one place
        completes, fails = [], []
        for attempt, ok, value in batch:
            if attempt.detached:
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
                    self._start_attempts(claims, want)  # after the release: in flight stays <= N
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
            job = self._retrying(lambda: jobs.snooze(attempt.lease, snooze.delay_ms / 1000), [attempt])
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
        (a refused workflow resume fails with TN2069, checklist decision 6); ``error`` is the
        exception the handler raised (given to ``on_outcome`` as ``exception``)."""
        attempt.settled = True
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
            left = [a for a in self._attempts.values() if not a.settled and not a.detached]
            for a in left:
                a.detached = True
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

    # -- cancel requests (jobs.request_cancel; tenure.cancel_watch) ----------------------------------
    def _has_attempts(self) -> bool:
        return bool(self._attempts)

    def _attempts_of(self, job_ids: set[str]) -> list[Attempt]:
        with self._lock:
            return [a for a in self._attempts.values() if a.job.id in job_ids]

    def _cancel_requested(self, a: Attempt) -> None:
        """An operator asked to cancel this attempt's job: set ``ctx.cancelled`` (reason
        :data:`CANCEL_REQUESTED`) and settle the attempt ``cancelled`` with its own current lease.
        The handler keeps its slot until it returns (its late result is ignored). With a handler
        transaction open (the settle lock held) the next look settles it."""
        if a.settling or a.settled or a.lost is not None or a.detached:
            return
        a.cancel(CANCEL_REQUESTED)
        if not a.settle_lock.acquire(blocking=False):
            return
        try:
            if a.settling:
                return
            a.settling = True
            try:
                refused = settle_requested(self.store, a.lease)
            except Exception as exc:  # noqa: BLE001 - storage trouble: looked at again next turn
                a.settling = False
                log.warning("settling the cancel request of job %s failed: %s", a.job.id, exc)
                return
        finally:
            a.settle_lock.release()
        a.settled = True
        if refused is not None:
            a.lost = refused  # another attempt or an operator settled it first
            self._count("lost_settlements")
            self._outcome(a, "lost", code=refused.code, reason=str(refused))
        else:
            a.operator_cancelled = True
            self._count("cancellations")
            worker_log.event(logging.INFO, a.job, a.lease.attempt, "cancelled", "cancelled (cancel requested)",
                             self.owner)
            self._outcome(a, "cancelled", code=CANCEL_REQUESTED.code, reason=str(CANCEL_REQUESTED))
        self._check_exhausted()

    def _end_unsettled(self, attempt: Attempt) -> None:
        attempt.settled = True
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

    # -- renewals and timeouts ---------------------------------------------------------------------
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
                attempts = [a for a in self._attempts.values() if not a.settling and a.lost is None]
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
                        if not a.settling and a.lost is None:
                            self._renew(jobs, a)
                    finally:
                        a.settle_lock.release()

    def _tell_if_expired(self, a: Attempt, now: float) -> None:
        """Renewal off: once the attempt's lease has expired, set its event with LeaseExpired as
        the reason (docs/spec.md 6.14), so the handler can stop: it can no longer settle. The
        lease ends at ``expires_at`` on the store's injected clock; without one, ``lease_ms``
        after the claim on this process's monotonic clock (never earlier than the store's own
        expiry, since the claim began before it returned). The settlement, if the handler still
        returns, meets the fence and is recorded with the fence's code. An open handler
        transaction holds the lease (its row is locked, its completion judged at the open; see
        :mod:`tenure.handler_tx`), so nothing is said while one is open."""
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
                if a.operator_cancelled or a.settled:
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

    def _handler_tx_completed(self, a: Attempt) -> None:
        """The handler transaction committed the completion: count it once."""
        a.settling = True
        a.settled = True
        self._count("completions")
        self._outcome(a, "completed")
        self._check_exhausted()

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
            if a.settling:
                return
            a.settling = True
            if not self._timeout_settle(a):
                a.settling = False  # storage trouble: the handler's return settles it
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
        a.settled = True
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


async def _await(awaitable: Any) -> Any:
    return await awaitable
