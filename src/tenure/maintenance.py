"""The maintenance service: cron firing, worker heartbeats, leadership and sweeps, run for you.

One :class:`Maintainer` per store (``store.maintenance``) is shared by that store's workers: the
first worker that starts (with ``maintenance=True``, the default) starts its thread, the last one
that stops stops it — quiescently: the thread is joined and nothing touches the database after
``release`` returns. ``tenure maintain --once`` (and tests) call :meth:`Maintainer.run_once`.

Duties, each with its own cadence (defaults below, all in :class:`MaintenanceConfig`):

========================  ========  ==========================================================
duty                      who       what
========================  ========  ==========================================================
fire schedules            any node  enqueue each due cron boundary once (:mod:`tenure.schedules`;
                                    idempotent in the database, so no leader is needed)
heartbeat                 any node  upsert one ``tenure_workers`` row per local worker
elect                     any node  take or renew the leader lease (``tenure_leader``)
expire queued jobs        leader    pending/failed jobs past ``keep_until`` (their queue's
                                    retention) become ``dead``: "expired: not started within
                                    retention" (not dead-lettered: they never ran)
delete settled jobs       leader    done/dead/cancelled jobs past ``updated_at + delete_after``
                                    (default 7 days) are deleted with their checkpoints
reap dead workers         leader    a worker row silent for ``worker_dead_after`` is deleted,
                                    and the live leases of the worker INSTANCE it recorded end
                                    at once (the fence refuses the vanished attempt; the next
                                    claim recovers the job); never matched by owner string
vacuum backstop           leader    PostgreSQL: ``VACUUM (ANALYZE)`` or ``ANALYZE`` of
                                    ``tenure_jobs`` when autovacuum is off for it or falling
                                    behind, at most once per ``vacuum_interval`` of the store's
                                    clock (:mod:`tenure.table_care` says when)
========================  ========  ==========================================================

Attempts whose worker vanished are otherwise recovered by lease expiry, as spec §5 says:
the next claim takes an expired lease. The maintainer does not fail them (the attempt count
already grows at the reclaim), it only shortens long leases of workers known to be dead.

Sweeps run in bounded batches (at most 1000 rows per transaction, :data:`SWEEP_BATCH`), at most
:data:`MAX_BATCHES_PER_PASS` per pass; a pass that hit the cap runs again after
:data:`BACKLOG_INTERVAL` instead of its cadence. A database outage is logged (once per outage per
duty), counted in ``stats()["errors"]``, and retried at the next cadence; it never kills the thread.

Time: "now" is the store's clock (the injected ``clock``, else SQLite's wall clock or the
PostgreSQL server's clock), so tests move time without sleeping; only the cadence is real time.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from . import _validate as v
from . import durations
from .engine.rows import RetentionMark
from .errors import InvalidArgument, InvalidType, OperationWithdrawn
from .limits import MAINTENANCE_CALL_TIMEOUT_S, RELEASE_CALL_TIMEOUT_S
from .schedules import DEFAULT_MISFIRE_GRACE_MS, declared_for
from .table_care import TableCare, health_of

if TYPE_CHECKING:
    from .store import Store
    from .worker import Worker

log = logging.getLogger("tenure.maintenance")
_ALWAYS = threading.Event()  # a cancellation that is always set: "do not wait for the store"
_ALWAYS.set()

#: The leased role in ``tenure_leader`` that the sweeping node holds.
LEADER_ROLE = "maintenance"
#: How long a leader's lease lasts; it is renewed every third of it, and a dead leader's role is
#: taken over at most this long after its last renewal.
DEFAULT_LEADER_TTL_MS = 15_000
DEFAULT_SCHEDULE_INTERVAL = 1.0
DEFAULT_HEARTBEAT_INTERVAL = 5.0
DEFAULT_EXPIRE_INTERVAL = 30.0
DEFAULT_DELETE_INTERVAL = 60.0
DEFAULT_REAP_INTERVAL = 30.0
#: A worker whose heartbeat is older than this is dead (12 missed heartbeats by default).
DEFAULT_WORKER_DEAD_AFTER_MS = 60_000
#: Settled jobs without a ``delete_after`` of their own are deleted this long after they settled.
DEFAULT_DELETE_AFTER_MS = 7 * 24 * 3_600_000
#: Rows per sweep transaction (the most a sweep ever holds locks on at once).
SWEEP_BATCH = 1_000
MAX_BATCHES_PER_PASS = 10
#: A sweep that hit its batch cap comes back this soon (seconds) instead of at its cadence.
BACKLOG_INTERVAL = 1.0
DEFAULT_VACUUM_INTERVAL = 30.0
#: The backstop's cap on dead tuples in tenure_jobs, whatever autovacuum's fraction says (why
#: this value: docs/maintenance.md, "The row cap"; :mod:`tenure.table_care` applies it).
DEFAULT_VACUUM_MAX_DEAD = 1_000_000
EXPIRED_ERROR = "expired: not started within retention"
_REPEAT_WARNING = 60.0
#: How long release() lets a duty in flight finish before it cuts it (seconds).
STOP_CUT_AFTER = 0.25



#: Deprecated ``_ms`` spellings of maintenance options (earlier releases documented them): old
#: name -> the option it now is, in seconds. Accepted with a DeprecationWarning by
#: :class:`MaintenanceConfig` and ``store.maintenance.configure``.
DEPRECATED_MS = {"leader_ttl_ms": "leader_ttl", "worker_dead_after_ms": "worker_dead_after",
                 "delete_after_ms": "delete_after", "misfire_grace_ms": "misfire_grace"}
_INTERVALS = ("schedule_interval", "heartbeat_interval", "expire_interval", "delete_interval", "reap_interval",
              "vacuum_interval")


@durations.accepts_ms_names(DEPRECATED_MS)
@dataclass(frozen=True, slots=True)
class MaintenanceConfig:
    """Cadences and horizons (every duration in seconds: a number, a timedelta or text like
    ``"7d"``, see :mod:`tenure.durations`) and batch bounds of the maintenance service. Every
    field is validated at construction (:class:`InvalidArgument` / :class:`InvalidType`); the
    ``_ms`` names of earlier releases are accepted with a :class:`DeprecationWarning`."""

    schedule_interval: float = DEFAULT_SCHEDULE_INTERVAL
    heartbeat_interval: float = DEFAULT_HEARTBEAT_INTERVAL
    expire_interval: float = DEFAULT_EXPIRE_INTERVAL
    delete_interval: float = DEFAULT_DELETE_INTERVAL
    reap_interval: float = DEFAULT_REAP_INTERVAL
    vacuum_interval: float = DEFAULT_VACUUM_INTERVAL
    #: How long a leader's lease lasts (at least 0.1 s); renewed every third of it.
    leader_ttl: float = DEFAULT_LEADER_TTL_MS / 1000
    #: A worker silent this long is dead (at least 0.1 s, longer than ``heartbeat_interval``).
    worker_dead_after: float = DEFAULT_WORKER_DEAD_AFTER_MS / 1000
    #: Settled jobs without a ``delete_after`` of their own are deleted this long after they
    #: settled; None keeps them forever.
    delete_after: float | None = DEFAULT_DELETE_AFTER_MS / 1000
    #: How late a schedule's boundary may still fire (docs/maintenance.md, "Misfires").
    misfire_grace: float = DEFAULT_MISFIRE_GRACE_MS / 1000
    batch_size: int = SWEEP_BATCH
    max_batches: int = MAX_BATCHES_PER_PASS
    #: Fire schedules on this node (False: leave it to other nodes or ``maintain --once``).
    schedules: bool = True
    #: Take part in leader election and run the sweeps when leading.
    sweeps: bool = True
    #: PostgreSQL: vacuum the jobs table when autovacuum leaves too many dead tuples (leader).
    vacuum: bool = True
    #: PostgreSQL: the most dead tuples the backstop lets the jobs table hold (None: no cap).
    vacuum_max_dead: int | None = DEFAULT_VACUUM_MAX_DEAD

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        for f in _INTERVALS:
            set_(self, f, durations.seconds(getattr(self, f), f, positive=True, maximum=86_400))
        for f in ("leader_ttl", "worker_dead_after"):
            set_(self, f, durations.seconds(getattr(self, f), f, minimum=0.1))
        set_(self, "misfire_grace", durations.seconds(self.misfire_grace, "misfire_grace"))
        set_(self, "delete_after", durations.optional_seconds(self.delete_after, "delete_after"))
        for f, lo in (("batch_size", 1), ("max_batches", 1), ("vacuum_max_dead", 1)):
            if (val := getattr(self, f)) is None and f == "vacuum_max_dead":
                continue
            if isinstance(val, bool) or not isinstance(val, int):
                raise InvalidType(f"{f} must be an integer, got {val!r}")
            if val < lo:
                raise InvalidArgument(f"{f} must be >= {lo}, got {val}")
        if self.batch_size > SWEEP_BATCH:
            raise InvalidArgument(f"batch_size must be at most {SWEEP_BATCH} (one short transaction "
                                  f"per batch), got {self.batch_size}")
        if self.worker_dead_after <= self.heartbeat_interval:
            raise InvalidArgument("worker_dead_after must be longer than heartbeat_interval, or "
                                  "live workers would be reaped")
        for f in ("schedules", "sweeps", "vacuum"):
            if not isinstance(getattr(self, f), bool):
                raise InvalidType(f"{f} must be True or False")


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One row of the worker registry (``tenure_workers``)."""

    id: str
    host: str | None
    pid: int | None
    queues: list[str] | None
    kinds: list[str] | None
    concurrency: int | None
    started_at: int
    heartbeat_at: int
    in_flight: int
    stats: dict[str, Any] | None


_COUNTERS = ("passes", "fired", "heartbeats", "elections", "leader_terms", "expired", "deleted",
             "leases_released", "workers_reaped", "vacuums", "analyzes", "schedules_synced", "errors")


class Maintainer:
    """The maintenance service of one store (see the module docstring)."""

    def __init__(self, store: Store, config: MaintenanceConfig | None = None) -> None:
        self.store = store
        self._config = config or MaintenanceConfig()
        #: This service's identity as leader candidate (one per store per process).
        self.owner = f"{socket.gethostname()}:{os.getpid()}:maint:{uuid.uuid4().hex[:8]}"
        self._state = threading.Lock()
        self._hb_lock = threading.Lock()
        self._workers: dict[int, tuple[Worker, int | None]] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._kick = threading.Event()
        self._sync_due = False
        self._leader_until = 0.0  # monotonic; we lead while now < this
        self._stats = dict.fromkeys(_COUNTERS, 0)
        self._errors: dict[str, int] = {}
        self._failing: dict[str, float] = {}
        self._pass_cond = threading.Condition()
        self._care = TableCare()

    # -- configuration -----------------------------------------------------------------------------
    @property
    def config(self) -> MaintenanceConfig:
        return self._config

    def configure(self, config: MaintenanceConfig | None = None, **changes: Any) -> MaintenanceConfig:
        """Replace the configuration (a whole :class:`MaintenanceConfig`, or some fields, durations
        in seconds); it takes effect at the next pass. Answers the new configuration. An unknown
        field is :class:`InvalidArgument` naming the nearest known one; the deprecated ``_ms``
        names warn and are converted."""
        base = config if config is not None else self._config
        if not isinstance(base, MaintenanceConfig):
            raise InvalidType("config must be a MaintenanceConfig")
        changes = durations.renamed_ms(dict(changes), DEPRECATED_MS, "maintenance")
        v.known_options(changes, [f.name for f in fields(MaintenanceConfig)], "maintenance")
        self._config = replace(base, **changes) if changes else base
        self._kick.set()
        return self._config

    # -- lifecycle (called by Worker.start / Worker.stop) --------------------------------------------
    def acquire(self, worker: Worker) -> None:
        """Register a starting worker (heartbeats begin at once); the first one starts the service.
        Makes no database call itself."""
        with self._state:
            self._workers[id(worker)] = (worker, self.store._now())
            self._sync_due = True
            if self._thread is None:
                self._stop = threading.Event()
                self._thread = threading.Thread(target=self._run, args=(self._stop,),
                                                name="tenure-maintenance", daemon=True)
                self._thread.start()
        self._kick.set()

    def release(self, worker: Worker) -> None:
        """Unregister a stopping worker and delete its registry row; the last one stops the service
        (joining its thread) and gives up leadership so another node takes over at once. When this
        returns, the service makes no further database call for it. Never raises."""
        with self._state:
            if self._workers.pop(id(worker), None) is None:
                return
            last = not self._workers
            thread, stop = (self._thread, self._stop) if last else (None, None)
            if last:
                self._thread = None
        engine = self.store.engine
        if thread is not None and stop is not None:
            stop.set()
            self._kick.set()
            if thread is not threading.current_thread():
                thread.join(STOP_CUT_AFTER)
                while thread.is_alive():  # a duty the server does not answer: cut it
                    engine.interrupt(self)
                    thread.join(0.05)
        elif not self._hb_lock.acquire(timeout=STOP_CUT_AFTER):
            engine.interrupt(self)  # a heartbeat the server does not answer holds the lock
        else:
            self._hb_lock.release()
        with self._hb_lock, engine.deadline(RELEASE_CALL_TIMEOUT_S):
            try:
                # Best effort and never blocking a worker's stop(): if the store is busy (an open
                # application transaction holds the SQLite gate, or the pool is exhausted) the
                # write is withdrawn at once, and if the server does not answer it is cut; the row
                # is reaped later (dead-worker sweep).
                with self.store._session(cancel=_ALWAYS) as s:
                    s.worker_remove([worker.owner])
                    if last and self._leader_until:
                        s.leader_release(LEADER_ROLE, self.owner)
            except Exception as exc:  # noqa: BLE001 - the row is reaped later anyway
                log.debug("could not remove worker %s from the registry: %s", worker.owner, exc)
        if last:
            self._leader_until = 0.0

    @property
    def running(self) -> bool:
        """True while the background thread runs (some worker holds the service)."""
        return self._thread is not None

    # -- one pass by hand ------------------------------------------------------------------------------
    def run_once(self, *, drain: bool = True) -> dict[str, int]:
        """Run every duty once, now, in this thread, whoever leads (every duty is safe to run
        concurrently with a leader's): fire due schedules, heartbeat local workers, expire queued
        jobs, delete settled jobs, reap dead workers, and (PostgreSQL) vacuum the jobs table if
        it holds too many dead tuples. With ``drain``, sweeps continue until nothing
        is left (still one short transaction per batch). Errors propagate (coded). Answers the
        counts per duty."""
        out = {"fired": self.fire_schedules(), "heartbeats": self.heartbeat()}
        out["expired"] = self.expire_queued(drain=drain)
        out["deleted"] = self.delete_settled(drain=drain)
        leases, workers = self.reap_workers()
        out["leases_released"] = leases
        out["workers_reaped"] = workers
        analyzes = self._stats["analyzes"]
        out["vacuums"] = int(self._config.vacuum and self.vacuum_jobs())
        out["analyzes"] = self._stats["analyzes"] - analyzes
        self._count("passes")
        return out

    # -- the duties, each one pass ------------------------------------------------------------------------
    def fire_schedules(self, cancel: threading.Event | None = None) -> int:
        """Fire every due schedule once (see :mod:`tenure.schedules`); answers jobs enqueued."""
        n = self.store.schedules.fire_due(cancel=cancel,
                                          misfire_grace_ms=durations.to_ms(self._config.misfire_grace))
        self._count("fired", n)
        return n

    def sync_schedules(self) -> int:
        """Store the ``@app.periodic`` schedules of every app over this store."""
        n = 0
        for app in declared_for(self.store):
            n += self.store.schedules.sync(app)
        self._count("schedules_synced", n)
        return n

    def heartbeat(self, cancel: threading.Event | None = None) -> int:
        """Upsert the registry row of every local worker; answers how many."""
        with self._hb_lock:
            with self._state:
                workers = list(self._workers.values())
            if not workers:
                return 0
            host, pid = socket.gethostname(), os.getpid()
            rows = []
            for w, started in workers:
                stats = w.stats()
                rows.append({"id": w.owner, "instance": w.instance, "host": host, "pid": pid,
                             "queues": None if w.queues is None else json.dumps(w.queues),
                             "kinds": json.dumps(w.kinds), "concurrency": w.concurrency,
                             "started_at": started, "in_flight": int(stats.get("in_flight", 0)),
                             "stats": json.dumps(stats, sort_keys=True)})
            with self.store._session(cancel) as s:
                s.worker_heartbeat(rows, self.store._now())
        self._count("heartbeats", len(rows))
        return len(rows)

    def elect(self, cancel: threading.Event | None = None) -> bool:
        """Take or renew the leader lease; True while this service leads. A lease that could not
        be renewed (the database is unreachable) still counts until it would have expired."""
        ttl = durations.to_ms(self._config.leader_ttl)
        t0 = time.monotonic()
        with self.store._session(cancel) as s:
            expires = s.leader_acquire(LEADER_ROLE, self.owner, ttl, self.store._now())
        self._count("elections")
        if expires is None:
            if self._leader_until:
                log.info("maintenance leadership passed to another node")
            self._leader_until = 0.0
            return False
        if not self._leader_until:
            self._count("leader_terms")
            log.info("this node (%s) now leads maintenance", self.owner)
        # Our lease runs ttl from the statement's clock reading; keep a tenth as safety margin.
        self._leader_until = t0 + ttl / 1000 * 0.9
        return True

    def is_leader(self) -> bool:
        """True while this service holds an unexpired leader lease (as of its last election)."""
        return time.monotonic() < self._leader_until

    def resign(self) -> bool:
        """Give up leadership now (another node can take it at its next election)."""
        self._leader_until = 0.0
        with self.store._session() as s:
            return s.leader_release(LEADER_ROLE, self.owner)

    def leader(self) -> tuple[str, int] | None:
        """``(owner, expires_at)`` of the current leader lease row, or None."""
        with self.store._session() as s:
            row = s.leader_get(LEADER_ROLE)
        return None if row is None else (row.owner, int(row.expires_at))

    def expire_queued(self, *, drain: bool = False, cancel: threading.Event | None = None) -> int:
        """Queued jobs past ``keep_until`` -> dead (:data:`EXPIRED_ERROR`); answers how many."""
        cfg = self._config

        def batch() -> int:
            with self.store._session(cancel) as s:
                return s.job_expire_queued(self.store._now(), EXPIRED_ERROR, cfg.batch_size)

        n = self._batches(batch, drain, cancel)
        self._count("expired", n)
        return n

    def delete_settled(self, *, drain: bool = False, cancel: threading.Event | None = None) -> int:
        """Delete settled jobs past their deletion horizon, with their checkpoints; answers how many.
        One call is one walk: the clock is read once, and each batch starts where the one before
        it stopped (:class:`~tenure.engine.rows.RetentionMark`), past the index entries those
        left behind. A job that becomes due during the walk, or that another transaction held
        when its batch passed, goes in the next call."""
        cfg = self._config
        after = None if cfg.delete_after is None else durations.to_ms(cfg.delete_after)
        mark = RetentionMark()
        clock: list[int] = []

        def batch() -> int:
            with self.store._session(cancel) as s:
                if not clock:
                    clock.append(self.store._now_or(s, self.store._now()))
                return s.job_delete_settled(clock[0], after, cfg.batch_size, mark)

        n = self._batches(batch, drain, cancel)
        self._count("deleted", n)
        return n

    def reap_workers(self, cancel: threading.Event | None = None) -> tuple[int, int]:
        """Delete worker rows silent for ``worker_dead_after`` (never this process's live
        workers) and end the leases they held; answers ``(leases released, workers reaped)``."""
        cfg = self._config
        with self._state:
            keep = [w.owner for w, _ in self._workers.values()]
        store = self.store
        with store._session(cancel) as s:
            now = store._now_or(s, store._now())
            silent_since = now - durations.to_ms(cfg.worker_dead_after)
            reaped = s.worker_reap(silent_since, keep, store._now(), cfg.batch_size)
        leases, workers = reaped.leases, reaped.workers
        if workers:
            log.warning("reaped %d dead worker(s) from the registry; %d lease(s) they held were ended",
                        workers, leases)
        self._count("leases_released", leases)
        self._count("workers_reaped", workers)
        return leases, workers

    def vacuum_jobs(self, *, force: bool = False, cancel: threading.Event | None = None) -> bool:
        """PostgreSQL: ``VACUUM (ANALYZE, INDEX_CLEANUP ON, TRUNCATE false) tenure_jobs`` when
        :mod:`tenure.table_care` finds it due (or ``force``), else ``ANALYZE`` it when only that is due (counted in ``analyzes``); at
        most one of them per ``vacuum_interval`` seconds of the store's clock unless ``force``.
        Answers whether it vacuumed. A no-op on SQLite. A set ``cancel`` cancels a running one."""
        store, care = self.store, self._care
        with store._session(cancel) as s:
            stats = s.jobs_table_stats()
            if stats is None:
                return False
            now = store._now_or(s, store._now())
            action: str | None
            if force:
                action, why = "vacuum", "forced"
            elif care.too_soon(now, self._config.vacuum_interval):
                return False
            else:
                action, why = health_of(stats, self._config.vacuum_max_dead).due()
                if action is None:
                    return False
            log.info("%s tenure_jobs: %s", "vacuuming" if action == "vacuum" else "analyzing", why)
            ran = s.jobs_vacuum(cancel, analyze_only=action == "analyze")
        if ran:
            care.last_at = now
            self._count("vacuums" if action == "vacuum" else "analyzes")
        return ran and action == "vacuum"

    def _batches(self, batch, drain: bool, cancel: threading.Event | None) -> int:
        cfg = self._config
        total = rounds = 0
        while True:
            n = batch()
            total += n
            rounds += 1
            if n < cfg.batch_size or (cancel is not None and cancel.is_set()):
                return total
            if not drain and rounds >= cfg.max_batches:
                return total

    # -- reading ---------------------------------------------------------------------------------------
    def workers(self) -> list[WorkerInfo]:
        """Every row of the worker registry (all processes, all hosts)."""
        with self.store._session() as s:
            rows = s.worker_list()
        out = []
        for r in rows:
            out.append(WorkerInfo(r.id, r.host, r.pid, None if r.queues is None else json.loads(r.queues),
                                  None if r.kinds is None else json.loads(r.kinds), r.concurrency, r.started_at,
                                  r.heartbeat_at, r.in_flight, None if r.stats is None else json.loads(r.stats)))
        return out

    def stats(self) -> dict[str, Any]:
        """Counters since construction (``fired``, ``expired``, ``deleted``, ``heartbeats``,
        ``leases_released``, ``workers_reaped``, ``errors``, ...), per-duty error counts, and the
        current ``leader``, ``running`` and ``workers`` (local workers holding the service)."""
        with self._state:
            out: dict[str, Any] = dict(self._stats)
            out["errors_by_duty"] = dict(self._errors)
            out["workers"] = len(self._workers)
        out["leader"] = self.is_leader()
        out["running"] = self.running
        return out

    def wait_for_pass(self, after: int | None = None, timeout: float = 5.0) -> bool:
        """Test hook: block until the background thread completes a pass beyond ``after`` (default:
        the current count). True when it did within ``timeout`` seconds."""
        with self._pass_cond:
            target = self._stats["passes"] if after is None else after
            return self._pass_cond.wait_for(lambda: self._stats["passes"] > target, timeout)

    # -- internals ---------------------------------------------------------------------------------------
    def _count(self, key: str, n: int = 1) -> None:
        if n:
            with self._state:
                self._stats[key] += n

    def _guard(self, duty: str, fn, *args: Any) -> Any:
        """Run one duty; a failure is logged (once per outage) and counted, never raised."""
        try:
            out = fn(*args)
        except OperationWithdrawn:
            return None
        except Exception as exc:  # noqa: BLE001 - the service outlives database outages
            with self._state:
                self._stats["errors"] += 1
                self._errors[duty] = self._errors.get(duty, 0) + 1
            now = time.monotonic()
            last = self._failing.get(duty)
            if last is None or now - last >= _REPEAT_WARNING:
                log.warning("maintenance duty %r failed (retried at its next cadence): %s", duty, exc)
                self._failing[duty] = now
            return None
        if self._failing.pop(duty, None) is not None:
            log.info("maintenance duty %r recovered", duty)
        return out

    def _run(self, stop: threading.Event) -> None:
        # Every duty's calls have a deadline (tenure.limits): a silent server cannot hang the
        # service, and release() cuts what is in flight.
        with self.store.engine.deadline(MAINTENANCE_CALL_TIMEOUT_S, self):
            self._run_duties(stop)

    def _run_duties(self, stop: threading.Event) -> None:
        start = time.monotonic()
        cfg = self._config
        due = {"heartbeat": start, "elect": start, "schedules": start,
               "expire": start + cfg.expire_interval, "delete": start + cfg.delete_interval,
               "reap": start + cfg.reap_interval, "vacuum": start}  # at once: the table may need it now
        while not stop.is_set():
            self._kick.clear()
            cfg = self._config
            now = time.monotonic()
            if self._sync_due:
                self._sync_due = False
                self._guard("sync", self.sync_schedules)
                due["heartbeat"] = now  # a new worker: register it at once
            if now >= due["heartbeat"]:
                self._guard("heartbeat", self.heartbeat, stop)
                due["heartbeat"] = now + cfg.heartbeat_interval
            if cfg.sweeps and now >= due["elect"]:
                self._guard("elect", self.elect, stop)
                due["elect"] = now + cfg.leader_ttl / 3
            if cfg.schedules and now >= due["schedules"]:
                self._guard("schedules", self.fire_schedules, stop)
                due["schedules"] = time.monotonic() + cfg.schedule_interval
            leading = cfg.sweeps and self.is_leader()
            for duty, interval, fn in (("expire", cfg.expire_interval, self._sweep_expire),
                                       ("delete", cfg.delete_interval, self._sweep_delete),
                                       ("reap", cfg.reap_interval, self._sweep_reap),
                                       ("vacuum", cfg.vacuum_interval, self._sweep_vacuum)):
                if stop.is_set() or now < due[duty]:
                    continue
                backlog = self._guard(duty, fn, stop) if leading else False
                due[duty] = time.monotonic() + (BACKLOG_INTERVAL if backlog else interval)
            with self._pass_cond:
                with self._state:
                    self._stats["passes"] += 1
                self._pass_cond.notify_all()
            # Only the duties this configuration runs: a disabled one is never rescheduled, and its
            # stale due time would make the loop spin at full speed (schedules=False or
            # sweeps=False did, taking a core from the workers it serves).
            off = set() if cfg.schedules else {"schedules"}
            if not cfg.sweeps:
                off.add("elect")
            wait = min(t for duty, t in due.items() if duty not in off) - time.monotonic()
            if wait > 0:
                self._kick.wait(min(wait, 1.0))

    def _sweep_expire(self, stop: threading.Event) -> bool:
        cfg = self._config
        return self.expire_queued(cancel=stop) >= cfg.batch_size * cfg.max_batches

    def _sweep_delete(self, stop: threading.Event) -> bool:
        cfg = self._config
        return self.delete_settled(cancel=stop) >= cfg.batch_size * cfg.max_batches

    def _sweep_reap(self, stop: threading.Event) -> bool:
        return self.reap_workers(stop)[1] >= self._config.batch_size

    def _sweep_vacuum(self, stop: threading.Event) -> bool:
        if self._config.vacuum:
            with self.store.engine.deadline(None):  # a vacuum takes what it takes; stop cancels it
                self.vacuum_jobs(cancel=stop)
        return False
