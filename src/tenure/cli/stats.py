"""``tenure stats``: jobs per state and queue, recent settlements, live workers."""

from __future__ import annotations

import dataclasses
import signal
import sys
import threading
from typing import Any

import click

from ..records import STATES
from ..redact import redact_url
from .common import (
    _close,
    _rich_console,
    emit_json,
    fmt_ago,
    fmt_ms,
    json_option,
    main,
    open_store,
    render_table,
    url_option,
)


def _stats_data(insights: Any) -> dict[str, Any]:
    ov = insights.overview(fresh=True)
    tp = ov.throughput
    last = tp.buckets[-1] if tp.buckets else {}
    return {
        "store": redact_url(ov.store), "now": ov.now, "counts": ov.counts, "estimated": ov.estimated,
        "queues": [dataclasses.asdict(q) for q in ov.queues],
        "last_hour": tp.totals(), "this_minute": {k: last.get(k, 0) for k in ("done", "failed", "dead",
                                                                              "cancelled")},
        "workers_alive": ov.workers_alive, "workers_total": ov.workers_total,
        **(ov.kinds.as_dict() if ov.kinds is not None else {}),
    }


def _stats_text(data: dict[str, Any]) -> str:
    counts = data["counts"]
    lines = [f"store {data['store']} at {fmt_ms(data['now'])} UTC",
             ("jobs (estimated from a sample; leased exact): " if data.get("estimated") else "jobs: ")
             + "  ".join(f"{s} {counts.get(s, 0)}" for s in STATES)]
    h, m = data["last_hour"], data["this_minute"]
    lines.append(f"last hour: done {h['done']}  failed {h['failed']}  dead {h['dead']}  "
                 f"cancelled {h['cancelled']}   this minute: done {m['done']}  failed {m['failed']}")
    lines.append(f"workers alive: {data['workers_alive']} of {data['workers_total']} registered")
    table = render_table(["queue", "paused", *STATES],
                         [(q["name"], "yes" if q["paused"] else "", *(q["counts"].get(s, 0) for s in STATES))
                          for q in data["queues"]])
    return "\n".join(lines + _kinds_lines(data)) + "\n" + table


def _kinds_lines(data: dict[str, Any]) -> list[str]:
    """The unhandled-kinds warning and the unserved queues of ``tenure stats`` (tenure.kinds)."""
    out = []
    for u in data.get("unhandled_kinds", []):
        near = f" (did you mean {', '.join(u['near'])}?)" if u["near"] else ""
        out.append(f"WARNING: {u['count']} queued job(s) of kind {u['kind']} in queue {u['queue']} "
                   f"(oldest queued {fmt_ago(u['oldest_created_at'], data['now'])}): no live worker handles "
                   f"this kind{near}")
    for u in data.get("unserved_queues", []):
        out.append(f"no live worker for queue {u['queue']}: {u['count']} queued job(s), oldest queued "
                   f"{fmt_ago(u['oldest_created_at'], data['now'])}")
    return out


@main.command()
@url_option
@click.option("--watch", is_flag=True, help="Refresh until interrupted.")
@click.option("--interval", default=2.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between refreshes with --watch.")
@click.option("--iterations", default=None, type=click.IntRange(min=1), hidden=True,
              help="Stop --watch after this many refreshes (tests).")
@json_option
def stats(url: str | None, watch: bool, interval: float, iterations: int | None, as_json: bool) -> None:
    """Jobs per state and queue, settlements over the last hour, live workers."""
    from ..insights import Insights

    store = open_store(url)
    insights = Insights(store, ttl=0)
    try:
        if not watch:
            data = _stats_data(insights)
            emit_json(data) if as_json else click.echo(_stats_text(data))
            return
        _watch(insights, interval, iterations, as_json)
    finally:
        _close(store)


def _watch(insights: Any, interval: float, iterations: int | None, as_json: bool) -> None:
    """Print the stats every ``interval`` seconds (a live view on a terminal with rich) until
    Ctrl-C, or ``iterations`` times. Ctrl-C is how a watch ends (as watch(1) and top end): it only
    sets a flag the loop reads between refreshes, so it never breaks into a store read, and the
    command exits 0 instead of "tenure: aborted"."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: stop.set())
    try:
        console = None if as_json else _rich_console()
        n = 0
        if console is not None:
            from rich.live import Live
            from rich.text import Text

            with Live(Text(_stats_text(_stats_data(insights))), console=console, auto_refresh=False) as live:
                n = 1
                while (iterations is None or n < iterations) and not stop.wait(interval):
                    live.update(Text(_stats_text(_stats_data(insights))), refresh=True)
                    n += 1
            return
        while (iterations is None or n < iterations) and not (n and stop.wait(interval)) and not stop.is_set():
            data = _stats_data(insights)
            if as_json:
                emit_json(data)  # one JSON document per line
            else:
                click.echo(_stats_text(data) + "\n")
            sys.stdout.flush()
            n += 1
    finally:
        signal.signal(signal.SIGINT, previous)
