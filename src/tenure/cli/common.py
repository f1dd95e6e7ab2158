"""What every command shares: the root group, its one-line error contract, the --url and --json
options, durations, opening the store, tables and JSON output."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from .. import connect, durations
from ..errors import InvalidArgument, InvalidSchedule, InvalidType, InvalidURL, TenureError
from ..redact import credentials, scrub

if TYPE_CHECKING:
    from ..store import Store

#: Secrets (URL passwords, dashboard tokens) scrubbed from every line the CLI prints on error.
_SECRETS: set[str] = set()
EXIT_ERROR = 1
EXIT_USAGE = 2


# -- errors ------------------------------------------------------------------------------------


def _scrub(text: str) -> str:
    return scrub(text, _SECRETS)


def _one_line(text: str) -> str:
    return " ".join(_scrub(str(text)).split())


def _fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    click.echo(f"tenure: {_one_line(message)}", err=True)
    sys.exit(code)


def _is_usage(exc: TenureError) -> bool:
    """Bad input (exit 2): a refused argument, schedule or URL; everything else exits 1."""
    return isinstance(exc, InvalidArgument | InvalidType | InvalidSchedule | InvalidURL) or exc.code.startswith("TN1")


#: The words users of other queues (Celery, RQ, Oban, Sidekiq) type first, and tenure's for them:
#: ``tenure jobs retry ID`` answers "did you mean 'requeue'?" instead of a bare "no such command".
PEER_COMMANDS: dict[str, dict[str, str]] = {
    "tenure": {"work": "worker", "start": "worker", "run": "worker", "status": "stats", "inspect": "stats",
               "purge": "sweep", "web": "dashboard", "ui": "dashboard", "flower": "dashboard",
               "cron": "schedules", "enqueue-many": "enqueue", "add": "enqueue", "send": "enqueue"},
    "jobs": {"retry": "requeue", "rerun": "requeue", "resume": "requeue", "get": "show", "info": "show",
             "inspect": "show", "kill": "cancel", "abort": "cancel", "stop": "cancel", "rm": "delete",
             "remove": "delete", "ls": "list"},
    "queues": {"ls": "list", "add": "create", "new": "create", "info": "show", "get": "show",
               "set": "update", "edit": "update", "rm": "delete", "remove": "delete", "drop": "delete"},
    "schedules": {"create": "add", "new": "add", "delete": "remove", "rm": "remove", "ls": "list",
                  "trigger": "run", "stop": "pause", "disable": "pause", "enable": "resume", "start": "resume"},
}


class Commands(click.Group):
    """A command group whose unknown command names tenure's word for it: a close spelling
    (``queus``), or what another queue calls it (``jobs retry`` -> ``requeue``, PEER_COMMANDS)."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                             list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            name = args[0] if args else ""
            peer = PEER_COMMANDS.get("tenure" if ctx.parent is None else self.name or "", {}).get(name)
            if not name or name.startswith("-") or self.get_command(ctx, name) is not None:
                raise
            if peer is None or self.get_command(ctx, peer) is None:
                near = difflib.get_close_matches(name, self.list_commands(ctx), n=1, cutoff=0.6)
                if not near:
                    raise
                peer = near[0]
            raise click.UsageError(f"No such command {name!r} (did you mean {peer!r}?).", ctx) from exc


class _Group(Commands):
    """Every command exits with one line on error: ``tenure: <message>`` (no traceback)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:  # click's entry point
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            _fail("aborted", 130)
        except click.ClickException as exc:
            hint = ""
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                hint = f" (see: {exc.ctx.command_path} --help)"
            _fail(exc.format_message() + hint, exc.exit_code if exc.exit_code else EXIT_USAGE)
        except TenureError as exc:
            self._debug()
            _fail(str(exc), EXIT_USAGE if _is_usage(exc) else EXIT_ERROR)
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except (BrokenPipeError, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - the one-line contract holds for surprises too
            self._debug()
            _fail(f"{type(exc).__name__}: {exc} (set TENURE_DEBUG=1 for the traceback)")
        if isinstance(rv, int) and rv:
            sys.exit(rv)
        return rv

    @staticmethod
    def _debug() -> None:
        if os.environ.get("TENURE_DEBUG"):
            click.echo(_scrub(traceback.format_exc()), err=True)


def _inherit_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A command's --url, else the one given before the command (``tenure --url X jobs list``)."""
    source = ctx.get_parameter_source(param.name)
    if source is click.core.ParameterSource.COMMANDLINE:
        return value
    root = ctx.find_root()
    if root is not ctx and root.get_parameter_source("url") is click.core.ParameterSource.COMMANDLINE:
        return root.params.get("url")
    return value


@click.group(cls=_Group)
@click.version_option(package_name="tenure")
@click.option("--url", envvar="TENURE_URL", default=None, metavar="URL",
              help="Store URL for the command (each command also takes --url).")
def main(url: str | None) -> None:
    """tenure: a durable job queue (SQLite embedded, PostgreSQL scale-out).

    Every command takes --url (or $TENURE_URL); every one that prints a result (all but worker
    and dashboard) takes --json.
    """
    logging.basicConfig(level=os.environ.get("TENURE_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")


# -- options and helpers -----------------------------------------------------------------------

url_option = click.option("--url", envvar="TENURE_URL", default=None, metavar="URL", callback=_inherit_url,
                          help="Store URL (default $TENURE_URL, else sqlite:///tenure.db).")
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")

def parse_duration(text: str, what: str) -> float:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"45s"``, ``"250ms"`` or a plain number of seconds -> seconds
    (:func:`tenure.durations.parse`, the one parser); a bad one is a usage error naming ``what``."""
    try:
        return durations.parse(str(text), what)
    except TenureError:
        raise click.BadParameter(f"{text!r} is not a duration (use e.g. 30s, 15m, 12h, 7d)", param_hint=what) from None


def _duration_option(*names: str, help: str) -> Callable:
    return click.option(*names, default=None, metavar="DURATION", help=help + " (e.g. 30s, 15m, 2h, 7d).")


def _remember_secret(url: str) -> None:
    _SECRETS.update(credentials(url))


def open_store(url: str | None, **options: Any) -> Store:
    """Connect and open the store now (migrating it), so an unreachable store fails here."""
    url = url or os.environ.get("TENURE_URL") or None
    if url:
        _remember_secret(url)
    store = connect(url, **options)
    store.jobs  # noqa: B018 - open now: the coded error surfaces before any output
    return store


def fmt_ms(ms: int | None) -> str:
    """Epoch ms as ``YYYY-MM-DD HH:MM:SS`` UTC ('' for None)."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def fmt_ago(ms: int | None, now: int) -> str:
    if ms is None:
        return ""
    delta = (now - ms) / 1000
    suffix = "ago" if delta >= 0 else "from now"
    delta = abs(delta)
    if delta < 120:
        return f"{delta:.0f}s {suffix}"
    if delta < 7200:
        return f"{delta / 60:.0f}m {suffix}"
    if delta < 172800:
        return f"{delta / 3600:.0f}h {suffix}"
    return f"{delta / 86400:.0f}d {suffix}"


def _short(text: Any, width: int = 60) -> str:
    if text is None:
        return ""
    s = " ".join(str(text).split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _rich_console(err: bool = False):
    """A rich Console when rich is installed and the stream is a terminal, else None."""
    stream = sys.stderr if err else sys.stdout
    if os.environ.get("TENURE_PLAIN") or not stream.isatty():
        return None
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(file=stream)


#: Columns shown whole by the rich table, however narrow the terminal (ids people copy).
WHOLE_COLUMNS = frozenset({"id", "job id", "run id", "origin", "origin id", "worker", "owner"})


def render_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None,
                 console: Any = None) -> str:
    """The rows as a table: a rich table on ``console`` (returns ''), else plain aligned text."""
    rows = [["" if c is None else str(c) for c in r] for r in rows]
    if console is not None:
        from rich import box
        from rich.table import Table

        table = Table(title=title, header_style="bold", show_lines=False, box=box.SIMPLE_HEAD, pad_edge=False)
        for i, h in enumerate(headers):
            if h.lower() in WHOLE_COLUMNS:  # an id is copied whole: never folded, never cut
                width = max([len(h), *(len(r[i]) for r in rows if i < len(r))])
                table.add_column(h, no_wrap=True, overflow="ignore", min_width=width)
            else:
                table.add_column(h, overflow="fold")
        for r in rows:
            table.add_row(*r)
        console.print(table)
        return ""
    widths = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    lines = []
    if title:
        lines.append(title)
    lines.append("  ".join(h.upper().ljust(widths[i]) for i, h in enumerate(headers)).rstrip())
    for r in rows:
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip())
    return "\n".join(lines)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None) -> None:
    text = render_table(headers, rows, title=title, console=_rich_console())
    if text:
        click.echo(text)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, default=_jsonable, sort_keys=False))


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    if isinstance(obj, datetime):
        return obj.isoformat()
    return str(obj)


def _payload(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint=what) from None


def _need(obj: Any, attr: str, feature: str) -> Any:
    fn = getattr(obj, attr, None)
    if fn is None:
        _fail(f"this tenure has no {feature} yet")
    return fn


def load_app(spec: str) -> Any:
    """``module:attribute`` -> the App object, with its ``include`` modules (and those of
    ``$TENURE_INCLUDE``, which ``tenure worker --include`` sets) imported."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    if ":" not in spec:
        raise click.BadParameter(f"expected module:attribute (e.g. myproject.tasks:app), got {spec!r}"
                                 + _app_spec_hint(spec), param_hint="APP")
    module_name, attr = spec.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = getattr(exc, "name", None)
        if missing and not (module_name == missing or module_name.startswith(missing + ".")):
            # The module exists; something it imports does not (a dependency, a typo inside it).
            raise click.BadParameter(f"importing {module_name!r} failed: {exc}", param_hint="APP") from None
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}", param_hint="APP") from None
    try:
        app = getattr(module, attr)
    except AttributeError:
        raise click.BadParameter(f"{module_name!r} has no attribute {attr!r}", param_hint="APP") from None
    from ..app import App

    if not isinstance(app, App):
        raise click.BadParameter(
            f"{spec!r} is a {type(app).__name__}, not a tenure.App: name the App its tasks are declared "
            f"on (app = tenure.App(...) in {module_name}, then {module_name}:app)", param_hint="APP")
    try:
        app.autodiscover(*included())  # App(include=...) and tenure worker --include
    except TenureError as exc:
        raise click.BadParameter(str(exc), param_hint="--include") from None
    return app


def _app_spec_hint(spec: str) -> str:
    """For an APP given without ``:attribute`` (``myapp``, ``myapp.py``, ``proj/tasks.py``), the
    spec that names its App (``: did you mean 'myapp:app'?``) when the module's file, under the
    current directory, assigns one ``tenure.App(...)`` at top level; empty otherwise. The file is
    read, never imported: a hint must not run a script's side effects."""
    module_name = (spec[:-3] if spec.endswith(".py") else spec).strip("/").replace("/", ".")
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        return ""
    base = Path.cwd().joinpath(*module_name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        apps = [target.id for node in tree.body if isinstance(node, ast.Assign) and _is_app_call(node.value)
                for target in node.targets if isinstance(target, ast.Name)]
        return f": did you mean {module_name + ':' + apps[0]!r}?" if len(apps) == 1 else ""
    return ""


def _is_app_call(node: ast.expr) -> bool:
    """``App(...)`` or ``tenure.App(...)``."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == "App") or (isinstance(func, ast.Attribute) and func.attr == "App")


def included() -> list[str]:
    """The modules of ``$TENURE_INCLUDE`` (comma-separated; ``tenure worker --include`` adds to it,
    so supervised children import them too)."""
    return [m.strip() for m in os.environ.get("TENURE_INCLUDE", "").split(",") if m.strip()]


def _close(store: Store) -> None:
    try:
        store.close(grace=1)
    except TenureError:
        pass

