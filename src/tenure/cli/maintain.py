"""``tenure sweep`` and ``tenure maintain``: delete old settled jobs; one maintenance pass by hand."""

from __future__ import annotations

import dataclasses

import click

from .common import (
    _close,
    _fail,
    _jsonable,
    _need,
    emit_json,
    fmt_ms,
    json_option,
    main,
    open_store,
    parse_duration,
    print_table,
    url_option,
)


@main.command()
@url_option
@click.option("--older-than", "older_than", required=True, metavar="DURATION",
              help="Delete done/dead/cancelled jobs last changed longer ago than this (e.g. 7d).")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="At most this many jobs.")
@json_option
def sweep(url: str | None, older_than: str, limit: int | None, as_json: bool) -> None:
    """Delete settled jobs (and their checkpoints) older than --older-than; live jobs are never touched."""
    from ..dashboard.insights import Insights

    seconds = parse_duration(older_than, "--older-than")
    store = open_store(url)
    try:
        horizon = Insights(store).now_ms() - int(seconds * 1000)
        result = store.jobs.sweep(settled_before=horizon, limit=limit)
    finally:
        _close(store)
    if as_json:
        emit_json({"removed": result.removed, "settled_before": horizon})
    else:
        click.echo(f"removed {result.removed} settled job(s) last changed before {fmt_ms(horizon)} UTC")

@main.command()
@url_option
@click.option("--once", is_flag=True, required=True, help="Run one maintenance pass and exit.")
@json_option
def maintain(url: str | None, once: bool, as_json: bool) -> None:
    """Run one maintenance pass by hand (schedules, expiry, retention); workers run it in the background."""
    try:
        from ..maintenance import Maintainer
    except ImportError:
        _fail("this tenure has no maintenance service")
    store = open_store(url)
    try:
        run_once = _need(Maintainer(store), "run_once", "maintenance pass (Maintainer.run_once)")
        result = run_once()
    finally:
        _close(store)
    data = _jsonable(result) if dataclasses.is_dataclass(result) else result
    if as_json:
        emit_json(data if data is not None else {})
        return
    if isinstance(data, dict) and data:
        print_table(["duty", "count"], sorted(data.items()))
    else:
        click.echo("maintenance pass done")
