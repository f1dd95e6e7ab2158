"""SQLite queries for the queue registry, policies and dead letters (mixed into the session)."""

from __future__ import annotations


class SQLiteQueuesMixin:
    """Queue-registry methods of the SQLite session (see tenure.queues)."""
