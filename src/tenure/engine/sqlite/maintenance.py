"""SQLite queries for schedules, leadership, the worker registry and maintenance sweeps."""

from __future__ import annotations


class SQLiteMaintenanceMixin:
    """Schedule, leader and maintenance methods of the SQLite session (see tenure.maintenance)."""
