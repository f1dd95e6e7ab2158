"""Read-only views of a store for operators: queue depth, throughput, workers, schema.

The dashboard, the CLI (``tenure stats``, ``tenure queues list``) and the metrics collector all
read through :class:`Insights`, which runs the engines' ``insight_*`` queries (each dialect's SQL
lives in ``tenure/engine/<dialect>/insights.py``) and answers plain records. Nothing here writes:
actions go through the public API (``store.jobs.cancel``, ``store.queues.pause``, ...).

Throughput is read from the jobs themselves, so it needs no event log: a job counts once, in the
minute of its LATEST settlement (a job that failed twice then completed counts as one completion).
Swept jobs no longer count. Exact per-attempt counters are the worker's (``tenure.metrics``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import kinds as _kinds
from .maintenance import DEFAULT_WORKER_DEAD_AFTER_MS
from .rate_window import stored_rate_text
from .records import STATES

if TYPE_CHECKING:
    from .engine.rows import QueueStateCount, QueueSummaryRow, TableSize, WorkerRow
    from .store import Store

log = logging.getLogger("tenure.dashboard")

#: A worker whose last heartbeat is older than this is shown as not alive: the maintenance
#: service's own threshold for reaping it (heartbeats come every few seconds).
WORKER_STALE_MS = DEFAULT_WORKER_DEAD_AFTER_MS
#: How long a computed overview is reused (the dashboard polls every 2 s; many browsers and a
#: Prometheus scrape then cost one pass over the jobs table, not one each).
DEFAULT_TTL_S = 1.5
#: An overview is also reused for this many times as long as it took to compute, so a big table
#: costs the store at most about 1/COST_FACTOR of one connection's time, however many viewers.
COST_FACTOR = 5
#: An overview that took longer than this is refreshed in the background while viewers keep the
#: previous one (with its age); a cheaper one is recomputed in the request.
INLINE_REFRESH_MAX_S = 0.25
#: The throughput window and its buckets.
WINDOW_MS = 3_600_000
BUCKET_MS = 60_000
MAX_WORKERS_SHOWN = 500
#: Above this many jobs (the database's estimate, read without a pass over the table) the
#: overview's counts are estimated from a sample of :data:`SAMPLE_PAGES` pages instead of counted:
#: a full count of 10 000 000 rows takes seconds (docs/operations.md, "The overview at size").
#: Only PostgreSQL estimates; SQLite always counts.
EXACT_BELOW = 1_000_000
SAMPLE_PAGES = 3_000


@dataclass(frozen=True, slots=True)
class QueueSummary:
    """One queue: its registry row and how many of its jobs are in each state."""

    name: str
    paused: bool
    counts: dict[str, int]
    policy: str = "standard"
    concurrency_limit: int | None = None
    group_limit: int | None = None
    dead_letter: str | None = None
    #: Starts per period ("50/s"), for the queue and for each group key; the fairness mode.
    rate_limit: str | None = None
    group_rate_limit: str | None = None
    fairness: str | None = None
    #: Due jobs a closed rate window holds back now (the queue's, or their group's).
    rate_deferred: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True, slots=True)
class Throughput:
    """Settlements per bucket over a window ending at ``until``: one dict per bucket, oldest
    first, with ``t`` (bucket start, epoch ms) and a count per state (done, failed, dead,
    cancelled)."""

    since: int
    until: int
    bucket_ms: int
    buckets: list[dict[str, int]]

    def totals(self) -> dict[str, int]:
        out = {"done": 0, "failed": 0, "dead": 0, "cancelled": 0}
        for b in self.buckets:
            for k in out:
                out[k] += b[k]
        return out


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One row of the worker registry (``tenure_workers``), with liveness judged at ``now``."""

    id: str
    host: str | None
    pid: int | None
    queues: Any
    kinds: Any
    concurrency: int | None
    started_at: int
    heartbeat_at: int
    in_flight: int
    stats: Any
    alive: bool


@dataclass(frozen=True, slots=True)
class Overview:
    """Everything the dashboard's first page shows, read at ``now`` (the store's clock)."""

    now: int
    counts: dict[str, int]
    queues: list[QueueSummary]
    throughput: Throughput
    workers_alive: int
    workers_total: int
    store: str = field(default="")
    #: How long it took to read, and when (this host's wall clock, epoch ms): viewers show its age.
    computed_ms: int = 0
    read_at: int = 0
    #: Queued jobs no live worker will run (:mod:`tenure.kinds`); None when not read.
    kinds: _kinds.KindsReport | None = None
    #: True when the counts (and the kinds' counts) are estimates from a sample of the table
    #: (leased jobs are still counted exactly); see :data:`EXACT_BELOW`.
    estimated: bool = False


def _json_or_text(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


class Insights:
    """Operator reads over one store. Thread-safe; the overview is cached for ``ttl`` seconds."""

    def __init__(self, store: Store, *, ttl: float = DEFAULT_TTL_S, worker_stale_ms: int = WORKER_STALE_MS,
                 exact_below: int = EXACT_BELOW, sample_pages: int = SAMPLE_PAGES):
        self.store = store
        self.exact_below = exact_below
        self.sample_pages = sample_pages
        self.ttl = ttl
        self.worker_stale_ms = worker_stale_ms
        self._lock = threading.Lock()
        self._cached: tuple[float, float, Overview] | None = None  # (monotonic at, seconds, value)
        self._stale = False
        self._refreshing = False

    # -- clock ---------------------------------------------------------------------------------
    def now_ms(self) -> int:
        """The store's clock: the injected one, else the database's (PostgreSQL) or the wall."""
        store = self.store
        store.jobs  # noqa: B018 - open (and migrate) the store, raising its coded error here
        with store._session() as s:
            return store._now_or(s, store._now())

    # -- reads ---------------------------------------------------------------------------------
    def queues(self) -> list[QueueSummary]:
        """Every registered queue (and any queue that only has jobs), by name, with counts."""
        store = self.store
        store.jobs  # noqa: B018
        with store._session() as s:
            registry = s.insight_queues()
            counts = s.insight_queue_counts()
        return self._summaries(registry, counts)

    @staticmethod
    def _summaries(registry: Sequence[QueueSummaryRow], counts: Sequence[QueueStateCount]) -> list[QueueSummary]:
        per: dict[str, dict[str, int]] = {}
        for c in counts:
            per.setdefault(c.queue, dict.fromkeys(STATES, 0))[c.state] = int(c.jobs)
        out = []
        seen = set()
        for q in registry:
            seen.add(q.name)
            out.append(QueueSummary(q.name, bool(q.paused), per.get(q.name, dict.fromkeys(STATES, 0)),
                                    q.policy or "standard", q.concurrency_limit, q.group_limit, q.dead_letter,
                                    stored_rate_text(q.rate_limit, q.rate_period_ms),
                                    stored_rate_text(q.group_rate_limit, q.group_rate_period_ms),
                                    q.fairness))
        for name in sorted(set(per) - seen):
            out.append(QueueSummary(name, False, per[name]))
        out.sort(key=lambda q: q.name)
        return out

    def throughput(self, *, window_ms: int = WINDOW_MS, bucket_ms: int = BUCKET_MS,
                   now: int | None = None) -> Throughput:
        """Settlements per ``bucket_ms`` over the last ``window_ms`` (default: per minute, one hour)."""
        store = self.store
        store.jobs  # noqa: B018
        with store._session() as s:
            now = store._now_or(s, store._now()) if now is None else now
            return self._throughput(s, now, window_ms, bucket_ms)

    @staticmethod
    def _throughput(session: Any, now: int, window_ms: int, bucket_ms: int) -> Throughput:
        n = max(1, -(-window_ms // bucket_ms))
        # Align buckets to whole bucket_ms so a bucket is the same minute from one poll to the next.
        until = now - now % bucket_ms + bucket_ms
        since = until - n * bucket_ms
        buckets = [{"t": since + i * bucket_ms, "done": 0, "failed": 0, "dead": 0, "cancelled": 0}
                   for i in range(n)]
        for row in session.insight_settled_buckets(since, until, bucket_ms):
            b = int(row.bucket)
            if 0 <= b < n and row.state in buckets[b]:
                buckets[b][row.state] += int(row.jobs)
        return Throughput(since, until, bucket_ms, buckets)

    def workers(self, *, now: int | None = None, limit: int = MAX_WORKERS_SHOWN) -> list[WorkerInfo]:
        """The worker registry, most recent heartbeat first, each judged alive or not at ``now``."""
        store = self.store
        store.jobs  # noqa: B018
        with store._session() as s:
            now = store._now_or(s, store._now()) if now is None else now
            rows = s.insight_workers(limit)
        return [self._worker(r, now) for r in rows]

    def _worker(self, r: WorkerRow, now: int) -> WorkerInfo:
        beat = int(r.heartbeat_at)
        return WorkerInfo(r.id, r.host, r.pid, _json_or_text(r.queues), _json_or_text(r.kinds), r.concurrency,
                          int(r.started_at), beat, int(r.in_flight or 0), _json_or_text(r.stats),
                          now - beat <= self.worker_stale_ms)

    def unhandled_kinds(self, *, now: int | None = None) -> _kinds.KindsReport:
        """Queued jobs no live worker will run, by queue and kind (see :mod:`tenure.kinds`)."""
        return _kinds.read(self.store, now=now, live_ms=self.worker_stale_ms)

    def schema_versions(self) -> list[tuple[int, str, int]]:
        """``(version, name, applied_at)`` of every migration applied to this database."""
        store = self.store
        store.jobs  # noqa: B018
        with store._session() as s:
            return [(int(r.version), r.name, int(r.applied_at)) for r in s.insight_schema_versions()]

    def overview(self, *, fresh: bool = False) -> Overview:
        """Counts per state and per queue, throughput over the last hour, and workers alive.

        Reused for ``ttl`` seconds, or :data:`COST_FACTOR` times as long as it took to compute
        when that is longer. When it must be refreshed: recomputed in this call if it was cheap
        (or there is none yet, or ``fresh``); otherwise refreshed in the background while this
        call answers the previous one (``read_at`` says how old it is)."""
        cached = self._cached
        if cached is not None and not fresh:
            at, took, ov = cached
            if not self._stale and time.monotonic() - at < max(self.ttl, COST_FACTOR * took):
                return ov
            if took > INLINE_REFRESH_MAX_S:
                self._refresh_in_background()
                return ov
        with self._lock:
            cached = self._cached
            if cached is not None and not fresh and not self._stale and \
                    time.monotonic() - cached[0] < max(self.ttl, COST_FACTOR * cached[1]):
                return cached[2]  # another request refreshed it while this one waited
            return self._refresh()

    def _refresh(self) -> Overview:
        self._stale = False
        t0 = time.monotonic()
        ov = self._read_overview()
        took = time.monotonic() - t0
        ov = dataclasses.replace(ov, computed_ms=int(took * 1000), read_at=time.time_ns() // 1_000_000)
        self._cached = (time.monotonic(), took, ov)
        return ov

    def _refresh_in_background(self) -> None:
        with self._lock:
            if self._refreshing:
                return
            self._refreshing = True

        def run() -> None:
            try:
                with self._lock:
                    self._refresh()
            except Exception as exc:  # noqa: BLE001 - viewers keep the last overview; logged
                log.warning("refreshing the dashboard overview failed: %s", exc)
            finally:
                self._refreshing = False

        threading.Thread(target=run, name="tenure-insights", daemon=True).start()

    def invalidate(self) -> None:
        """Mark the overview stale (after an action, so the next read shows its effect)."""
        self._stale = True

    def _read_overview(self) -> Overview:
        store = self.store
        store.jobs  # noqa: B018
        # Three sessions, not one: on SQLite each holds the store gate, and other callers (the
        # jobs page, a local worker) get their turn between the long reads.
        with store._session() as s:
            now = store._now_or(s, store._now())
            registry = s.insight_queues()
            sample = self._sample_percent(s.insight_size())
            counts = s.insight_queue_counts(sample)
            deferred = {r.queue: r.jobs for r in s.insight_rate_deferred(now)} \
                if any(r.rate_limit or r.group_rate_limit for r in registry) else {}
        with store._session() as s:
            tp = self._throughput(s, now, WINDOW_MS, BUCKET_MS)
        with store._session() as s:
            workers = [self._worker(r, now) for r in s.insight_workers(MAX_WORKERS_SHOWN)]
        with store._session() as s:
            queued = s.insight_queued_kinds(sample)
        live = [_kinds.LiveWorker(_kinds.parse_names(w.queues), _kinds.parse_names(w.kinds))
                for w in workers if w.alive]
        report = _kinds.classify(queued, live, [r.dead_letter for r in registry if r.dead_letter is not None], now)
        queues = [dataclasses.replace(q, rate_deferred=deferred[q.name]) if q.name in deferred else q
                  for q in self._summaries(registry, counts)]
        totals = dict.fromkeys(STATES, 0)
        for q in queues:
            for state, n in q.counts.items():
                totals[state] = totals.get(state, 0) + n
        return Overview(now, totals, queues, tp, sum(1 for w in workers if w.alive), len(workers),
                        store.engine.describe(), kinds=report, estimated=sample is not None)

    def _sample_percent(self, size: TableSize | None) -> float | None:
        """The percentage of the jobs table's pages to sample, or None to count every row."""
        if size is None or size.rows < self.exact_below:
            return None
        pct = 100.0 * self.sample_pages / max(size.pages, 1)
        return None if pct >= 100 else pct
