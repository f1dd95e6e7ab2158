"""Engines: one per database. ``create_engine(url)`` picks one by the URL's scheme."""

from __future__ import annotations

import re
from typing import Any

from ..errors import InvalidURL
from ..redact import redact_url  # re-exported: the one redaction, tenure.redact
from .base import Engine

__all__ = ["Engine", "create_engine", "redact_url"]


def create_engine(url: str, **options: Any) -> Engine:
    """The engine for ``url``: ``sqlite:///path`` (or ``sqlite://:memory:``), ``postgresql://...``."""
    if not isinstance(url, str) or not url:
        raise InvalidURL(f"a store URL must be a non-empty string, got {url!r}")
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        from .sqlite.engine import SQLiteEngine

        return SQLiteEngine(url, **options)
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        try:
            from .postgres.engine import PostgresEngine
        except ImportError as exc:  # psycopg missing
            raise InvalidURL(
                "the PostgreSQL engine needs psycopg 3: pip install 'tenure[postgres]'"
            ) from exc
        return PostgresEngine(url, **options)
    if "://" not in url and "=" in url:
        # A libpq connection string (host=... password=...): refused, and never echoed whole.
        raise InvalidURL(f"a store URL is needed, not a connection string ({redact_url(url)!r}); "
                         "use postgresql://user@host/db (libpq options go in the query string)")
    if ":" in url and re.fullmatch(r"[a-z][a-z0-9+.\-]*", scheme):
        raise InvalidURL(f"unknown store URL scheme {scheme!r} in {redact_url(url)!r}; "
                         "use sqlite:///path.db or postgresql://user@host/db")
    raise InvalidURL(f"not a store URL: {redact_url(url)!r}; use sqlite:///path.db or postgresql://user@host/db")
