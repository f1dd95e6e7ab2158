"""``tenure runs``: inspect workflow runs."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import click

from .common import (
    Commands,
    _close,
    _fail,
    _jsonable,
    _short,
    emit_json,
    json_option,
    main,
    open_store,
    print_table,
    url_option,
)


@main.group(cls=Commands)
def runs() -> None:
    """Inspect workflow runs."""


@runs.command("show")
@click.argument("job_id")
@url_option
@json_option
def runs_show(job_id: str, url: str | None, as_json: bool) -> None:
    """A workflow run's nodes: done, running or pending, with their values."""
    try:
        from ..flow import describe_run
    except ImportError:
        _fail("this tenure has no workflows (tenure.flow.describe_run)")
    store = open_store(url)
    try:
        run = describe_run(store, job_id)
    finally:
        _close(store)
    if run is None:
        _fail(f"no job {job_id!r}")
    data = _jsonable(run) if dataclasses.is_dataclass(run) else run
    if as_json:
        emit_json(data)
        return
    _print_run(data)


def _print_run(data: Any) -> None:
    if not isinstance(data, dict):
        click.echo(json.dumps(data, default=_jsonable, indent=2))
        return
    head = [(k, v) for k, v in data.items() if not isinstance(v, list | dict)]
    if head:
        print_table(["field", "value"], [(k, _short(v, 80)) for k, v in head])
    nodes = data.get("nodes")
    if not nodes and data.get("identity") is None:
        click.echo(f"no workflow nodes recorded for {data.get('job_id')}: a plain job (not a flow run), or a run "
                   "whose checkpoints were pruned when it completed (its output is the result); "
                   "tenure jobs show shows the job")
    if isinstance(nodes, list) and nodes and isinstance(nodes[0], dict):
        cols = [c for c in ("id", "task", "needs", "status", "generation", "value", "waiting")
                if any(n.get(c) not in (None, []) or c in ("id", "status") for n in nodes)]
        print_table(cols, [[_short(json.dumps(n.get(c), default=_jsonable) if isinstance(n.get(c), dict | list)
                                   else n.get(c), 50) for c in cols] for n in nodes])
    for k, v in data.items():
        if isinstance(v, list | dict) and k != "nodes":
            click.echo(f"{k}: {json.dumps(v, default=_jsonable)}")
