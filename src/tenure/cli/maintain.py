"""``tenure sweep`` and ``tenure maintain``: delete old settled jobs; one maintenance pass by hand."""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
from collections.abc import Callable
from typing import Any

import click

from ..errors import TenureError
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

    seconds = parse_duration(older_than, "--older-than")
    store = open_store(url)
    try:
        horizon = store.insights.now_ms() - int(seconds * 1000)
        result = store.jobs.sweep(settled_before=horizon, limit=limit)
    finally:
        _close(store)
    if as_json:
        emit_json({"removed": result.removed, "settled_before": horizon})
    else:
        click.echo(f"removed {result.removed} settled job(s) last changed before {fmt_ms(horizon)} UTC")

@main.command()
@url_option
@click.option("--once", is_flag=True, help="Run one maintenance pass, print what it did and exit.")
@click.option("--interval", default=1.0, show_default=True, type=click.FloatRange(min=0.05),
              help="Without --once: seconds between passes (schedules fire on time at 1 s).")
@json_option
def maintain(url: str | None, once: bool, interval: float, as_json: bool) -> None:
    """Run tenure's maintenance (fire due schedules, expire, delete settled jobs, reap dead
    workers): with --once one pass, printed; without it a pass every --interval seconds until
    SIGINT/SIGTERM, then the totals — for a deployment whose workers run with maintenance off."""
    try:
        from ..maintenance import Maintainer
    except ImportError:
        _fail("this tenure has no maintenance service")
    store = open_store(url)
    try:
        run_once = _need(Maintainer(store), "run_once", "maintenance pass (Maintainer.run_once)")
        result = run_once() if once else _run_until_signal(run_once, interval)
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


def _run_until_signal(run_once: Callable[..., dict[str, int]], interval: float) -> dict[str, int]:
    """Passes every ``interval`` seconds until SIGINT/SIGTERM; answers the totals per duty (with
    ``passes``). A pass that fails is logged and the next one runs (the store may come back)."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    log = logging.getLogger("tenure.maintenance")
    log.info("tenure maintain: a pass every %.2f s until SIGINT/SIGTERM", interval)
    totals: dict[str, int] = {"passes": 0}
    while not stop.is_set():
        try:
            for duty, count in run_once(drain=False).items():
                totals[duty] = totals.get(duty, 0) + count
            totals["passes"] += 1
        except TenureError as exc:
            log.warning("tenure maintain: pass failed: %s", exc)
        stop.wait(interval)
    return totals
