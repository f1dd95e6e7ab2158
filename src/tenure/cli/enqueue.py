"""``tenure enqueue``: one job, or a JSON-lines file in one transaction."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from .. import enqueue_options as eo
from ..errors import TenureError
from .common import (
    _close,
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


#: How each form of flag value in the table (:class:`tenure.enqueue_options.Cli`) is declared
#: to click and read into the option's value.
_FORMS: dict[str, tuple[dict[str, Any], Callable[[Any, str], Any]]] = {
    "text": ({}, lambda value, flag: value),
    "int": ({"type": int}, lambda value, flag: value),
    "int>=1": ({"type": click.IntRange(min=1)}, lambda value, flag: value),
    "duration": ({"metavar": "DURATION"}, parse_duration),
    "json": ({"metavar": "JSON"}, _payload),
    "text*": ({"multiple": True}, lambda value, flag: list(value) or None),
}
#: A flag's value when it is not given (a repeatable flag's is an empty tuple).
_ABSENT = (None, ())


def _help(option: eo.Option) -> str:
    extra = {"duration": " (e.g. 30s, 15m, 2h, 7d)", "text*": " (repeat for several)"}.get(
        option.cli.form if option.cli else "", "")
    return option.doc[:1].upper() + option.doc[1:] + extra + "."


def option_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """The ``tenure enqueue`` flags of every option of the table's ``cli`` surface that has one
    (``KIND`` is the argument), each passed to the command under the option's name."""
    for name, option in reversed(eo.on(eo.CLI).items()):
        if option.cli is not None:
            declared, _ = _FORMS[option.cli.form]
            command = click.option(option.cli.flag, name, default=None, help=_help(option), **declared)(command)
    return command


def flag_values(flags: dict[str, Any]) -> dict[str, Any]:
    """The given flags as enqueue options, each read by its form (a duration as seconds, JSON
    parsed); flags not given are left out."""
    out = {}
    for name, value in flags.items():
        if value in _ABSENT:
            continue
        cli = eo.OPTIONS[name].cli
        assert cli is not None  # option_flags declared only flags of the table
        out[name] = _FORMS[cli.form][1](value, cli.flag)
    return out


@main.command()
@click.argument("kind", required=False)
@url_option
@click.option("--app", "app_spec", default=None, metavar="MODULE:APP",
              help="Check KIND's arguments against the signature of APP's task of that name before "
                   "writing (a plain JSON object is its keyword arguments; see docs/tasks.md).")
@option_flags
@click.option("--from-file", "from_file", default=None, metavar="PATH",
              help="Bulk-load a JSON-lines file ('-' for stdin): one object per line with enqueue's keys.")
@click.option("--batch-size", default=1000, show_default=True, type=click.IntRange(min=1, max=100_000),
              help="Jobs per statement batch with --from-file (the whole file is one transaction).")
@json_option
def enqueue(kind: str | None, url: str | None, app_spec: str | None, from_file: str | None, batch_size: int,
            as_json: bool, **flags: Any) -> None:
    """Enqueue one job (KIND --payload JSON), or many with --from-file jobs.jsonl.

    Each line of the file is an object such as {"kind": "email.send", "payload": {...},
    "queue": "emails", "priority": 5, "delay": 30}; KIND, when given, is the default kind.
    For a task, a plain JSON object is its keyword arguments; with --app MODULE:APP they are
    checked against the task's signature first (TN1002, nothing written).
    Every flag and line key: docs/enqueue-options.md.
    """
    if from_file is not None:
        if app_spec is not None:
            raise click.UsageError("--app checks one job's arguments; it does not apply to --from-file")
        given = [eo.OPTIONS[n].cli.flag for n, val in flags.items() if val not in _ABSENT]  # type: ignore[union-attr]
        if given:
            raise click.UsageError(f"{', '.join(given)} apply to one job; put them on each line with --from-file")
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
    options = flag_values(flags)
    body = options.pop("payload", None)
    if app_spec is not None:
        from ..task_args import checked_payload

        body = checked_payload(load_app(app_spec), kind, body)
    store = open_store(url)
    try:
        new_id = store.jobs.enqueue(kind, body, **options)
        if app_spec is None:  # --app already checked KIND against the tasks
            _warn_unhandled(store, options.get("queue", "default"), kind)
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
