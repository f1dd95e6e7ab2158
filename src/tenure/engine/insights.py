"""The read model's session methods (``Session.insight_*``, engine/base.py) whose code both
dialects share, written once: each dialect's ``insights.py`` supplies its statements, and keeps
the methods that differ (counting by sample is PostgreSQL's).
Nothing here writes; :mod:`tenure.insights` turns the answers into records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .rows import (
    QueueSummaryRow,
    RateDeferred,
    SchemaVersion,
    SettledBucket,
    WorkerRow,
)


@dataclass(frozen=True, slots=True)
class InsightStatements:
    """One dialect's read-model statements (parameters by name: ``now``, ``since``, ``until``,
    ``bucket``, ``limit``)."""

    queues: str
    rate_deferred: str
    settled_buckets: str
    failed_buckets: str
    workers: str
    schema_versions: str


class InsightsMixin:
    """The ``insight_*`` methods of a session, over its dialect's :class:`InsightStatements`."""

    _conn: Any
    _insight_sql: ClassVar[InsightStatements]

    def insight_queues(self) -> list[QueueSummaryRow]:
        """Every registered queue, by name."""
        return [QueueSummaryRow(*r) for r in self._conn.execute(self._insight_sql.queues)]

    def insight_rate_deferred(self, now: int) -> list[RateDeferred]:
        sql = self._insight_sql.rate_deferred
        return [RateDeferred(r[0], int(r[1])) for r in self._conn.execute(sql, {"now": now})]

    def insight_settled_buckets(self, since: int, until: int, bucket_ms: int) -> list[SettledBucket]:
        """Jobs whose latest settlement (done, dead, cancelled, or a failure now waiting for its
        retry) happened in ``[since, until)``, per bucket and state."""
        params = {"since": since, "until": until, "bucket": bucket_ms}
        sql = self._insight_sql
        return [SettledBucket(*r) for text in (sql.settled_buckets, sql.failed_buckets)
                for r in self._conn.execute(text, params)]

    def insight_workers(self, limit: int) -> list[WorkerRow]:
        """Rows of the worker registry, most recent heartbeat first (JSON columns as text)."""
        return [WorkerRow(*r) for r in self._conn.execute(self._insight_sql.workers, {"limit": limit})]

    def insight_schema_versions(self) -> list[SchemaVersion]:
        """Every applied migration."""
        return [SchemaVersion(*r) for r in self._conn.execute(self._insight_sql.schema_versions)]
