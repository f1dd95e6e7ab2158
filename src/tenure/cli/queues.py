"""``tenure queues``: list, create, pause and resume queues."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import click

from ..records import STATES
from .common import (
    _close,
    _duration_option,
    _need,
    emit_json,
    json_option,
    main,
    open_store,
    parse_duration,
    print_table,
    url_option,
)


@main.group(cls=click.Group)
def queues() -> None:
    """List, create, pause and resume queues."""


@queues.command("list")
@url_option
@json_option
def queues_list(url: str | None, as_json: bool) -> None:
    """Every queue with its jobs per state and whether it is paused."""
    from ..dashboard.insights import Insights

    store = open_store(url)
    try:
        summaries = Insights(store).queues()
    finally:
        _close(store)
    if as_json:
        emit_json([dataclasses.asdict(q) for q in summaries])
        return
    print_table(["queue", "paused", *STATES, "limit", "dead letter"],
                [(q.name, "yes" if q.paused else "", *(q.counts.get(s, 0) for s in STATES),
                  q.concurrency_limit or "", q.dead_letter or "") for q in summaries])


@queues.command("create")
@click.argument("name")
@url_option
@click.option("--max-attempts", type=click.IntRange(min=1), default=None)
@_duration_option("--retry-delay", help="Delay before a retry")
@click.option("--retry-backoff/--no-retry-backoff", default=None, help="Exponential backoff with jitter.")
@_duration_option("--retry-delay-max", help="Cap on the exponential retry delay")
@_duration_option("--timeout", help="Per-attempt timeout")
@_duration_option("--retention", help="How long a queued job may wait before it expires")
@_duration_option("--delete-after", help="How long a settled job is kept")
@click.option("--dead-letter", default=None, metavar="QUEUE", help="Copy dead jobs to this queue.")
@click.option("--concurrency-limit", type=click.IntRange(min=1), default=None,
              help="At most this many leased jobs in the queue, across every worker.")
@click.option("--group-limit", type=click.IntRange(min=1), default=None,
              help="At most this many leased jobs per group key.")
@click.option("--policy", default=None, type=click.Choice(["standard", "short", "singleton", "stately",
                                                            "exclusive"]))
@json_option
def queues_create(name: str, url: str | None, as_json: bool, **opts: Any) -> None:
    """Create (or update) a queue with its defaults."""
    defaults: dict[str, Any] = {}
    for key, value in opts.items():
        if value is None:
            continue
        if key in ("retry_delay", "retry_delay_max", "timeout", "retention", "delete_after"):
            value = parse_duration(value, "--" + key.replace("_", "-"))
        defaults[key] = value
    store = open_store(url)
    try:
        create = _need(store.queues, "create", "queue registry (store.queues.create)")
        result = create(name, **defaults)
    finally:
        _close(store)
    if as_json:
        emit_json({"queue": name, "created": True, "defaults": defaults,
                   "record": result if dataclasses.is_dataclass(result) else None})
    else:
        click.echo(f"queue {name} ready" + (f" ({', '.join(f'{k}={v}' for k, v in defaults.items())})"
                                            if defaults else ""))


def _queue_toggle(verb: str) -> Callable:
    @queues.command(verb)
    @click.argument("name")
    @url_option
    @json_option
    def cmd(name: str, url: str | None, as_json: bool) -> None:
        store = open_store(url)
        try:
            fn = _need(store.queues, verb, f"queue {verb} (store.queues.{verb})")
            fn(name)
        finally:
            _close(store)
        if as_json:
            emit_json({"queue": name, "paused": verb == "pause"})
        else:
            click.echo(f"queue {name} {'paused' if verb == 'pause' else 'resumed'}")

    cmd.__doc__ = ("Stop claims from queue NAME in every process (jobs still enqueue)." if verb == "pause"
                   else "Let workers claim from queue NAME again.")
    return cmd


_queue_toggle("pause")
_queue_toggle("resume")
