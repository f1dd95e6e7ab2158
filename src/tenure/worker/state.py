"""What every part of a worker shares: its validated configuration, its counters and outcome
reports, its in-flight attempts and the slot bookkeeping.

The parts (:mod:`~tenure.worker.executor`, :mod:`~tenure.worker.producer`,
:mod:`~tenure.worker.completer`, :mod:`~tenure.worker.keeper`,
:mod:`~tenure.worker.cancel_watch`) each add their methods to :class:`WorkerState`;
:class:`tenure.worker.Worker` puts them together and starts and stops the threads.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import queue as _queue
import socket
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _validate as v
from .. import durations
from ..errors import InvalidType
from ..limits import call_timeout_for_lease
from .attempt import Attempt
from .config import MAX_CLAIM_BATCH as MAX_CLAIM_BATCH  # re-exported
from .config import WorkerConfig
from .events import Milestones
from .slots import SlotPool

if TYPE_CHECKING:
    from ..maintenance import Maintainer
    from ..store import Store
    from .cancel_watch import CancelWatch

log = logging.getLogger("tenure.worker")



def _is_async(fn: Callable[..., Any]) -> bool:
    target = fn if inspect.isroutine(fn) else type(fn).__call__
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target)


def _new_instance() -> str:
    """A worker instance id, unique per process and per run: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class WorkerState:
    """A worker's configuration and shared state (see :class:`tenure.worker.Worker` for the
    options); every part of the worker reads and writes it under ``_lock``."""

    # Set at every start() (Worker._start_threads): the run's events, queues and slot accounting.
    _stop: threading.Event  # stop claiming; cancel handlers
    _halt: threading.Event  # after the grace: keeper exits, gate waits are withdrawn
    _wake: threading.Event
    _reserved: int  # slots promised to a claim in progress (see Producer._reserve)
    _credit: int  # slots of credited attempts (being settled by a settle-and-claim)
    _backlog: bool  # the last claim came back full: more jobs are likely waiting
    _held: bool  # the last claim came back short at a queue that holds jobs back (Jobs.limit_held)
    _leading: bool  # this worker's watcher is the waiter of its kinds and queues (Producer._watch)
    # A job reclaimed from an expired lease (its last worker was lost, maybe BY it) runs alone:
    # while it runs, this worker claims nothing more (docs/guarantees.md, "Liveness").
    _quarantine: Attempt | None
    _slots: SlotPool
    _done: _queue.SimpleQueue
    _loop: asyncio.AbstractEventLoop | None
    _settle_target: int
    # SQLite (Engine.exclusive_gate): the watch thread claims for what it hears (Producer._heard)
    # and a lone sync attempt is settled by its own slot thread (Completer._to_settle), holding
    # _settle_token, which the settler holds for each batch and stop() takes for good.
    _claims_on_watch: bool
    _dispatching: bool  # the dispatcher is not waiting for a wake-up (Producer._heard)
    _inline_settle: bool
    _settle_token: threading.Lock
    _cancel_watch: CancelWatch
    _watcher: Any  # the run's cross-process watcher (Worker.start), or None; CancelWatch shares its connection

    def __init__(self, store: Store, handlers: dict[str, Callable[..., Any]], config: WorkerConfig | None = None,
                 **options: Any) -> None:
        if not isinstance(handlers, dict) or not handlers:
            raise InvalidType("handlers must be a non-empty dict of {kind: callable}")
        for kind, fn in handlers.items():
            v.name(kind, "handler kind")
            if not callable(fn):
                raise InvalidType(f"the handler for {kind!r} is not callable: {fn!r}")
        cfg = WorkerConfig.build(config, options)  # every option checked here, once (one verdict per input)
        #: The validated configuration this worker runs with (:class:`tenure.WorkerConfig`).
        self.config = cfg
        self.store = store
        self.handlers = dict(handlers)
        self.kinds = sorted(self.handlers)
        self.queues = None if cfg.queues is None else list(cfg.queues)
        self.concurrency = cfg.concurrency
        self.poll_interval = cfg.poll_interval
        self.lease_ms = cfg.lease_ms
        #: Each database call of this worker must answer within this many seconds, else it is cut
        #: and fails like an unreachable store (tenure.limits; PostgreSQL only, SQLite is local).
        self.call_timeout = call_timeout_for_lease(self.lease_ms, getattr(store.engine, "call_timeout", None))
        self._claim_group = object()  # the deadline group of this worker's claims (see stop())
        #: This worker's identity, unique per process and per worker (``host:pid:random``): every
        #: lease it claims is stamped with it (``lease_instance``), and the maintenance reaper and
        #: the lost-claim release match leases by it. ``owner`` (defaulting to it) is diagnostics.
        self.instance = _new_instance()
        self.owner = cfg.owner or self.instance
        self.renew = cfg.renew
        self.on_outcome = cfg.on_outcome
        self.backoff_base_ms = durations.to_ms(cfg.backoff_base)
        self.backoff_cap_ms = durations.to_ms(cfg.backoff_cap)
        self.stop_grace = cfg.stop_grace
        self.default_timeout_ms = None if cfg.timeout is None else max(1, durations.to_ms(cfg.timeout))
        self.claim_batch = cfg.claim_batch
        self.watch = cfg.watch
        self.maintenance = cfg.maintenance
        self.max_jobs = cfg.max_jobs
        self.zombie_share = cfg.zombie_share
        self.zombie_grace = self.stop_grace if cfg.zombie_grace is None else cfg.zombie_grace
        #: Set once ``max_jobs`` attempts have settled (never set without ``max_jobs``).
        self.exhausted = threading.Event()
        #: Milestones tests and hosts can wait on (:mod:`tenure.worker.events`).
        self.events = Milestones()
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
        self._wake_deferred = False  # a wake-up waits for a free slot (see _wake_if_free)
        self._running = False
        self._threads: list[threading.Thread] = []
        self._watch_thread: threading.Thread | None = None
        self._leading = False
        self._lead_tries = 0  # calls of Watcher.lead by the watch thread (a test signal)
        self._generation = 0  # bumps at every start(): a cancelled loop can never be revived

    # -- counting and outcomes ---------------------------------------------------------------------
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

    def _release(self, *attempts: Attempt) -> None:
        """Free the attempts' slots (one lock round for all of them) and wake the dispatcher when
        it has a slot to claim for (:meth:`_wake_if_free`) AND there may be work for it: the last
        claim came back full (a backlog), or short at a queue that holds jobs back while a lease
        stands (a concurrency or group limit, a singleton/stately/strict_fifo policy: the lease
        just settled may have freed one), or a wake-up waits for a slot, or a reclaimed attempt
        ends (the claims it held back are due). Otherwise the last claim found nothing more and
        the freed slot waits for the next wake-up or poll: claiming now would find nothing too
        (at light load that empty claim was a transaction and a commit per job)."""
        with self._lock:
            mine = self._attempts
            due = self._wake_deferred or self._backlog or self._held
            for a in attempts:
                mine.pop(a.token, None)
                if a is self._quarantine:
                    self._quarantine = None
                    due = True
                if a.credited:
                    a.credited = False
                    self._credit -= 1
            wake = due and self._free_or_defer()
        registry = self.store._attempts
        for a in attempts:
            registry.pop(a.token, None)
            a.finished.set()
        if wake:
            self._wake.set()

    def _free_or_defer(self) -> bool:
        """Called holding ``_lock``: True when a slot is free for the dispatcher to claim (and
        any deferred wake-up is then taken); else the wake-up is deferred until one is."""
        if self.concurrency - len(self._attempts) - self._reserved + self._credit > 0:
            self._wake_deferred = False
            return True
        self._wake_deferred = True
        return False

    def _wake_if_free(self) -> None:
        """Wake the dispatcher now if a slot is free, else as soon as one frees up (the next
        :meth:`_release` or short claim wakes it). With every slot taken the dispatcher has
        nothing to claim for; waking it anyway (the store's own commits move SQLite's
        ``data_version``, so the watcher fires after every settled batch) was a thread switch
        per batch, the largest single cost of a busy SQLite worker (docs/performance.md,
        "SQLite drain")."""
        with self._lock:
            wake = self._free_or_defer()
        if wake:
            self._wake.set()
