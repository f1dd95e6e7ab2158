"""PostgreSQL queries for schedules, leadership, the worker registry and maintenance sweeps."""

from __future__ import annotations


class PostgresMaintenanceMixin:
    """Schedule, leader and maintenance methods of the PostgreSQL session (see tenure.maintenance)."""
