"""``tenure enqueue``: one job, or a JSON-lines file in one transaction."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from ..errors import TenureError
from .common import (
    _close,
    _duration_option,
    _payload,
    _rich_console,
    emit_json,
    json_option,
    load_app,
    main,
    open_store,
    parse_duration,
    url_option,
)

if TYPE_CHECKING:
    from ..store import Store


def _jsonl_lines(path: str) -> list[str]:
    try:
        if path == "-":
            return sys.stdin.read().splitlines()
        with open(path, encoding="utf-8") as fh:
            return fh.read().splitlines()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path!r}: {exc.strerror}", param_hint="--from-file") from None
    except UnicodeDecodeError as exc:
        raise click.BadParameter(f"{path!r} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                                 param_hint="--from-file") from None


@main.command()
@click.argument("kind", required=False)
@url_option
@click.option("--payload", default=None, metavar="JSON", help="The job's payload, as JSON.")
@click.option("--app", "app_spec", default=None, metavar="MODULE:APP",
              help="Check KIND's arguments against the signature of APP's task of that name before "
                   "writing (a plain JSON object is its keyword arguments; see docs/tasks.md).")
@click.option("--queue", default="default", show_default=True)
@click.option("--priority", default=0, show_default=True, type=int, help="Higher runs first.")
@_duration_option("--delay", help="Run no earlier than this from now")
@click.option("--id", "job_id", default=None, help="Caller-chosen job id (idempotent enqueue).")
@click.option("--max-attempts", default=None, type=click.IntRange(min=1))
@click.option("--tag", "tags", multiple=True, help="A tag for the job (repeat for several).")
@click.option("--meta", default=None, metavar="JSON", help="The job's meta, a JSON object.")
@click.option("--from-file", "from_file", default=None, metavar="PATH",
              help="Bulk-load a JSON-lines file ('-' for stdin): one object per line with enqueue's keys.")
@click.option("--batch-size", default=1000, show_default=True, type=click.IntRange(min=1, max=100_000),
              help="Jobs per statement batch with --from-file (the whole file is one transaction).")
@json_option
def enqueue(kind: str | None, url: str | None, payload: str | None, app_spec: str | None, queue: str, priority: int,
            delay: str | None, job_id: str | None, max_attempts: int | None, tags: tuple[str, ...],
            meta: str | None, from_file: str | None, batch_size: int, as_json: bool) -> None:
    """Enqueue one job (KIND --payload JSON), or many with --from-file jobs.jsonl.

    Each line of the file is an object such as {"kind": "email.send", "payload": {...},
    "queue": "emails", "priority": 5, "delay": 30}; KIND, when given, is the default kind.
    For a task, a plain JSON object is its keyword arguments; with --app MODULE:APP they are
    checked against the task's signature first (TN1002, nothing written).
    """
    if from_file is not None:
        if app_spec is not None:
            raise click.UsageError("--app checks one job's arguments; it does not apply to --from-file")
        if payload is not None or job_id is not None:
            raise click.UsageError("--payload and --id apply to one job; put them on each line with --from-file")
        text = _jsonl_lines(from_file)
        store = open_store(url)
        try:
            written = _enqueue_file(store, text, kind, batch_size, show_progress=not as_json)
        finally:
            _close(store)
        if as_json:
            emit_json({"enqueued": written, "lines": written})
        else:
            click.echo(f"enqueued {written} job(s) from {from_file}")
        return
    if kind is None:
        raise click.UsageError("give KIND (and --payload JSON), or --from-file PATH")
    body = _payload(payload, "--payload")
    if app_spec is not None:
        from ..task_args import checked_payload

        body = checked_payload(load_app(app_spec), kind, body)
    delay_s = None if delay is None else parse_duration(delay, "--delay")
    store = open_store(url)
    try:
        new_id = store.jobs.enqueue(kind, body, queue=queue, priority=priority, delay=delay_s, id=job_id,
                                    max_attempts=max_attempts, tags=list(tags) or None,
                                    meta=None if meta is None else _payload(meta, "--meta"))
        if app_spec is None:  # --app already checked KIND against the tasks
            _warn_unhandled(store, queue, kind)
    finally:
        _close(store)
    if as_json:
        emit_json({"id": new_id})
    else:
        click.echo(new_id if new_id is not None else "(deduplicated: no new job)")


def _warn_unhandled(store: Store, queue: str, kind: str) -> None:
    """A WARNING on stderr when live workers claim from ``queue`` and none handles ``kind`` (a
    typo, or a task's module-qualified name): the job is written, and waits until one does. A
    diagnostic: a failed check says nothing."""
    from ..kinds import unhandled_at_enqueue

    try:
        u = unhandled_at_enqueue(store, queue, kind)
    except TenureError:
        return
    if u is not None:
        hint = f"; did you mean {' or '.join(repr(k) for k in u.near)}?" if u.near else ""
        click.echo(f"tenure: WARNING: live workers claim from queue {queue!r} but none handles kind {kind!r}: "
                   f"the job waits until one does{hint}", err=True)


def _enqueue_file(store: Store, lines: list[str], kind: str | None, batch_size: int, *,
                  show_progress: bool) -> int:
    """``tenure enqueue --from-file``: every line checked first, then the whole file in one
    transaction (:mod:`tenure.bulk`); a progress bar on a terminal while it writes."""
    from .. import bulk

    progress: Any = None
    box: list[Callable[[int], None]] = []

    def on_checked(total: int) -> None:
        nonlocal progress
        console = _rich_console(err=True) if show_progress else None
        if console is not None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            progress = Progress(TextColumn("enqueue"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                console=console)
            progress.start()
            task = progress.add_task("enqueue", total=total)
            box.append(lambda n: progress.update(task, advance=n))
        elif show_progress and sys.stderr.isatty():
            progress = click.progressbar(length=total, label="enqueue", file=sys.stderr)
            progress.__enter__()
            box.append(progress.update)

    try:
        ids = bulk.load(store, lines, default_kind=kind, chunk=batch_size, on_checked=on_checked,
                        on_progress=lambda n: box[0](n) if box else None)
    finally:
        if progress is not None:
            if hasattr(progress, "stop"):
                progress.stop()
            else:
                progress.__exit__(None, None, None)
    return len(ids)
