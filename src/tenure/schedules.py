"""Cron schedules: ``store.schedules`` (add, remove, get, list) and the firing of due schedules.

A schedule enqueues one job of ``kind`` at each boundary of its cron expression, read in its time
zone (see :mod:`tenure.cron` for the daylight-saving rules). Firing is exactly once per boundary
however many processes and hosts run it, because it is decided IN THE DATABASE, twice over:

1. a compare-and-set moves the schedule's ``next_fire_at`` on from the boundary the caller planned
   from; only one caller can, and the jobs are inserted in the SAME transaction, so a caller that
   loses the race inserts nothing;
2. each fire's job id is deterministic, ``cron:<name>:<fire epoch ms>`` (``cron:<name>#<key>:<ms>``
   for a keyed schedule), and an enqueue of an existing id changes nothing.

So any node may fire schedules (the maintenance service does it on every worker process, about
once a second); none needs to be the leader.

Boundaries missed while nothing ran are handled by the schedule's ``catch_up`` policy:

* ``"latest"`` (default): fire only the most recent missed boundary, once — a worker that was down
  for a day runs an hourly report once, not 24 times;
* ``"all"``: fire every missed boundary (in batches of :data:`FIRE_BATCH` per pass);
* ``"none"``: fire nothing that is late by more than the misfire grace
  (:data:`DEFAULT_MISFIRE_GRACE_MS`), and plan from now.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from . import _validate as v
from . import enqueue_options as eo
from .cron import Cron, parse
from .errors import InvalidArgument, InvalidSchedule, TenureError

if TYPE_CHECKING:
    from .engine.rows import NewJob, ScheduleRow
    from .store import Store

log = logging.getLogger("tenure.schedules")

CATCH_UP_POLICIES: tuple[str, ...] = ("latest", "all", "none")
DEFAULT_CATCH_UP = "latest"
#: Under ``catch_up="none"``, a boundary fired at most this late still counts as on time.
DEFAULT_MISFIRE_GRACE_MS = 60_000
#: Most fires one schedule makes in one pass (``catch_up="all"`` after a long outage).
FIRE_BATCH = 500
#: Most due schedules one pass looks at.
DUE_BATCH = 200
@dataclass(frozen=True, slots=True)
class Schedule:
    """A stored schedule. Times are epoch ms; ``next_fire_at`` is None when it never fires again;
    ``paused_at`` is when :meth:`Schedules.pause` paused it (None: active)."""

    name: str
    key: str
    cron: str
    tz: str
    kind: str
    payload: Any
    queue: str | None
    options: dict[str, Any] = field(default_factory=dict)
    catch_up: str = DEFAULT_CATCH_UP
    last_fire_at: int | None = None
    next_fire_at: int | None = None
    created_at: int = 0
    updated_at: int = 0
    paused_at: int | None = None

    @property
    def paused(self) -> bool:
        """True while the schedule is paused: it fires nothing until resumed."""
        return self.paused_at is not None


def _row_to_schedule(r: ScheduleRow) -> Schedule:
    return Schedule(r.name, r.key, r.cron, r.tz, r.kind, None if r.payload is None else json.loads(r.payload),
                    r.queue, json.loads(r.options) if r.options else {}, r.catch_up, r.last_fire_at,
                    r.next_fire_at, r.created_at, r.updated_at, r.paused_at)


def fire_job_id(name: str, key: str, fire_ms: int) -> str:
    """The deterministic id of the job a schedule enqueues for the boundary ``fire_ms``."""
    return f"cron:{name}:{fire_ms}" if not key else f"cron:{name}#{key}:{fire_ms}"


def fire_time(job_id: str) -> int | None:
    """The boundary (epoch ms) a schedule's job was fired for, read from its id; None for a job
    no schedule made. (``ctx.job.run_at`` equals it too, until a retry moves ``run_at``.)"""
    if not isinstance(job_id, str) or not job_id.startswith("cron:"):
        return None
    tail = job_id.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


@lru_cache(maxsize=1024)
def _parsed(cron: str, tz: str) -> Cron:
    return parse(cron, tz)


def _jsonable(value: Any) -> Any:
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    return value


class Schedules:
    """``store.schedules``: the schedule registry, and the firing of due schedules."""

    def __init__(self, store: Store) -> None:
        self._store = store

    # -- registry ------------------------------------------------------------------------------
    def add(self, name: str, cron: str, kind: str, payload: Any = None, *, tz: str = "UTC",
            queue: str | None = None, key: str = "", options: dict[str, Any] | None = None,
            catch_up: str = DEFAULT_CATCH_UP) -> Schedule:
        """Create or change the schedule ``(name, key)``: at each boundary of ``cron`` in zone ``tz``,
        enqueue ``kind`` with ``payload`` on ``queue`` (None: the default queue) with the enqueue
        ``options`` (``max_attempts``, ``priority``, ``timeout``, ``singleton_key``, ...: the
        ``schedule`` column of docs/enqueue-options.md).

        An invalid expression, an unknown zone or a bad policy raises :class:`InvalidSchedule`
        naming the field (``exc.details["field"]``); nothing is written. Re-adding an identical
        schedule changes nothing; changing its expression or zone plans the next fire from now;
        its ``last_fire_at`` survives either way. Answers the stored schedule.
        """
        row, parsed = self._validate(name, cron, kind, payload, tz, queue, key, options, catch_up)
        store = self._store
        with store._session() as s:
            now = store._now_or(s, store._now())
            row["next_fire_at"] = parsed.next_after(now)
            got = s.schedule_upsert(row, now)
            if got is None:
                got = s.schedule_get(row["name"], row["key"])
        assert got is not None  # the upsert changed nothing: the schedule is there as given
        return _row_to_schedule(got)

    def _validate(self, name, cron, kind, payload, tz, queue, key, options, catch_up) -> tuple[dict, Cron]:
        v.name(name, "schedule name")
        if not isinstance(key, str):
            raise InvalidSchedule(f"key must be a string, got {type(key).__name__}", field="key")
        if key:
            v.name(key, "schedule key")
        if len(name) + len(key) > 200:
            raise InvalidArgument("a schedule's name and key together must be at most 200 characters")
        v.name(kind, "kind")
        if queue is not None:
            v.name(queue, "queue")
        if catch_up not in CATCH_UP_POLICIES:
            raise InvalidSchedule(f"catch_up must be one of {', '.join(map(repr, CATCH_UP_POLICIES))}, "
                                  f"got {catch_up!r}", field="catch_up")
        parsed = parse(cron, tz)
        opts = {} if options is None else options
        if not isinstance(opts, dict):
            raise InvalidSchedule(f"options must be a dict of enqueue options, got {type(opts).__name__}",
                                  field="options")
        for bad in sorted(set(opts) - eo.names(eo.SCHEDULE), key=str):
            if bad in eo.OPTIONS:  # an option of other surfaces: say why not here, naming the field
                raise InvalidSchedule(eo.refusal(bad, eo.SCHEDULE).message, field=f"options.{bad}")
            raise eo.refusal(bad, eo.SCHEDULE)
        opts = {k: _jsonable(val) for k, val in opts.items()}
        # A dry run of the enqueue validates kind, payload, queue and every option now, not at 3am.
        self._build(kind, payload, queue, opts, fire_job_id(name, key, 0), 0)
        text = None if payload is None else v.dump_json(payload, "payload", self._store.max_payload_bytes)
        opts_text = json.dumps(opts, sort_keys=True, separators=(",", ":")) if opts else None
        return ({"name": name, "key": key, "cron": parsed.expression, "tz": tz, "kind": kind,
                 "payload": text, "queue": queue, "options": opts_text, "catch_up": catch_up}, parsed)

    def _build(self, kind: str, payload: Any, queue: str | None, opts: dict[str, Any], job_id: str,
               fire_ms: int) -> NewJob:
        return self._store.jobs._build(kind, payload, {**opts, "id": job_id, "run_at": fire_ms,
                                                      "queue": queue or "default"})

    def remove(self, name: str, *, key: str = "") -> bool:
        """Delete the schedule ``(name, key)``; True when it existed. Jobs it already enqueued stay."""
        v.name(name, "schedule name")
        with self._store._session() as s:
            return s.schedule_delete(name, key)

    def run_now(self, name: str, *, key: str = "") -> str | None:
        """Enqueue the schedule's job now, out of its rhythm (the dashboard's "Run now"): its kind,
        payload, queue and options, with a fresh id; the schedule's own boundaries are unchanged.
        Answers the job's id, or None when there is no schedule ``(name, key)``."""
        sched = self.get(name, key=key)
        if sched is None:
            return None
        options = dict(sched.options or {})
        return self._store.jobs.enqueue(sched.kind, sched.payload, queue=sched.queue or "default", **options)

    def pause(self, name: str, *, key: str = "") -> Schedule | None:
        """Pause the schedule ``(name, key)``: it fires nothing until :meth:`resume`, on every node,
        from the next due check on. Its row, expression and options stay, and re-adding or
        :meth:`sync` (a worker starting with ``@app.periodic``) does not resume it. Pausing a paused
        schedule changes nothing. Answers the schedule, or None when there is none."""
        v.name(name, "schedule name")
        store = self._store
        with store._session() as s:
            now = store._now_or(s, store._now())
            row = s.schedule_pause(name, key, True, None, now)
        return None if row is None else _row_to_schedule(row)

    def resume(self, name: str, *, key: str = "") -> Schedule | None:
        """Resume a paused schedule ``(name, key)``. Its next fire is planned from now: the
        boundaries that passed while it was paused are skipped whatever its ``catch_up`` policy (a
        pause means "do not run these"). Resuming an active schedule changes nothing. Answers the
        schedule, or None when there is none."""
        v.name(name, "schedule name")
        store = self._store
        with store._session() as s:
            now = store._now_or(s, store._now())
            row = s.schedule_get(name, key)
            if row is None:
                return None
            sched = _row_to_schedule(row)
            try:
                nxt = _parsed(sched.cron, sched.tz).next_after(now)
            except InvalidSchedule:  # a zone that vanished from this host's tz database
                nxt = sched.next_fire_at
            row = s.schedule_pause(name, key, False, nxt, now)
        return None if row is None else _row_to_schedule(row)

    def get(self, name: str, *, key: str = "") -> Schedule | None:
        """The schedule ``(name, key)``, or None."""
        v.name(name, "schedule name")
        with self._store._session() as s:
            row = s.schedule_get(name, key)
        return None if row is None else _row_to_schedule(row)

    def list(self, *, name: str | None = None) -> list[Schedule]:
        """Every schedule (or every key of ``name``), ordered by name then key."""
        if name is not None:
            v.name(name, "schedule name")
        with self._store._session() as s:
            rows = s.schedule_list(name)
        return [_row_to_schedule(r) for r in rows]

    def sync(self, app: Any) -> int:
        """Store the schedules an :class:`tenure.App` declared with ``@app.periodic``; answers how
        many. Workers with maintenance on do this at start; call it yourself otherwise."""
        n = 0
        for spec in list(getattr(app, "periodic_tasks", ())):
            self.add(spec["name"], spec["cron"], spec["kind"], spec.get("payload"), tz=spec.get("tz", "UTC"),
                     queue=spec.get("queue"), key=spec.get("key", ""), options=spec.get("options") or None,
                     catch_up=spec.get("catch_up", DEFAULT_CATCH_UP))
            n += 1
        return n

    # -- firing --------------------------------------------------------------------------------
    def fire_due(self, *, cancel: threading.Event | None = None,
                 misfire_grace_ms: int = DEFAULT_MISFIRE_GRACE_MS, limit: int = DUE_BATCH) -> int:
        """Fire every schedule whose next boundary has come, by the store's clock; answers how many
        jobs this call enqueued. Safe to run anywhere, any number of times, concurrently: each
        boundary is enqueued once in all (module docstring)."""
        store = self._store
        with store._session(cancel) as s:
            now = store._now_or(s, store._now())
            rows = s.schedule_due(now, limit)
        fired = 0
        for row in rows:
            if cancel is not None and cancel.is_set():
                break
            fired += self._fire(_row_to_schedule(row), now, cancel, misfire_grace_ms)
        return fired

    def _fire(self, sched: Schedule, now: int, cancel: threading.Event | None, grace_ms: int) -> int:
        store = self._store
        expected = sched.next_fire_at
        assert expected is not None
        try:
            cron = _parsed(sched.cron, sched.tz)
        except InvalidSchedule as exc:  # a zone that vanished from this host's tz database
            log.error("schedule %r cannot be planned (%s); it is left as it is", sched.name, exc)
            return 0
        if sched.catch_up == "all":
            fires = cron.fires(expected, now, FIRE_BATCH)
            nxt = cron.next_after(fires[-1]) if fires else cron.next_after(now)
        else:
            latest = cron.latest(expected, now)
            fires = [] if latest is None else [latest]
            if sched.catch_up == "none" and latest is not None and now - latest > grace_ms:
                log.info("schedule %r skips its boundary %d (%d ms late; catch_up='none')",
                         sched.name, latest, now - latest)
                fires = []
            nxt = cron.next_after(now)
        jobs: list[NewJob] = []
        for at in fires:
            try:
                jobs.append(self._build(sched.kind, sched.payload, sched.queue, sched.options,
                                        fire_job_id(sched.name, sched.key, at), at))
            except TenureError as exc:
                # Deterministic (the queue's options changed since add): skip this boundary rather
                # than retry it every second.
                log.error("schedule %r could not enqueue its %d fire: %s", sched.name, at, exc)
        last = fires[-1] if fires else sched.last_fire_at
        with store._transaction_session(cancel) as s:
            if not s.schedule_advance(name=sched.name, key=sched.key, cron=sched.cron, tz=sched.tz,
                                      expected=expected, last_fire_at=last, next_fire_at=nxt, now=now):
                return 0  # another process fired this boundary
            if jobs:
                store.queues.insert(s, jobs, store._now())
        if jobs:
            store._wake_local()
            log.debug("schedule %r fired %d job(s); next at %s", sched.name, len(jobs), nxt)
        return len(jobs)


# -- apps that declared periodic tasks ----------------------------------------------------------------

_declared: weakref.WeakSet = weakref.WeakSet()
_declared_lock = threading.Lock()


def declare(app: Any) -> None:
    """Remember that ``app`` declared periodic tasks, so a worker with maintenance on over the
    app's store stores them at start (see :meth:`Schedules.sync`)."""
    with _declared_lock:
        _declared.add(app)


def declared_for(store: Store) -> Iterable[Any]:
    """The apps with periodic tasks whose store is ``store``."""
    with _declared_lock:
        apps = list(_declared)
    return [a for a in apps if getattr(a, "_store", None) is store]
