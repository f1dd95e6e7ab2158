"""PostgreSQL read-only queries for the dashboard, the CLI and metrics (queue depth, throughput, workers).

Nothing here writes. The statements are the SQLite engine's (same names, same answers), with
psycopg's ``%(name)s`` parameters and explicit casts.
"""

from __future__ import annotations

from typing import Any

from ..rows import QueuedKindRow

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

SCHEMA_VERSIONS = "SELECT version, name, applied_at FROM tenure_migrations ORDER BY version"


class PostgresInsightsMixin:
    """Dashboard/metrics read methods of the PostgreSQL session (read-only)."""

    _conn: Any

    def insight_queue_counts(self) -> list[tuple[str, str, int]]:
        """``(queue, state, count)`` for every queue and state that has rows."""
        return self._conn.execute(QUEUE_STATE_COUNTS).fetchall()

    def insight_queues(self) -> list[tuple]:
        """``(name, paused, policy, concurrency_limit, group_limit, dead_letter, created_at,
        updated_at, rate_limit, rate_period_ms, group_rate_limit, group_rate_period_ms, fairness)``
        per registered queue, by name."""
        return self._conn.execute(QUEUES).fetchall()

    def insight_rate_deferred(self, now: int) -> list[tuple[str, int]]:
        return [(r[0], int(r[1])) for r in self._conn.execute(RATE_DEFERRED, {"now": now}).fetchall()]

    def insight_settled_buckets(self, since: int, until: int, bucket_ms: int) -> list[tuple[int, str, int]]:
        """``(bucket index, state, count)`` of jobs whose latest settlement (done, dead, cancelled,
        or a failure now waiting for its retry) happened in ``[since, until)``."""
        params = {"since": since, "until": until, "bucket": bucket_ms}
        conn = self._conn
        return conn.execute(SETTLED_BUCKETS, params).fetchall() + conn.execute(FAILED_BUCKETS, params).fetchall()

    def insight_workers(self, limit: int) -> list[tuple]:
        """Rows of the worker registry, most recent heartbeat first (JSON columns as text)."""
        return self._conn.execute(WORKERS, {"limit": limit}).fetchall()

    def insight_queued_kinds(self) -> list[QueuedKindRow]:
        """Queued jobs per queue, kind and copy-or-not, with the oldest ``created_at``."""
        return [QueuedKindRow(q, k, bool(c), int(n), int(o))
                for q, k, c, n, o in self._conn.execute(QUEUED_KINDS).fetchall()]

    def insight_schema_versions(self) -> list[tuple[int, str, int]]:
        """``(version, name, applied_at)`` of every applied migration."""
        return self._conn.execute(SCHEMA_VERSIONS).fetchall()
