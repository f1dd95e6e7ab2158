"""``tenure schedules``: list, add and remove cron schedules."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import click

from .common import (
    EXIT_ERROR,
    Commands,
    _close,
    _need,
    _payload,
    emit_json,
    fmt_ms,
    json_option,
    main,
    open_store,
    print_table,
    url_option,
)


@main.group(cls=Commands)
def schedules() -> None:
    """List, add, pause, resume and remove cron schedules."""


def _schedule_dict(s: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(s) and not isinstance(s, type):
        return dataclasses.asdict(s)
    if isinstance(s, dict):
        return dict(s)
    return {k: getattr(s, k) for k in dir(s) if not k.startswith("_") and not callable(getattr(s, k))}


@schedules.command("list")
@url_option
@json_option
def schedules_list(url: str | None, as_json: bool) -> None:
    """Every schedule with its next fire time."""
    store = open_store(url)
    try:
        registry = _need(store, "schedules", "schedules (store.schedules)")
        items = [_schedule_dict(s) for s in registry.list()]
    finally:
        _close(store)
    if as_json:
        emit_json(items)
        return
    if not items:
        click.echo("no schedules")
        return
    print_table(["name", "cron", "tz", "kind", "queue", "next fire (UTC)", "last fire (UTC)", "state"],
                [(s["name"] + (f" #{s['key']}" if s.get("key") else ""), s.get("cron"), s.get("tz"),
                  s.get("kind"), s.get("queue") or "",
                  fmt_ms(s.get("next_fire_at")), fmt_ms(s.get("last_fire_at")),
                  "paused" if s.get("paused_at") is not None else "active") for s in items])


@schedules.command("add")
@click.argument("name")
@click.argument("cron")
@click.argument("kind")
@url_option
@click.option("--payload", default=None, metavar="JSON", help="The payload of each job it enqueues.")
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone the cron is read in.")
@click.option("--queue", default=None, help="The queue of each job it enqueues (default: the default queue).")
@click.option("--key", default="", help="A sub-key: several schedules may share a NAME with different keys.")
@json_option
def schedules_add(name: str, cron: str, kind: str, url: str | None, payload: str | None, tz: str,
                  queue: str | None, key: str, as_json: bool) -> None:
    """Enqueue KIND on every CRON boundary (five fields or @hourly-style aliases), e.g.
    tenure schedules add nightly "0 3 * * *" reports.build --tz Europe/Paris."""
    body = _payload(payload, "--payload")
    store = open_store(url)
    try:
        registry = _need(store, "schedules", "schedules (store.schedules)")
        before = registry.get(name, key=key)
        result = registry.add(name, cron, kind, body, tz=tz, queue=queue, key=key)
    finally:
        _close(store)
    if as_json:
        emit_json(_schedule_dict(result) if result is not None else {"name": name})
        return
    if before is None:
        click.echo(f"schedule {name} added ({cron} {tz} -> {kind})")
    elif (before.cron, before.tz, before.kind, before.payload, before.queue) == (cron, tz, kind, body, queue):
        click.echo(f"schedule {name} unchanged ({cron} {tz} -> {kind})")
    else:  # the name is the schedule's identity: a second `add` of it replaces the first
        click.echo(f"schedule {name} replaced: now {cron} {tz} -> {kind} (was {before.cron} {before.tz} -> "
                   f"{before.kind}{'' if before.payload == body else ', another payload'})")


@schedules.command("remove")
@click.argument("name")
@url_option
@click.option("--key", default="", help="The sub-key the schedule was added with.")
@json_option
def schedules_remove(name: str, url: str | None, key: str, as_json: bool) -> None:
    """Remove schedule NAME."""
    store = open_store(url)
    try:
        registry = _need(store, "schedules", "schedules (store.schedules)")
        removed = registry.remove(name, key=key)
    finally:
        _close(store)
    removed = True if removed is None else bool(removed)
    if as_json:
        emit_json({"name": name, "removed": removed})
    else:
        click.echo(f"schedule {name} removed" if removed else f"no schedule {name!r}")
    if not removed:
        sys.exit(EXIT_ERROR)


@schedules.command("run")
@click.argument("name")
@url_option
@click.option("--key", default="", help="The sub-key the schedule was added with.")
@json_option
def schedules_run(name: str, url: str | None, key: str, as_json: bool) -> None:
    """Enqueue schedule NAME's job now (its kind, payload, queue and options; a fresh id); the
    schedule keeps its own boundaries. Prints the job's id (the dashboard's Run now)."""
    store = open_store(url)
    try:
        job_id = store.schedules.run_now(name, key=key)
    finally:
        _close(store)
    if as_json:
        emit_json({"name": name, "key": key, "job_id": job_id})
    elif job_id is not None:
        click.echo(job_id)
    else:
        click.echo(f"no schedule {name!r}" + (f" with key {key!r}" if key else ""), err=True)
    if job_id is None:
        sys.exit(EXIT_ERROR)


def _pause_or_resume(verb: str, name: str, url: str | None, key: str, as_json: bool) -> None:
    store = open_store(url)
    try:
        registry = _need(store, "schedules", "schedules (store.schedules)")
        result = getattr(registry, verb)(name, key=key)
    finally:
        _close(store)
    label = name + (f" #{key}" if key else "")
    if as_json:
        emit_json(_schedule_dict(result) if result is not None else {"name": name, "key": key, "found": False})
    elif result is not None:
        nxt = "" if verb == "pause" else f"; next fire {fmt_ms(result.next_fire_at)} UTC"
        click.echo(f"schedule {label} {'paused' if verb == 'pause' else 'resumed'}{nxt}")
    else:
        click.echo(f"no schedule {name!r}" + (f" with key {key!r}" if key else ""), err=True)
    if result is None:
        sys.exit(EXIT_ERROR)


@schedules.command("pause")
@click.argument("name")
@url_option
@click.option("--key", default="", help="The sub-key the schedule was added with.")
@json_option
def schedules_pause(name: str, url: str | None, key: str, as_json: bool) -> None:
    """Pause schedule NAME: it fires nothing until resumed (a worker starting with the same
    @app.periodic does not resume it)."""
    _pause_or_resume("pause", name, url, key, as_json)


@schedules.command("resume")
@click.argument("name")
@url_option
@click.option("--key", default="", help="The sub-key the schedule was added with.")
@json_option
def schedules_resume(name: str, url: str | None, key: str, as_json: bool) -> None:
    """Resume schedule NAME, planned from now: boundaries that passed while paused are skipped."""
    _pause_or_resume("resume", name, url, key, as_json)
