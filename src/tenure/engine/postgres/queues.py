"""PostgreSQL queries for the queue registry, policies and dead letters (mixed into the session)."""

from __future__ import annotations


class PostgresQueuesMixin:
    """Queue-registry methods of the PostgreSQL session (see tenure.queues)."""
