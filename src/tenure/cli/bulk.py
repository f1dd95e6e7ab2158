"""``tenure jobs cancel|requeue|delete`` by filter (admin at scale): count first (the
API's ``dry_run``), ask before acting (``--yes`` skips the question), then act through
``store.jobs.<op>_where`` (:mod:`tenure.bulk_admin`)."""

from __future__ import annotations

from typing import Any

import click

from .common import EXIT_ERROR, _close, emit_json, open_store, parse_duration

#: The answer key of each operation's ``--json`` output, and its verb in sentences.
_DONE = {
    "cancel": ("cancelled", "cancel"),
    "requeue": ("requeued", "requeue"),
    "delete": ("deleted", "delete"),
}


def describe(filters: dict[str, Any]) -> str:
    """The filter in words, for the confirmation question."""
    return ", ".join(f"{k.replace('_', '-')}={v}" for k, v in filters.items() if v is not None)


def run_bulk(
    operation: str, url: str | None, filters: dict[str, Any], *, dry_run: bool, yes: bool, as_json: bool
) -> None:
    """Count, confirm, act; prints the count (``--json``: ``{"<done>": n}``, or ``{"matching": n}``
    for a dry run). A declined question exits 1 and changes nothing."""
    if all(v is None for v in filters.values()):
        raise click.UsageError(
            f"give a JOB_ID, or filters (--state, --kind, --queue, --tag, --older-than) "
            f"to {operation} every job they match"
        )
    query = dict(filters)
    if query.get("older_than") is not None:
        query["older_than"] = parse_duration(query["older_than"], "--older-than")
    done_key, verb = _DONE[operation]
    store = open_store(url)
    try:
        fn = getattr(store.jobs, f"{operation}_where")
        count = fn(**query, dry_run=True)
        if dry_run:
            if as_json:
                emit_json({"matching": count, "dry_run": True})
            else:
                click.echo(f"{count} job(s) match ({describe(filters)}); --dry-run: nothing changed")
            return
        if count == 0:
            if as_json:
                emit_json({done_key: 0})
            else:
                click.echo(f"no job matches ({describe(filters)}): nothing to {verb}")
            return
        if not yes and not click.confirm(
            f"{verb} {count} job(s) matching {describe(filters)}?", default=False
        ):
            click.echo("nothing changed")
            raise SystemExit(EXIT_ERROR)
        n = fn(**query)
    finally:
        _close(store)
    if as_json:
        emit_json({done_key: n})
    else:
        click.echo(f"{done_key} {n} job(s)")
