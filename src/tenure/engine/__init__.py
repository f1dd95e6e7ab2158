"""Engines: one per database. ``create_engine(url)`` picks one by the URL's scheme."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidURL
from ..redact import redact_url  # re-exported: the one redaction, tenure.redact
from .base import Engine
from .urls import dialect_of

__all__ = ["Engine", "create_engine", "redact_url"]


def create_engine(url: str, **options: Any) -> Engine:
    """The engine for ``url``: ``sqlite:///path`` (or ``sqlite://:memory:``), ``postgresql://...``."""
    if dialect_of(url) == "sqlite":
        from .sqlite.engine import SQLiteEngine

        return SQLiteEngine(url, **options)
    try:
        from .postgres.engine import PostgresEngine
    except ImportError as exc:  # psycopg missing
        raise InvalidURL(
            "the PostgreSQL engine needs psycopg 3: pip install 'tenure[postgres]'"
        ) from exc
    return PostgresEngine(url, **options)
