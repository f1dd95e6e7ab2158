"""Queued jobs that no live worker can run: "unhandled kinds" (docs/operations.md, "Unhandled kinds").

A job is claimed only by a worker that has a handler for its kind, so a job enqueued as
``__main__.add`` (a task defined in a script run directly), or whose module the worker never
imported, or whose task was renamed, would wait forever. Every worker publishes the kinds it
handles, and the queues it claims from, in its registry row (``tenure_workers``), rewritten by
each heartbeat (every few seconds, :mod:`tenure.maintenance`); a worker is **live** while its
heartbeat is fresher than :data:`LIVE_MS`. This module compares those rows with the queued jobs
(pending, or failed and waiting for a retry) grouped by queue and kind, and sorts what no live
worker will run into two answers:

- **unhandled**: some live worker claims from the queue, and none of them handles the kind. This
  is the alarming case (the job will never run as things are): ``tenure stats`` and the dashboard
  warn, ``/metrics`` has ``tenure_unhandled_jobs{queue,kind}``. A near-miss handled kind is named
  (``tasks.add`` for ``__main__.add``).
- **unserved**: no live worker claims from the queue at all, counted per queue
  (``tenure_unserved_jobs{queue}``). With no worker running (a deploy in progress, a store only
  enqueued to) every queue is unserved and nothing is "unhandled": which kinds a worker will
  handle is unknown until one runs.

Dead letters wait for an operator by design (docs/queues.md): jobs in a queue some queue names as
its ``dead_letter``, and dead-letter copies anywhere, count only against workers that name their
queue; with none, they are neither unhandled nor unserved.

The read is one pass over the queued rows (the claim index's predicate; no index has ``kind``)
plus the worker registry; the dashboard runs it with its overview, under the same cache.
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .engine.rows import QueuedKindRow, WorkerRow
from .maintenance import DEFAULT_WORKER_DEAD_AFTER_MS

if TYPE_CHECKING:
    from .records import Job
    from .store import Store

__all__ = ["LIVE_MS", "KindsReport", "LiveWorker", "UnhandledKind", "UnservedQueue", "classify", "live_workers",
           "near_misses", "parse_names", "read", "unhandled_at_enqueue", "unrunnable", "warn_unrunnable", "why_waiting"]

log = logging.getLogger("tenure.worker")

#: A worker whose last heartbeat is older than this is not live (the maintenance service's own
#: threshold for reaping its row; heartbeats come every 5 s).
LIVE_MS = DEFAULT_WORKER_DEAD_AFTER_MS
#: Registry rows read per report (most recent heartbeat first, so the live ones come first).
MAX_WORKERS_READ = 10_000
#: At most this many near-miss kinds are named per unhandled kind.
MAX_NEAR = 3


@dataclass(frozen=True, slots=True)
class LiveWorker:
    """What one live worker claims: ``queues`` None means every queue but the dead-letter ones;
    ``kinds`` None (a registry row without kinds) means any kind."""

    queues: frozenset[str] | None
    kinds: frozenset[str] | None

    def serves(self, queue: str, *, letters: bool) -> bool:
        """True when this worker claims from ``queue``; ``letters``: the jobs are dead letters
        (taken only by a worker naming their queue)."""
        return queue in self.queues if self.queues is not None else not letters

    def handles(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds


@dataclass(frozen=True, slots=True)
class UnhandledKind:
    """Queued jobs of ``kind`` in ``queue`` that no live worker handles, though some serve the queue."""

    queue: str
    kind: str
    #: Queued jobs (pending, or failed and waiting for a retry).
    count: int
    #: ``created_at`` of the oldest of them (epoch ms) and its age at the report's ``now``.
    oldest_created_at: int
    age_ms: int
    #: Handled kinds that look like this one (same last dotted name, or a close spelling).
    near: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UnservedQueue:
    """Queued jobs in a queue no live worker claims from."""

    queue: str
    count: int
    oldest_created_at: int
    age_ms: int
    kinds: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class KindsReport:
    """What no live worker will run, read at ``now`` (the store's clock)."""

    now: int
    workers_alive: int
    unhandled: list[UnhandledKind] = field(default_factory=list)
    unserved: list[UnservedQueue] = field(default_factory=list)

    @property
    def unhandled_jobs(self) -> int:
        """How many queued jobs are of a kind no live worker handles."""
        return sum(u.count for u in self.unhandled)

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (``tenure stats --json``, ``/api/overview``)."""
        return {"unhandled_jobs": self.unhandled_jobs,
                "unhandled_kinds": [{**asdict(u), "near": list(u.near)} for u in self.unhandled],
                "unserved_queues": [{**asdict(u), "kinds": list(u.kinds)} for u in self.unserved]}


def parse_names(value: Any) -> frozenset[str] | None:
    """A registry row's ``queues`` or ``kinds`` column (JSON text or a parsed list) as a set; None
    when it holds no list (NULL: every queue, or any kind)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, list):
        return frozenset(v for v in value if isinstance(v, str))
    return None


def live_workers(rows: Iterable[WorkerRow], now: int, live_ms: int = LIVE_MS) -> list[LiveWorker]:
    """The live workers among worker registry rows (JSON columns as text or parsed)."""
    out = []
    for r in rows:
        if now - int(r.heartbeat_at) <= live_ms:
            out.append(LiveWorker(parse_names(r.queues), parse_names(r.kinds)))
    return out


def near_misses(kind: str, handled: Iterable[str], limit: int = MAX_NEAR) -> tuple[str, ...]:
    """Handled kinds that look like ``kind``: the same last dotted name first (``tasks.add`` for
    ``__main__.add``), then close spellings (``email.send`` for ``emails.send``)."""
    pool = sorted(set(handled) - {kind})
    tail = kind.rsplit(".", 1)[-1]
    out = [k for k in pool if k.rsplit(".", 1)[-1] == tail]
    out += [k for k in difflib.get_close_matches(kind, pool, n=limit, cutoff=0.8) if k not in out]
    return tuple(out[:limit])


def classify(queued: Iterable[QueuedKindRow], workers: Sequence[LiveWorker], letter_queues: Iterable[str],
             now: int) -> KindsReport:
    """Sort queued jobs by who can run them (see the module docstring): ``queued`` as answered by
    ``Session.insight_queued_kinds``, ``workers`` the live ones, ``letter_queues`` the queues
    some queue names as its dead-letter queue."""
    letters_q = set(letter_queues)
    unhandled: dict[tuple[str, str], list[int]] = {}
    unserved: dict[str, list[Any]] = {}
    for row in queued:
        letters = row.copies or row.queue in letters_q
        servers = [w for w in workers if w.serves(row.queue, letters=letters)]
        if not servers:
            if not letters:
                u = unserved.setdefault(row.queue, [0, row.oldest_created_at, set()])
                u[0] += row.jobs
                u[1] = min(u[1], row.oldest_created_at)
                u[2].add(row.kind)
            continue
        if any(w.handles(row.kind) for w in servers):
            continue
        h = unhandled.setdefault((row.queue, row.kind), [0, row.oldest_created_at])
        h[0] += row.jobs
        h[1] = min(h[1], row.oldest_created_at)
    handled_in: dict[str, set[str]] = {}
    everywhere: set[str] = set()
    for w in workers:
        everywhere |= w.kinds or set()
    out_h = []
    for (queue, kind), (n, oldest) in sorted(unhandled.items()):
        if queue not in handled_in:
            handled_in[queue] = set().union(*[w.kinds or set() for w in workers
                                               if w.serves(queue, letters=False) or w.serves(queue, letters=True)])
        near = near_misses(kind, handled_in[queue]) or near_misses(kind, everywhere)
        out_h.append(UnhandledKind(queue, kind, n, oldest, max(0, now - oldest), near))
    out_u = [UnservedQueue(q, n, oldest, max(0, now - oldest), tuple(sorted(kinds)))
             for q, (n, oldest, kinds) in sorted(unserved.items())]
    return KindsReport(now, len(workers), out_h, out_u)


def read(store: Store, *, now: int | None = None, live_ms: int = LIVE_MS) -> KindsReport:
    """What no live worker will run in ``store``, at ``now`` (default: the store's clock). Three
    short reads: the queue registry, the worker registry, and one pass over the queued rows."""
    store.jobs  # noqa: B018 - open (and migrate) the store, raising its coded error here
    with store._session() as s:
        now = store._now_or(s, store._now()) if now is None else now
        letters = [r.dead_letter for r in s.insight_queues() if r.dead_letter is not None]
        workers = live_workers(s.insight_workers(MAX_WORKERS_READ), now, live_ms)
    with store._session() as s:
        queued = s.insight_queued_kinds()
    return classify(queued, workers, letters, now)


def unrunnable(store: Store, queues: Sequence[str] | None, kinds: Iterable[str], *,
               live_ms: int = LIVE_MS) -> tuple[list[UnhandledKind], list[UnhandledKind]]:
    """Queued kinds in the queues a worker claims from (``queues`` None: every queue but the
    dead-letter ones) that it has no handler for: ``(no live worker handles them, another live
    worker does)``. Each names its near misses among ``kinds``."""
    own = LiveWorker(None if queues is None else frozenset(queues), frozenset(kinds))
    store.jobs  # noqa: B018
    with store._session() as s:
        now = store._now_or(s, store._now())
        letters_q = {r.dead_letter for r in s.insight_queues() if r.dead_letter is not None}
        others = live_workers(s.insight_workers(MAX_WORKERS_READ), now, live_ms)
    with store._session() as s:
        queued = s.insight_queued_kinds()
    alone: dict[tuple[str, str], list[int]] = {}
    for row in queued:
        letters = row.copies or row.queue in letters_q
        if not own.serves(row.queue, letters=letters) or own.handles(row.kind):
            continue
        n = alone.setdefault((row.queue, row.kind), [0, row.oldest_created_at, 0])
        n[0] += row.jobs
        n[1] = min(n[1], row.oldest_created_at)
        if any(w.serves(row.queue, letters=letters) and w.handles(row.kind) for w in others):
            n[2] = 1
    nobody: list[UnhandledKind] = []
    elsewhere: list[UnhandledKind] = []
    for (queue, kind), (count, oldest, other) in sorted(alone.items()):
        u = UnhandledKind(queue, kind, count, oldest, max(0, now - oldest), near_misses(kind, own.kinds or ()))
        (elsewhere if other else nobody).append(u)
    return nobody, elsewhere


def unhandled_at_enqueue(store: Store, queue: str, kind: str, *, live_ms: int = LIVE_MS) -> UnhandledKind | None:
    """For a job of ``kind`` just put in ``queue``: when live workers claim from the queue and none
    of them handles the kind, the unhandled kind (count 1, its near misses among the kinds they
    handle); None when one handles it, or when no live worker serves the queue (unknown yet: see
    the module docstring). Two short registry reads, no scan of the queued rows."""
    store.jobs  # noqa: B018
    with store._session() as s:
        now = store._now_or(s, store._now())
        letters = any(r.dead_letter == queue for r in s.insight_queues())
        workers = [w for w in live_workers(s.insight_workers(MAX_WORKERS_READ), now, live_ms)
                   if w.serves(queue, letters=letters)]
    if not workers or any(w.handles(kind) for w in workers):
        return None
    handled = {k for w in workers for k in (w.kinds or ())}
    return UnhandledKind(queue, kind, 1, now, 0, near_misses(kind, handled))


def why_waiting(store: Store, job: Job, *, live_ms: int = LIVE_MS) -> str | None:
    """Why a queued ``job`` (pending, or failed and waiting for its retry) has not run, from the
    registries only (no scan of the queued rows): it waits on parents, it is due later, its queue
    is paused, no live worker claims from its queue, or those that do lack its kind (naming near
    misses). None when nothing here explains it: it is due and a live worker handles it."""
    if job.state not in ("pending", "failed"):
        return None
    if job.waiting_on:
        return f"it waits on {job.waiting_on} parent job(s) (store.jobs.dependencies)"
    with store._session() as s:
        now = store._now_or(s, store._now())
        queues = s.insight_queues()
        workers = live_workers(s.insight_workers(MAX_WORKERS_READ), now, live_ms)
    if job.run_at > now:
        at = datetime.fromtimestamp(job.run_at / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
        return f"it is due at {at} UTC" + (" (its retry)" if job.state == "failed" else "")
    if any(q.name == job.queue and q.paused for q in queues):
        return f"queue {job.queue!r} is paused (tenure queues resume {job.queue})"
    letters = any(q.dead_letter == job.queue for q in queues)
    serving = [w for w in workers if w.serves(job.queue, letters=letters)]
    if not serving:
        return f"no live worker claims from queue {job.queue!r}: start one (tenure worker module:app)"
    if not any(w.handles(job.kind) for w in serving):
        near = near_misses(job.kind, {k for w in serving for k in (w.kinds or ())})
        hint = f"; did you mean {' or '.join(repr(k) for k in near)}?" if near else ""
        return f"the live workers of queue {job.queue!r} do not handle kind {job.kind!r}{hint}"
    return None


def _age(ms: int) -> str:
    s = ms // 1000
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172_800:
        return f"{s // 3600}h"
    return f"{s // 86_400}d"


def warn_unrunnable(store: Store, queues: Sequence[str] | None, kinds: Iterable[str]) -> list[UnhandledKind]:
    """At a worker's start: log a WARNING (logger ``tenure.worker``) for each queued kind in its
    queues that it cannot run and no other live worker handles, naming near misses; INFO for the
    ones another live worker handles. Answers the warned ones. Never raises: a failed check is
    logged and answers []."""
    try:
        nobody, elsewhere = unrunnable(store, queues, kinds)
    except Exception as exc:  # noqa: BLE001 - a diagnostic never prevents work
        log.info("could not check for queued kinds this worker cannot run: %s", exc)
        return []
    for u in nobody:
        hint = ""
        if u.near:
            hint = f"; did you mean {' or '.join(repr(k) for k in u.near)}?"
            if u.kind.startswith("__main__."):
                hint += " (a task defined in a script run as __main__ gets the kind '__main__.<name>')"
        log.warning("%d queued job(s) of kind %r in queue %r (oldest %s) have no handler here and no live "
                    "worker handles that kind: they will wait until one does%s", u.count, u.kind, u.queue,
                    _age(u.age_ms), hint, extra={"kind": u.kind, "queue": u.queue, "count": u.count,
                                                 "near": list(u.near)})
    for u in elsewhere:
        log.info("%d queued job(s) of kind %r in queue %r have no handler here (another live worker "
                 "handles that kind)", u.count, u.kind, u.queue)
    return nobody
