"""PostgreSQL read-only queries for the dashboard, the CLI and metrics (queue depth, throughput, workers).

Nothing here writes. The statements are the SQLite engine's (same names, same answers), with
psycopg's ``%(name)s`` parameters and explicit casts.
"""

from __future__ import annotations

from ..insights import InsightsMixin, InsightStatements
from ..rows import QueuedKindRow, QueueStateCount, TableSize

#: Jobs per queue per state (callers cache it for a couple of seconds).
QUEUE_STATE_COUNTS = "SELECT queue, state, count(*) FROM tenure_jobs GROUP BY queue, state"

# Due jobs a closed rate window holds back: /metrics' tenure_jobs_rate_deferred.
RATE_DEFERRED = """
SELECT j.queue, count(*) FROM tenure_jobs j
WHERE j.state IN ('pending', 'failed') AND j.waiting_on = 0 AND j.run_at <= %(now)s::bigint
  AND j.queue IN (SELECT name FROM tenure_queues WHERE rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL)
  AND EXISTS (SELECT 1 FROM tenure_rate_windows w WHERE w.queue = j.queue AND w.blocked_until > %(now)s::bigint
              AND (w.scope = 0 OR (w.scope = 1 AND w.group_key = j.group_key)))
GROUP BY j.queue ORDER BY j.queue
"""

QUEUES = """
SELECT name, paused, policy, concurrency_limit, group_limit, dead_letter, created_at, updated_at,
  rate_limit, rate_period_ms, group_rate_limit, group_rate_period_ms, fairness
FROM tenure_queues ORDER BY name
"""

#: Settled jobs in [since, until) per bucket; the predicate is tenure_jobs_settled's, so only the
#: window's index range is read.
SETTLED_BUCKETS = """
SELECT ((updated_at - %(since)s::bigint) / %(bucket)s::bigint)::bigint AS b, state, count(*)::bigint
FROM tenure_jobs
WHERE state IN ('done', 'dead', 'cancelled') AND updated_at >= %(since)s::bigint
  AND updated_at < %(until)s::bigint
GROUP BY b, state
"""

#: Failures waiting for their retry, by the minute they failed: through tenure_jobs_failed (0020).
FAILED_BUCKETS = """
SELECT ((updated_at - %(since)s::bigint) / %(bucket)s::bigint)::bigint AS b, 'failed'::text, count(*)::bigint
FROM tenure_jobs
WHERE state = 'failed' AND updated_at >= %(since)s::bigint AND updated_at < %(until)s::bigint
GROUP BY b
"""

WORKERS = """
SELECT id, host, pid, queues, kinds, concurrency, started_at, heartbeat_at, in_flight, stats
FROM tenure_workers ORDER BY heartbeat_at DESC, id LIMIT %(limit)s::int
"""

#: Queued jobs per queue and kind (dead-letter copies apart), with the oldest creation time. The
#: predicate is the claim index's (tenure_jobs_claim), so only queued rows are read; no index has
#: ``kind``, so each of them is read once (see docs/operations.md, "Unhandled kinds"). A dependent
#: still waiting for its parents (docs/composition.md) is in no claim index: it counts once eligible.
QUEUED_KINDS = """
SELECT queue, kind, origin_queue IS NOT NULL AS copies, count(*)::bigint, min(created_at)::bigint
FROM tenure_jobs WHERE state IN ('pending', 'failed') AND waiting_on = 0
GROUP BY queue, kind, origin_queue IS NOT NULL
"""

#: The planner's own size estimate: rows per page at the last vacuum or analyze, times the pages
#: the table has now (no read of the table).
SIZE = """
SELECT CASE WHEN c.relpages > 0 AND c.reltuples >= 0 THEN c.reltuples / c.relpages END,
  pg_relation_size(c.oid) / current_setting('block_size')::bigint
FROM pg_class c WHERE c.oid = 'tenure_jobs'::regclass
"""
#: Rows per page assumed for a table never vacuumed or analyzed (a no-op job's row is ~250 bytes).
DEFAULT_ROWS_PER_PAGE = 30
#: The same counts from a sample of the table's pages (the same pages every time, while the table
#: does not change: REPEATABLE), scaled by the caller; leased jobs (at most the workers' slots) are
#: counted exactly through their partial index (tenure_jobs_leased).
_SAMPLE = "TABLESAMPLE SYSTEM (%(sample)s) REPEATABLE (0)"
SAMPLED_STATE_COUNTS = f"""
SELECT queue, state, count(*) FROM tenure_jobs {_SAMPLE} WHERE state <> 'leased' GROUP BY queue, state
"""
LEASED_COUNTS = "SELECT queue, state, count(*) FROM tenure_jobs WHERE state = 'leased' GROUP BY queue, state"
SAMPLED_QUEUED_KINDS = QUEUED_KINDS.replace("FROM tenure_jobs", f"FROM tenure_jobs {_SAMPLE}")

SCHEMA_VERSIONS = "SELECT version, name, applied_at FROM tenure_migrations ORDER BY version"


class PostgresInsightsMixin(InsightsMixin):
    """The read model on PostgreSQL: its statements; the methods are engine/insights.py's."""

    def insight_queue_counts(self, sample: float | None = None) -> list[QueueStateCount]:
        """Every queue and state that has rows, with its count; with ``sample`` (a percentage of
        the pages), leased exact and the rest estimated from that sample."""
        if sample is None:
            return [QueueStateCount(*r) for r in self._conn.execute(QUEUE_STATE_COUNTS)]
        scale = 100.0 / sample
        rows = self._conn.execute(SAMPLED_STATE_COUNTS, {"sample": sample}).fetchall()
        return [QueueStateCount(q, s, round(n * scale)) for q, s, n in rows] + \
            [QueueStateCount(*r) for r in self._conn.execute(LEASED_COUNTS)]

    def insight_size(self) -> TableSize:
        """The planner's estimate of the jobs table's rows, and its pages now."""
        per_page, pages = self._conn.execute(SIZE).fetchone()
        return TableSize(round((DEFAULT_ROWS_PER_PAGE if per_page is None else per_page) * pages), int(pages))

    def insight_queued_kinds(self, sample: float | None = None) -> list[QueuedKindRow]:
        """Queued jobs per queue, kind and copy-or-not, with the oldest ``created_at``; with
        ``sample``, estimated from that percentage of the pages (the oldest is the sample's)."""
        if sample is None:
            return [QueuedKindRow(q, k, bool(c), int(n), int(o))
                    for q, k, c, n, o in self._conn.execute(QUEUED_KINDS).fetchall()]
        scale = 100.0 / sample
        return [QueuedKindRow(q, k, bool(c), round(n * scale), int(o))
                for q, k, c, n, o in self._conn.execute(SAMPLED_QUEUED_KINDS, {"sample": sample}).fetchall()]

    _insight_sql = InsightStatements(
        queues=QUEUES, rate_deferred=RATE_DEFERRED, settled_buckets=SETTLED_BUCKETS,
        failed_buckets=FAILED_BUCKETS, workers=WORKERS, schema_versions=SCHEMA_VERSIONS)
