"""Engines: one per database. ``create_engine(url)`` picks one by the URL's scheme."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidURL
from .base import Engine

__all__ = ["Engine", "create_engine", "redact_url"]


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (safe for logs, banners and errors)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    if parts.password:
        netloc = parts.netloc.replace(":" + parts.password + "@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


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
    raise InvalidURL(f"unknown store URL scheme {scheme!r} in {redact_url(url)!r}; "
                     "use sqlite:///path.db or postgresql://user@host/db")
