"""PostgreSQL read-only queries for the dashboard and metrics (throughput, queue depth per state)."""

from __future__ import annotations


class PostgresInsightsMixin:
    """Dashboard/metrics read methods of the PostgreSQL session."""
