"""``tenure queues``: list, create, update, show, pause, resume and delete queues."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import click

from .. import enqueue_options as eo
from ..queue_settings import POLICIES
from ..records import STATES
from .common import (
    EXIT_ERROR,
    Commands,
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


@main.group(cls=Commands)
def queues() -> None:
    """List, create, update, show, pause, resume and delete queues."""


@queues.command("list")
@url_option
@json_option
def queues_list(url: str | None, as_json: bool) -> None:
    """Every queue with its jobs per state and whether it is paused."""

    store = open_store(url)
    try:
        summaries = store.insights.queues()
    finally:
        _close(store)
    if as_json:
        emit_json([dataclasses.asdict(q) for q in summaries])
        return
    print_table(["queue", "paused", *STATES, "limit", "rate", "dead letter"],
                [(q.name, "yes" if q.paused else "", *(q.counts.get(s, 0) for s in STATES),
                  q.concurrency_limit or "", q.rate_limit or "", q.dead_letter or "") for q in summaries])


def _queue_options(fn: Callable) -> Callable:
    """The options ``create`` and ``update`` share: one flag per ``queue`` option of the table
    (docs/enqueue-options.md; tests/core/test_enqueue_options.py holds the two equal)."""
    for option in reversed([
        click.option("--max-attempts", type=click.IntRange(min=1), default=None,
                     help="Attempts a job of the queue gets, the first one included."),
        _duration_option("--retry-delay", help="Delay before a retry"),
        click.option("--retry-backoff/--no-retry-backoff", default=None, help="Exponential backoff with jitter."),
        _duration_option("--retry-delay-max", help="Cap on the exponential retry delay"),
        _duration_option("--timeout", help="Per-attempt timeout"),
        _duration_option("--retention", help="How long a queued job may wait before it expires"),
        _duration_option("--delete-after", help="How long a settled job is kept"),
        click.option("--dead-letter", default=None, metavar="QUEUE", help="Copy dead jobs to this queue."),
        click.option("--concurrency-limit", type=click.IntRange(min=1), default=None,
                     help="At most this many leased jobs in the queue, across every worker."),
        click.option("--group-limit", type=click.IntRange(min=1), default=None,
                     help="At most this many leased jobs per group key."),
        click.option("--rate-limit", default=None, metavar="N/PERIOD",
                     help="At most N starts in any window of PERIOD (100/s, 6000/min, 10/h); 'none' clears."),
        click.option("--group-rate-limit", default=None, metavar="N/PERIOD",
                     help="The same, for each group key separately; 'none' clears."),
        click.option("--fairness", default=None, type=click.Choice(["round_robin", "none"]),
                     help="round_robin: the claim rotates over group keys; 'none' clears."),
        click.option("--group-weight", "group_weights", multiple=True, metavar="KEY=WEIGHT",
                     help="Round-robin weight of a group key (repeat for several); 'none' clears them."),
        click.option("--policy", default=None, type=click.Choice(list(POLICIES)),
                     help="How many jobs of one singleton key the queue holds (docs/queues.md, Uniqueness)."),
    ]):
        fn = option(fn)
    return fn


def _settings(opts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in opts.items():
        if value is None:
            continue
        if eo.OPTIONS[key].type == "seconds":  # a duration flag: 30s, 15m, 2h, 7d
            value = parse_duration(value, "--" + key.replace("_", "-"))
        if key in ("rate_limit", "group_rate_limit", "fairness") and value.lower() == "none":
            value = None
        if key == "group_weights":
            if not value:
                continue
            value = None if list(value) == ["none"] else _weights(value)
        out[key] = value
    return out


def _weights(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``("gold=3", "silver=2")`` -> ``{"gold": 3, "silver": 2}`` (the API checks the values)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, weight = pair.rpartition("=")
        if not sep:
            raise click.BadParameter(f"{pair!r}: write KEY=WEIGHT", param_hint="--group-weight")
        out[key] = int(weight) if weight.strip().isdigit() else weight
    return out


def _put(verb: str, name: str, url: str | None, as_json: bool, opts: dict[str, Any]) -> None:
    defaults = _settings(opts)
    store = open_store(url)
    try:
        put = _need(store.queues, verb, f"queue registry (store.queues.{verb})")
        result = put(name, **defaults)
    finally:
        _close(store)
    if as_json:
        emit_json({"queue": name, "created": verb == "create", "defaults": defaults,
                   "record": result if dataclasses.is_dataclass(result) else None})
    else:
        click.echo(f"queue {name} {'ready' if verb == 'create' else 'updated'}"
                   + (f" ({', '.join(f'{k}={v}' for k, v in defaults.items())})" if defaults else ""))


@queues.command("create")
@click.argument("name")
@url_option
@_queue_options
@json_option
def queues_create(name: str, url: str | None, as_json: bool, **opts: Any) -> None:
    """Create (or update) a queue with its defaults and limits."""
    _put("create", name, url, as_json, opts)


@queues.command("update")
@click.argument("name")
@url_option
@_queue_options
@json_option
def queues_update(name: str, url: str | None, as_json: bool, **opts: Any) -> None:
    """Change options of an existing queue (refused for an unknown one)."""
    _put("update", name, url, as_json, opts)


@queues.command("show")
@click.argument("name")
@url_option
@click.option("--groups", default=20, type=click.IntRange(min=0), help="Group windows to show (default 20).")
@json_option
def queues_show(name: str, url: str | None, groups: int, as_json: bool) -> None:
    """One queue's settings, its limits and their current windows."""
    store = open_store(url)
    try:
        record = store.queues.get(name)
        windows = store.queues.windows(name, limit=groups + 1)
    finally:
        _close(store)
    if as_json:
        emit_json({"queue": dataclasses.asdict(record), "windows": [dataclasses.asdict(w) for w in windows]})
        return
    for key, value in dataclasses.asdict(record).items():
        if value is not None:
            click.echo(f"{key + ':':<22}{value}")
    if windows:
        click.echo("")
        print_table(["window", "starts in window", "limit", "opens at"],
                    [("queue" if w.group_key is None else f"group {w.group_key}", w.in_window, w.limit or "",
                      _instant(w.blocked_until)) for w in windows])


def _instant(ms: int | None) -> str:
    if not ms:
        return "open"
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%H:%M:%S.%f")[:-3] + " UTC"


def _queue_toggle(verb: str) -> Callable:
    # click reads the help when the command is declared, so it is given here, not set afterwards
    @queues.command(verb, help="Stop claims from queue NAME in every process (jobs still enqueue)."
                    if verb == "pause" else "Let workers claim from queue NAME again.")
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

    return cmd


_queue_toggle("pause")
_queue_toggle("resume")


@queues.command("delete")
@click.argument("name")
@click.option("--force", is_flag=True,
              help="Also delete its live (pending, leased, failed) jobs; asks first unless --yes.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (with --force).")
@url_option
@json_option
def queues_delete(name: str, force: bool, yes: bool, url: str | None, as_json: bool) -> None:
    """Delete queue NAME with its settings, its settled jobs and their checkpoints
    (store.queues.delete). Refused while it holds live jobs (TN3002) unless --force."""
    from ..errors import QueueNotEmpty

    store = open_store(url)
    try:
        try:
            n = store.queues.delete(name)
        except QueueNotEmpty as exc:
            live = exc.details.get("live")
            if not force:
                raise QueueNotEmpty(f"queue {name!r} still has {live} live job(s) (pending, leased or failed): "
                                    "let them settle, or add --force to delete them too", **exc.details) from None
            if not yes and not click.confirm(f"delete queue {name} and its {live} live job(s)?", default=False):
                click.echo("nothing changed")
                raise SystemExit(EXIT_ERROR) from None
            n = store.queues.delete(name, force=True)
    finally:
        _close(store)
    if as_json:
        emit_json({"queue": name, "deleted_jobs": n})
    else:
        click.echo(f"queue {name} deleted with its {n} job(s)")
