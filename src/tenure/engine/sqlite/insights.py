"""SQLite read-only queries for the dashboard, the CLI and metrics (queue depth, throughput, workers).

Nothing here writes. Every statement reads committed rows through the session's connection and
answers plain tuples; engine/insights.py makes them records.
"""

from __future__ import annotations

from ..insights import InsightsMixin, InsightStatements
from ..rows import QueuedKindRow, QueueStateCount

#: Jobs per queue per state. A full pass over the jobs table (one covering read per row): callers
#: cache the answer for a couple of seconds (see tenure.insights).
QUEUE_STATE_COUNTS = "SELECT queue, state, count(*) FROM tenure_jobs GROUP BY queue, state"

#: The queue registry as the dashboard shows it.
# Due jobs a closed rate window holds back: /metrics' tenure_jobs_rate_deferred.
RATE_DEFERRED = """
SELECT j.queue, count(*) FROM tenure_jobs j
WHERE j.state IN ('pending', 'failed') AND j.waiting_on = 0 AND j.run_at <= :now
  AND j.queue IN (SELECT name FROM tenure_queues WHERE rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL)
  AND EXISTS (SELECT 1 FROM tenure_rate_windows w WHERE w.queue = j.queue AND w.blocked_until > :now
              AND (w.scope = 0 OR (w.scope = 1 AND w.group_key = j.group_key)))
GROUP BY j.queue ORDER BY j.queue
"""

QUEUES = """
SELECT name, paused, policy, concurrency_limit, group_limit, dead_letter, created_at, updated_at,
  rate_limit, rate_period_ms, group_rate_limit, group_rate_period_ms, fairness
FROM tenure_queues ORDER BY name
"""

#: Settled jobs (done, dead, cancelled) whose last change falls in [since, until), per bucket of
#: ``bucket`` ms. The predicate is the tenure_jobs_settled partial index's, so only the window is read.
SETTLED_BUCKETS = """
SELECT (updated_at - :since) / :bucket AS b, state, count(*) FROM tenure_jobs
WHERE state IN ('done', 'dead', 'cancelled') AND updated_at >= :since AND updated_at < :until
GROUP BY b, state
"""

#: Jobs now waiting for a retry (state failed) whose failure falls in the window, per bucket.
#: Failures waiting for their retry, by the minute they failed: through tenure_jobs_failed (0020).
FAILED_BUCKETS = """
SELECT (updated_at - :since) / :bucket AS b, 'failed', count(*) FROM tenure_jobs
WHERE state = 'failed' AND updated_at >= :since AND updated_at < :until
GROUP BY b
"""

WORKERS = """
SELECT id, host, pid, queues, kinds, concurrency, started_at, heartbeat_at, in_flight, stats
FROM tenure_workers ORDER BY heartbeat_at DESC, id LIMIT :limit
"""

#: Queued jobs per queue and kind (dead-letter copies apart), with the oldest creation time. The
#: predicate is the claim index's (tenure_jobs_claim), so only queued rows are read; no index has
#: ``kind``, so each of them is read once (see docs/operations.md, "Unhandled kinds"). A dependent
#: still waiting for its parents (docs/composition.md) is in no claim index: it counts once eligible.
QUEUED_KINDS = """
SELECT queue, kind, origin_queue IS NOT NULL AS copies, count(*), min(created_at)
FROM tenure_jobs WHERE state IN ('pending', 'failed') AND waiting_on = 0
GROUP BY queue, kind, origin_queue IS NOT NULL
"""

SCHEMA_VERSIONS = "SELECT version, name, applied_at FROM tenure_migrations ORDER BY version"


class SQLiteInsightsMixin(InsightsMixin):
    """The read model on SQLite: its statements; the methods are engine/insights.py's."""

    def insight_queue_counts(self, sample: float | None = None) -> list[QueueStateCount]:
        """Every queue and state that has rows, with its count (always exact)."""
        return [QueueStateCount(*r) for r in self._conn.execute(QUEUE_STATE_COUNTS)]

    def insight_size(self) -> None:
        """No estimate without a pass over the table: the overview counts exactly."""
        return None

    def insight_queued_kinds(self, sample: float | None = None) -> list[QueuedKindRow]:
        """Queued jobs per queue, kind and copy-or-not, with the oldest ``created_at``."""
        return [QueuedKindRow(q, k, bool(c), int(n), int(o))
                for q, k, c, n, o in self._conn.execute(QUEUED_KINDS).fetchall()]

    _insight_sql = InsightStatements(
        queues=QUEUES, rate_deferred=RATE_DEFERRED, settled_buckets=SETTLED_BUCKETS,
        failed_buckets=FAILED_BUCKETS, workers=WORKERS, schema_versions=SCHEMA_VERSIONS)
