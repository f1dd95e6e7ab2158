"""``tenure signals``: send a durable signal to the runs waiting for it (docs/workflows.md)."""

from __future__ import annotations

import click

from .common import Commands, _close, _payload, emit_json, json_option, main, open_store, url_option


@main.group(cls=Commands)
def signals() -> None:
    """Send signals to waiting runs (ctx.wait_for_signal)."""


@signals.command("send")
@click.argument("key")
@url_option
@click.option("--payload", default=None, metavar="JSON", help="The signal's payload, as JSON.")
@json_option
def signals_send(key: str, url: str | None, payload: str | None, as_json: bool) -> None:
    """Store one signal of KEY and wake the runs waiting for it (received exactly once)."""
    body = _payload(payload, "--payload")
    store = open_store(url)
    try:
        signal_id = store.signals.send(key, body)
        pending = store.signals.pending(key)
    finally:
        _close(store)
    if as_json:
        emit_json({"key": key, "id": signal_id, "pending": pending})
        return
    click.echo(f"sent signal {signal_id} of {key!r} ({pending} not received yet)")


@signals.command("pending")
@click.argument("key")
@url_option
@json_option
def signals_pending(key: str, url: str | None, as_json: bool) -> None:
    """How many signals of KEY no run has received yet."""
    store = open_store(url)
    try:
        pending = store.signals.pending(key)
    finally:
        _close(store)
    if as_json:
        emit_json({"key": key, "pending": pending})
        return
    click.echo(str(pending))
