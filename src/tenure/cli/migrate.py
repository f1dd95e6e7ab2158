"""``tenure migrate``: create or upgrade tenure's tables, or check that they are current."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import click

from ..redact import redact_url
from .common import (
    EXIT_ERROR,
    _close,
    _fail,
    _remember_secret,
    emit_json,
    fmt_ms,
    json_option,
    main,
    open_store,
    print_table,
    url_option,
)


@main.command()
@url_option
@click.option("--check", is_flag=True,
              help="Change nothing: exit 0 when the schema is current, 1 when migrations are pending, "
                   "1 with TN0006 when the database is newer than this tenure.")
@json_option
def migrate(url: str | None, check: bool, as_json: bool) -> None:
    """Create or upgrade tenure's tables (every command does this at first use; this does only that)."""
    from ..engine.migrate import load_migrations
    from ..engine.urls import dialect_of, read_only_url
    from ..errors import ReadOnlyStore

    url = url or os.environ.get("TENURE_URL") or "sqlite:///tenure.db"
    _remember_secret(url)
    latest = load_migrations(f"tenure.engine.{dialect_of(url)}")[-1].version
    target = read_only_url(url) if check else url

    def pending(why: str) -> NoReturn:
        if as_json:
            emit_json({"store": redact_url(url), "version": 0 if why == "missing" else None, "latest": latest,
                       "current": False})
            sys.exit(EXIT_ERROR)
        what = "does not exist yet" if why == "missing" else "is behind this tenure"
        _fail(f"migrations pending: {redact_url(url)} {what} (schema {latest}); run tenure migrate")

    if check and dialect_of(url) == "sqlite" and not _sqlite_file_exists(url):
        pending("missing")  # a new file: opening it read-only would fail as unreadable
    try:
        store = open_store(target)
    except ReadOnlyStore:
        if not check:
            raise
        pending("behind")
    try:
        applied = store.insights.schema_versions()
    finally:
        _close(store)
    version = max((v for v, _, _ in applied), default=0)
    if as_json:
        emit_json({"store": redact_url(url), "version": version, "latest": latest, "current": version == latest,
                   "applied": [{"version": v, "name": n, "applied_at": a} for v, n, a in applied]})
        return
    click.echo(f"{redact_url(url)}: schema version {version} (this tenure: {latest}) — "
               + ("up to date" if version == latest else "behind"))
    print_table(["version", "name", "applied (UTC)"], [(v, n, fmt_ms(a)) for v, n, a in applied])


def _sqlite_file_exists(url: str) -> bool:
    """Whether the SQLite store at ``url`` has its file (``:memory:`` counts as existing)."""
    from ..engine.sqlite.engine import SQLiteEngine

    path = SQLiteEngine(url).path
    return path == ":memory:" or os.path.exists(path)
