"""The ``tenure`` command line: the operator's surface, over the same public API as user code.

Every command takes ``--url`` (default ``$TENURE_URL``, else ``sqlite:///tenure.db``) and
``--json``; prints tables for people and JSON for scripts; and exits with a one-line error, never a
traceback: status 2 for bad input (a usage error, a malformed value, a TN1xxx refusal), status 1
for everything else (an unreachable store, a fence refusal, a missing job). ``TENURE_DEBUG=1``
adds the traceback for bug reports. No credential is ever printed (``tenure.redact``: the store URL is
shown redacted, and every error line and debug traceback is scrubbed of the URL's secrets).

Tables use ``rich`` when it is installed (``tenure[cli]``) and stdout is a terminal; otherwise
plain aligned columns (stable for ``grep``/``awk``), so the CLI needs nothing beyond ``click``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import parse_qsl, urlencode, urlsplit

import click

from . import connect
from .errors import InvalidArgument, InvalidSchedule, InvalidType, InvalidURL, TenureError
from .records import STATES
from .redact import credentials, redact_url, scrub

if TYPE_CHECKING:
    from .store import Store

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


class _Group(click.Group):
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

    Every command takes --url (or $TENURE_URL) and --json.
    """
    logging.basicConfig(level=os.environ.get("TENURE_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")


# -- options and helpers -----------------------------------------------------------------------

url_option = click.option("--url", envvar="TENURE_URL", default=None, metavar="URL", callback=_inherit_url,
                          help="Store URL (default $TENURE_URL, else sqlite:///tenure.db).")
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, None: 1}


def parse_duration(text: str, what: str) -> float:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"45s"``, ``"250ms"`` or a plain number of seconds -> seconds."""
    m = _DURATION.match(str(text))
    if not m:
        raise click.BadParameter(f"{text!r} is not a duration (use e.g. 30s, 15m, 12h, 7d)", param_hint=what)
    return float(m.group(1)) * _UNITS[m.group(2)]


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


def render_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None,
                 console: Any = None) -> str:
    """The rows as a table: a rich table on ``console`` (returns ''), else plain aligned text."""
    rows = [["" if c is None else str(c) for c in r] for r in rows]
    if console is not None:
        from rich import box
        from rich.table import Table

        table = Table(title=title, header_style="bold", show_lines=False, box=box.SIMPLE_HEAD, pad_edge=False)
        for h in headers:
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


def _close(store: Store) -> None:
    try:
        store.close(grace=1)
    except TenureError:
        pass


# -- demo --------------------------------------------------------------------------------------


@main.command()
@url_option
@click.option("--jobs", "n_jobs", default=500, show_default=True, help="How many demo jobs to enqueue.")
@click.option("--concurrency", default=8, show_default=True)
@json_option
def demo(url: str | None, n_jobs: int, concurrency: int, as_json: bool) -> None:
    """Enqueue jobs and work them with a real worker on SQLite, showing progress and counts."""
    url = url or "sqlite:///tenure-demo.db"
    store = open_store(url)
    jobs = store.jobs
    say = (lambda *a, **k: None) if as_json else click.echo
    say(f"store: {redact_url(url)}")

    def resize(payload: dict, ctx) -> dict:
        if payload["n"] % 97 == 13 and ctx.attempt == 1:
            raise RuntimeError("flaky upstream (retried with backoff)")
        return {"thumb": f"img-{payload['n']}-small.png", "attempt": ctx.attempt}

    t0 = time.perf_counter()
    ids = jobs.enqueue_many([{"kind": "demo.resize", "payload": {"n": i}} for i in range(n_jobs)])
    say(f"enqueued {len(ids)} jobs in {(time.perf_counter() - t0) * 1000:.1f} ms")
    worker = jobs.create_worker({"demo.resize": resize}, concurrency=concurrency, backoff_base=0.05,
                                backoff_cap=0.2)
    t1 = time.perf_counter()
    with worker:
        while True:
            counts = jobs.counts()
            finished = counts["done"] + counts["dead"]
            pending = counts["pending"] + counts["failed"] + counts["leased"]
            if not as_json:
                click.echo(f"\r  done {counts['done']:>6}  waiting {pending:>6}  dead {counts['dead']:>4}",
                           nl=False)
            if pending == 0 and finished:
                break
            time.sleep(0.05)
    elapsed = time.perf_counter() - t1
    stats = worker.stats()
    final = jobs.counts()
    sample = jobs.get(ids[13]) if len(ids) > 13 and ids[13] is not None else None  # plain jobs: never None
    if as_json:
        emit_json({"store": redact_url(url), "enqueued": len(ids), "seconds": round(elapsed, 3),
                   "completions": stats["completions"], "failures": stats["failures"], "counts": final})
    else:
        click.echo("")
        click.echo(f"worked {stats['completions']} completions and {stats['failures']} retried failures in "
                   f"{elapsed:.2f} s ({stats['completions'] / max(elapsed, 1e-9):.0f} jobs/s)")
        click.echo("counts: " + json.dumps(final))
        if sample is not None:
            click.echo(f"job {sample.id}: state={sample.state} attempts={sample.attempts} "
                       f"last_error={sample.last_error!r} result={sample.result}")
    store.close()


# -- worker ------------------------------------------------------------------------------------


def load_app(spec: str):
    """``module:attribute`` -> the App object."""
    if ":" not in spec:
        raise click.BadParameter(f"expected module:attribute (e.g. myproject.tasks:app), got {spec!r}",
                                 param_hint="APP")
    module_name, attr = spec.split(":", 1)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}", param_hint="APP") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise click.BadParameter(f"{module_name!r} has no attribute {attr!r}", param_hint="APP") from None


def _instrument(app: Any, registry_box: list) -> None:
    """Time every handler of ``app`` into a job-duration histogram and capture the worker it
    creates, for ``--metrics-port``. Both wrap the app's own methods (on this instance only) and
    call through to them, so whatever ``run_worker`` does otherwise is unchanged."""
    from .metrics import build_registry

    workers: list = []
    registry, jm = build_registry(store=app.store, workers=lambda: workers, job_metrics=True)
    assert jm is not None  # asked for with job_metrics=True
    registry_box.append(registry)
    handlers, create_worker = app.handlers, app.create_worker

    def timed_handlers() -> dict:
        return jm.wrap_all(handlers())

    def capturing_create_worker(**options: Any):
        w = create_worker(**options)
        workers.append(w)
        return w

    app.handlers = timed_handlers
    app.create_worker = capturing_create_worker


@main.command()
@click.argument("app_spec", metavar="APP")
@url_option
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(min=1),
              help="Handlers run at once per process.")
@click.option("--queues", default=None,
              help="Comma-separated queues (default: all but dead-letter queues and copies).")
@click.option("--processes", default=1, show_default=True, type=click.IntRange(min=1),
              help="Worker processes under one supervisor (for CPU-bound handlers).")
@click.option("--max-jobs-per-process", default=None, type=click.IntRange(min=1),
              help="Recycle a worker process after this many jobs (leaky handlers).")
@click.option("--metrics-port", default=None, type=click.IntRange(min=0, max=65535),
              help="Serve Prometheus /metrics on this port.")
@click.option("--metrics-host", default="127.0.0.1", show_default=True, help="Address for --metrics-port.")
@click.option("--zombie-share", default=0.5, show_default=True, type=click.FloatRange(min=0, max=1, min_open=True),
              help="Exit with status 75 (to be replaced) once handlers that outlived their timeout or "
                   "cancellation hold this share of the slots.")
@click.option("--stop-grace", default=None, type=click.FloatRange(min=0),
              help="Seconds handlers get to wind up on a stop, and after a timeout or cancellation before "
                   "they count as zombie slots (default 5).")
@click.option("--lease", "lease", default=None, metavar="DURATION",
              help="Lease of each claimed job (default 30s): how long a job whose worker was killed "
                   "waits before another claims it; renewed at a third of it while the job runs "
                   "(e.g. 10s, 2m; at least 1s).")
@click.option("--grace", default=30.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds running jobs get to finish on SIGTERM/SIGINT; a job still running then is "
                   "released (pending again). A second signal stops at once.")
@click.option("--log-level", default=None, type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
                                                              case_sensitive=False),
              help="Level of the tenure.* loggers (default $TENURE_LOG_LEVEL, else INFO). Failed attempts "
                   "log at WARNING with their traceback, dead jobs at ERROR.")
@click.option("--log-format", default=None, type=click.Choice(["text", "json"]),
              help="text lines, or one JSON object per line (default $TENURE_LOG_FORMAT, else text).")
def worker(app_spec: str, url: str | None, concurrency: int, queues: str | None, processes: int,
           max_jobs_per_process: int | None, metrics_port: int | None, metrics_host: str,
           zombie_share: float, stop_grace: float | None, lease: str | None, grace: float,
           log_level: str | None, log_format: str | None) -> None:
    """Run a worker over an App's tasks: tenure worker myproject.tasks:app.

    With --processes N (or --max-jobs-per-process) the worker runs as N child processes under a
    supervisor that restarts any that die and forwards SIGINT/SIGTERM. A worker whose slots are
    held by zombie handlers (--zombie-share) exits with status 75; under the supervisor it is
    replaced.
    """
    from .worker_log import configure

    log_level = (log_level or os.environ.get("TENURE_LOG_LEVEL") or "INFO").upper()
    log_format = log_format or os.environ.get("TENURE_LOG_FORMAT") or "text"
    os.environ["TENURE_LOG_LEVEL"], os.environ["TENURE_LOG_FORMAT"] = log_level, log_format  # the children's
    configure(log_level, log_format)
    health = {"zombie_share": zombie_share, "grace": grace}
    if stop_grace is not None:
        health["stop_grace"] = stop_grace
    queue_list = [q.strip() for q in queues.split(",") if q.strip()] if queues else None
    lease_ms = _lease_ms(lease)
    options: dict[str, Any] = {} if lease_ms is None else {"lease_ms": lease_ms}
    if url:
        _remember_secret(url)
    if processes > 1 or max_jobs_per_process is not None:
        try:
            from .supervisor import run_supervisor
        except ImportError:
            _fail("--processes and --max-jobs-per-process need tenure's supervisor, which this tenure lacks")
        load_app(app_spec)  # fail fast, in the parent, on a bad APP
        server = None
        if metrics_port is not None:
            # Children are separate processes: the parent serves the store's gauges only.
            try:
                from .metrics import build_registry, serve
            except ImportError as exc:
                _fail(f"--metrics-port needs prometheus-client: pip install 'tenure[metrics]' ({exc})")

            registry, _ = build_registry(store=open_store(url))
            server = serve(registry, metrics_port, metrics_host)
        try:
            rc = run_supervisor(app_spec, processes=processes, max_jobs_per_process=max_jobs_per_process,
                                concurrency=concurrency, queues=queue_list, url=url, worker_options=health,
                                **options)
        finally:
            if server is not None:
                server.shutdown()
        if isinstance(rc, int) and rc:
            sys.exit(rc)
        return
    app = load_app(app_spec)
    if url:
        app._url = url
    server = None
    if metrics_port is not None:
        try:
            from .metrics import serve
        except ImportError as exc:
            _fail(f"--metrics-port needs prometheus-client: pip install 'tenure[metrics]' ({exc})")

        box: list = []
        _instrument(app, box)
        server = serve(box[0], metrics_port, metrics_host)
        logging.getLogger("tenure").info("metrics on http://%s:%d/metrics", metrics_host, metrics_port)
    from .errors import WorkerUnhealthy
    from .worker_health import EXIT_UNHEALTHY

    try:
        app.run_worker(concurrency=concurrency, queues=queue_list, **health, **options)
    except WorkerUnhealthy as exc:
        click.echo(f"tenure worker: {exc}; exiting with status {EXIT_UNHEALTHY} to be replaced", err=True)
        sys.exit(EXIT_UNHEALTHY)
    finally:
        if server is not None:
            server.shutdown()


def _lease_ms(text: str | None) -> int | None:
    """``--lease``: a duration of at least one second, in ms (None: the worker's default)."""
    if text is None:
        return None
    seconds = parse_duration(text, "--lease")
    if not 1 <= seconds <= 86_400:
        raise click.BadParameter(f"{text!r}: a lease must be between 1s and 1d", param_hint="--lease")
    return int(seconds * 1000)


# -- enqueue -----------------------------------------------------------------------------------

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
        from .task_args import checked_payload

        body = checked_payload(load_app(app_spec), kind, body)
    delay_s = None if delay is None else parse_duration(delay, "--delay")
    store = open_store(url)
    try:
        new_id = store.jobs.enqueue(kind, body, queue=queue, priority=priority, delay=delay_s, id=job_id,
                                    max_attempts=max_attempts, tags=list(tags) or None,
                                    meta=None if meta is None else _payload(meta, "--meta"))
    finally:
        _close(store)
    if as_json:
        emit_json({"id": new_id})
    else:
        click.echo(new_id if new_id is not None else "(deduplicated: no new job)")


def _enqueue_file(store: Store, lines: list[str], kind: str | None, batch_size: int, *,
                  show_progress: bool) -> int:
    """``tenure enqueue --from-file``: every line checked first, then the whole file in one
    transaction (:mod:`tenure.bulk`); a progress bar on a terminal while it writes."""
    from . import bulk

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


# -- jobs --------------------------------------------------------------------------------------


@main.group(cls=click.Group)
def jobs() -> None:
    """List, inspect, cancel, requeue and redrive jobs."""


def _job_dict(job: Any) -> dict[str, Any]:
    return dataclasses.asdict(job)


@jobs.command("list")
@url_option
@click.option("--state", type=click.Choice(STATES), default=None)
@click.option("--queue", default=None)
@click.option("--kind", default=None)
@click.option("--tag", default=None, help="Only jobs carrying this tag.")
@click.option("--order", type=click.Choice(["newest", "oldest"]), default="newest", show_default=True,
              help="Newest first (tenure's ids are time-ordered), or oldest first.")
@click.option("--after", default=None, metavar="JOB_ID", help="Continue after this id (keyset paging).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1, max=10_000))
@json_option
def jobs_list(url: str | None, state: str | None, queue: str | None, kind: str | None, tag: str | None,
              order: str, after: str | None, limit: int, as_json: bool) -> None:
    """One keyset page of jobs, by id (filter by --state, --queue, --kind, --tag)."""
    store = open_store(url)
    try:
        page = store.jobs.page(state=state, kind=kind, queue=queue, tag=tag, after=after, limit=limit,
                               order=order)
    finally:
        _close(store)
    if as_json:
        emit_json({"items": [_job_dict(j) for j in page.items], "next_after": page.next_after})
        return
    print_table(["id", "kind", "queue", "state", "attempts", "run at (UTC)", "updated (UTC)", "last error"],
                [(j.id, j.kind, j.queue, j.state, f"{j.attempts}/{j.max_attempts}", fmt_ms(j.run_at),
                  fmt_ms(j.updated_at), _short(j.last_error, 40)) for j in page.items])
    if page.next_after:
        click.echo(f"more: --after {page.next_after}")
    elif not page.items:
        click.echo("no jobs match")


@jobs.command("show")
@click.argument("job_id")
@url_option
@json_option
def jobs_show(job_id: str, url: str | None, as_json: bool) -> None:
    """Everything the store holds about one job (never its lease token)."""
    store = open_store(url)
    try:
        job = store.jobs.get(job_id)
    finally:
        _close(store)
    if job is None:
        _fail(f"no job {job_id!r}")
    if as_json:
        emit_json(_job_dict(job))
        return
    fields = [("id", job.id), ("kind", job.kind), ("queue", job.queue), ("state", job.state),
              ("priority", job.priority), ("attempts", f"{job.attempts} of {job.max_attempts}"),
              ("lease generation", job.lease_generation), ("lease owner", job.lease_owner or ""),
              ("lease until", fmt_ms(job.lease_until)), ("run at", fmt_ms(job.run_at)),
              ("created", fmt_ms(job.created_at)), ("updated", fmt_ms(job.updated_at)),
              ("timeout", f"{job.timeout_ms} ms" if job.timeout_ms else ""),
              ("singleton key", job.singleton_key or ""), ("group key", job.group_key or ""),
              ("dead letter of", job.origin_id or ""), ("last error", job.last_error or ""),
              ("cancel requested", fmt_ms(job.cancel_requested_at) if job.cancel_requested_at else ""),
              ("tags", ", ".join(job.tags) if isinstance(job.tags, list) else "(cannot be decoded)"),
              ("meta", json.dumps(job.meta, ensure_ascii=False, default=_jsonable) if job.meta else ""),
              ("progress", "" if job.progress is None else
               f"{job.progress.fraction * 100:.0f}% (attempt {job.progress.attempt}, {fmt_ms(job.progress.at)})"
               + (f": {job.progress.note}" if job.progress.note else ""))]
    print_table(["field", "value"], fields)
    click.echo("payload:")
    click.echo(json.dumps(job.payload, indent=2, ensure_ascii=False, default=_jsonable))
    if job.result is not None:
        click.echo("result:")
        click.echo(json.dumps(job.result, indent=2, ensure_ascii=False, default=_jsonable))
    if job.errors and not isinstance(job.errors, list):  # a tenure.Undecodable history
        click.echo(f"error history: cannot be decoded ({getattr(job.errors, 'reason', '?')})")
    elif job.errors:
        click.echo(f"error history ({len(job.errors)} failed attempt(s), oldest first):")
        for e in job.errors:
            took = f", {e['duration_ms']} ms" if e.get("duration_ms") is not None else ""
            click.echo(f"- attempt {e.get('attempt')} at {fmt_ms(e.get('at'))} by {e.get('owner') or '?'}{took}: "
                       f"{e.get('type') or 'error'}: {e.get('message')}")
            for line in (e.get("traceback") or "").rstrip().splitlines():
                click.echo(f"    {line}")


def _bulk_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The filter options of the bulk forms of jobs cancel / requeue / delete (tenure.cli_bulk)."""
    for opt in reversed([
        click.option("--state", type=click.Choice(STATES), default=None, help="Only jobs in this state."),
        click.option("--kind", default=None, help="Only jobs of this kind."),
        click.option("--queue", default=None, help="Only jobs in this queue."),
        click.option("--tag", default=None, help="Only jobs carrying this tag."),
        click.option("--older-than", "older_than", default=None, metavar="DURATION",
                     help="Only jobs created longer ago than this (e.g. 7d, 12h, 90s)."),
        click.option("--dry-run", is_flag=True, help="Only count the jobs it would change."),
        click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation."),
    ]):
        fn = opt(fn)
    return fn


def _bulk(operation: str, job_id: str | None, url: str | None, filters: dict[str, Any], dry_run: bool,
          yes: bool, as_json: bool) -> bool:
    """Run the bulk form when filters are given (answers True); refuse a JOB_ID with filters."""
    given = any(v is not None for v in filters.values())
    if job_id is not None:
        if given or dry_run:
            raise click.UsageError("give a JOB_ID or filters, not both")
        return False
    from .cli_bulk import run_bulk

    run_bulk(operation, url, filters, dry_run=dry_run, yes=yes, as_json=as_json)
    return True


@jobs.command("cancel")
@click.argument("job_id", required=False)
@url_option
@_bulk_options
@json_option
def jobs_cancel(job_id: str | None, url: str | None, state: str | None, kind: str | None, queue: str | None,
                tag: str | None, older_than: str | None, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Cancel a job: a queued one at once; a running one is asked to stop (its worker sets
    ctx.cancelled and settles it cancelled within a second; store.jobs.request_cancel).
    Without JOB_ID, every job the filters match (asks first; --yes, --dry-run)."""
    if _bulk("cancel", job_id, url, {"state": state, "kind": kind, "queue": queue, "tag": tag,
                                     "older_than": older_than}, dry_run, yes, as_json):
        return
    assert job_id is not None
    store = open_store(url)
    try:
        outcome = store.jobs.request_cancel(job_id)
    finally:
        _close(store)
    if as_json:
        data: dict[str, Any] = {"id": job_id, "cancelled": outcome == "cancelled"}
        if outcome == "requested":
            data["requested"] = True
        emit_json(data)
    elif outcome == "cancelled":
        click.echo(f"cancelled {job_id}")
    elif outcome == "requested":
        click.echo(f"cancel requested for {job_id}: it is running; its worker stops it and settles it cancelled")
    else:
        click.echo(f"{job_id} was already cancelled")


@jobs.command("requeue")
@click.argument("job_id", required=False)
@url_option
@_bulk_options
@json_option
def jobs_requeue(job_id: str | None, url: str | None, state: str | None, kind: str | None, queue: str | None,
                 tag: str | None, older_than: str | None, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Return a failed, dead, cancelled or lease-expired job to pending now (attempts are kept).
    Without JOB_ID, every such job the filters match (asks first; --yes, --dry-run)."""
    if _bulk("requeue", job_id, url, {"state": state, "kind": kind, "queue": queue, "tag": tag,
                                      "older_than": older_than}, dry_run, yes, as_json):
        return
    assert job_id is not None
    store = open_store(url)
    try:
        changed = store.jobs.requeue(job_id)
    finally:
        _close(store)
    if as_json:
        emit_json({"id": job_id, "requeued": changed})
    else:
        click.echo(f"requeued {job_id}" if changed else f"{job_id} was already pending")


@jobs.command("delete")
@click.argument("job_id", required=False)
@url_option
@_bulk_options
@json_option
def jobs_delete(job_id: str | None, url: str | None, state: str | None, kind: str | None, queue: str | None,
                tag: str | None, older_than: str | None, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Delete a job and its checkpoints (never a running one: TN2091). Without JOB_ID, every job
    the filters match except running ones (asks first; --yes, --dry-run)."""
    if _bulk("delete", job_id, url, {"state": state, "kind": kind, "queue": queue, "tag": tag,
                                     "older_than": older_than}, dry_run, yes, as_json):
        return
    assert job_id is not None
    store = open_store(url)
    try:
        deleted = store.jobs.delete(job_id)
    finally:
        _close(store)
    if as_json:
        emit_json({"id": job_id, "deleted": deleted})
    elif deleted:
        click.echo(f"deleted {job_id}")
    else:
        _fail(f"no job {job_id!r}")


@jobs.command("redrive")
@click.argument("queue")
@url_option
@click.option("--limit", default=None, type=click.IntRange(min=1), help="At most this many jobs.")
@json_option
def jobs_redrive(queue: str, url: str | None, limit: int | None, as_json: bool) -> None:
    """Move the dead-lettered jobs in QUEUE back to their origin queue."""
    store = open_store(url)
    try:
        moved = store.jobs.redrive(queue, limit=limit)
    finally:
        _close(store)
    if as_json:
        emit_json({"queue": queue, "redriven": moved})
    else:
        click.echo(f"redrove {moved} job(s) from {queue}")


# -- queues ------------------------------------------------------------------------------------


@main.group(cls=click.Group)
def queues() -> None:
    """List, create, pause and resume queues."""


@queues.command("list")
@url_option
@json_option
def queues_list(url: str | None, as_json: bool) -> None:
    """Every queue with its jobs per state and whether it is paused."""
    from .dashboard.insights import Insights

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


# -- schedules ---------------------------------------------------------------------------------


@main.group(cls=click.Group)
def schedules() -> None:
    """List, add and remove cron schedules."""


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
    print_table(["name", "cron", "tz", "kind", "queue", "next fire (UTC)", "last fire (UTC)"],
                [(s["name"] + (f" #{s['key']}" if s.get("key") else ""), s.get("cron"), s.get("tz"),
                  s.get("kind"), s.get("queue") or "",
                  fmt_ms(s.get("next_fire_at")), fmt_ms(s.get("last_fire_at"))) for s in items])


@schedules.command("add")
@click.argument("name")
@click.argument("cron")
@click.argument("kind")
@url_option
@click.option("--payload", default=None, metavar="JSON")
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone the cron is read in.")
@click.option("--queue", default=None)
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
        result = registry.add(name, cron, kind, body, tz=tz, queue=queue, key=key)
    finally:
        _close(store)
    if as_json:
        emit_json(_schedule_dict(result) if result is not None else {"name": name})
    else:
        click.echo(f"schedule {name} added ({cron} {tz} -> {kind})")


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


# -- workflow runs -----------------------------------------------------------------------------


@main.group(cls=click.Group)
def runs() -> None:
    """Inspect workflow runs."""


@runs.command("show")
@click.argument("job_id")
@url_option
@json_option
def runs_show(job_id: str, url: str | None, as_json: bool) -> None:
    """A workflow run's nodes: done, running or pending, with their values."""
    try:
        from .flow import describe_run
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
    if isinstance(nodes, list) and nodes and isinstance(nodes[0], dict):
        cols = [c for c in ("id", "task", "needs", "status", "generation", "value") if any(c in n for n in nodes)]
        print_table(cols, [[_short(json.dumps(n.get(c), default=_jsonable) if isinstance(n.get(c), dict | list)
                                   else n.get(c), 50) for c in cols] for n in nodes])
    for k, v in data.items():
        if isinstance(v, list | dict) and k != "nodes":
            click.echo(f"{k}: {json.dumps(v, default=_jsonable)}")


# -- stats -------------------------------------------------------------------------------------


def _stats_data(insights: Any) -> dict[str, Any]:
    ov = insights.overview(fresh=True)
    tp = ov.throughput
    last = tp.buckets[-1] if tp.buckets else {}
    return {
        "store": redact_url(ov.store), "now": ov.now, "counts": ov.counts,
        "queues": [dataclasses.asdict(q) for q in ov.queues],
        "last_hour": tp.totals(), "this_minute": {k: last.get(k, 0) for k in ("done", "failed", "dead",
                                                                              "cancelled")},
        "workers_alive": ov.workers_alive, "workers_total": ov.workers_total,
    }


def _stats_text(data: dict[str, Any]) -> str:
    counts = data["counts"]
    lines = [f"store {data['store']} at {fmt_ms(data['now'])} UTC",
             "jobs: " + "  ".join(f"{s} {counts.get(s, 0)}" for s in STATES)]
    h, m = data["last_hour"], data["this_minute"]
    lines.append(f"last hour: done {h['done']}  failed {h['failed']}  dead {h['dead']}  "
                 f"cancelled {h['cancelled']}   this minute: done {m['done']}  failed {m['failed']}")
    lines.append(f"workers alive: {data['workers_alive']} of {data['workers_total']} registered")
    table = render_table(["queue", "paused", *STATES],
                         [(q["name"], "yes" if q["paused"] else "", *(q["counts"].get(s, 0) for s in STATES))
                          for q in data["queues"]])
    return "\n".join(lines) + "\n" + table


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
    from .dashboard.insights import Insights

    store = open_store(url)
    insights = Insights(store, ttl=0)
    try:
        if not watch:
            data = _stats_data(insights)
            emit_json(data) if as_json else click.echo(_stats_text(data))
            return
        console = None if as_json else _rich_console()
        n = 0
        if console is not None:
            from rich.live import Live
            from rich.text import Text

            with Live(Text(_stats_text(_stats_data(insights))), console=console, auto_refresh=False) as live:
                n = 1
                while iterations is None or n < iterations:
                    time.sleep(interval)
                    live.update(Text(_stats_text(_stats_data(insights))), refresh=True)
                    n += 1
            return
        while iterations is None or n < iterations:
            if n:
                time.sleep(interval)
            data = _stats_data(insights)
            if as_json:
                emit_json(data)  # one JSON document per line
            else:
                click.echo(_stats_text(data) + "\n")
            sys.stdout.flush()
            n += 1
    finally:
        _close(store)


# -- sweep, migrate, maintain ---------------------------------------------------------------------


@main.command()
@url_option
@click.option("--older-than", "older_than", required=True, metavar="DURATION",
              help="Delete done/dead/cancelled jobs last changed longer ago than this (e.g. 7d).")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="At most this many jobs.")
@json_option
def sweep(url: str | None, older_than: str, limit: int | None, as_json: bool) -> None:
    """Delete settled jobs (and their checkpoints) older than --older-than; live jobs are never touched."""
    from .dashboard.insights import Insights

    seconds = parse_duration(older_than, "--older-than")
    store = open_store(url)
    try:
        horizon = Insights(store).now_ms() - int(seconds * 1000)
        result = store.jobs.sweep(settled_before=horizon, limit=limit)
    finally:
        _close(store)
    if as_json:
        emit_json({"removed": result.removed, "settled_before": horizon})
    else:
        click.echo(f"removed {result.removed} settled job(s) last changed before {fmt_ms(horizon)} UTC")


def _read_only_url(url: str) -> str:
    """The same store, opened so it can read but never write (for ``migrate --check``)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    query = parse_qsl(parts.query, keep_blank_values=True)
    if scheme == "sqlite":
        query = [(k, v) for k, v in query if k != "mode"] + [("mode", "ro")]
    elif scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        opts = [v for k, v in query if k == "options"]
        query = [(k, v) for k, v in query if k != "options"]
        query.append(("options", " ".join([*opts, "-c default_transaction_read_only=on"]).strip()))
    return url.split("?", 1)[0] + "?" + urlencode(query)


@main.command()
@url_option
@click.option("--check", is_flag=True,
              help="Change nothing: exit 0 when the schema is current, 1 when migrations are pending, "
                   "1 with TN0006 when the database is newer than this tenure.")
@json_option
def migrate(url: str | None, check: bool, as_json: bool) -> None:
    """Create or upgrade tenure's tables (every command does this at first use; this does only that)."""
    from .dashboard.insights import Insights
    from .engine.migrate import load_migrations
    from .errors import ReadOnlyStore

    url = url or os.environ.get("TENURE_URL") or "sqlite:///tenure.db"
    _remember_secret(url)
    scheme = url.split(":", 1)[0].lower()
    package = "tenure.engine.sqlite" if scheme == "sqlite" else "tenure.engine.postgres"
    latest = load_migrations(package)[-1].version
    target = _read_only_url(url) if check else url
    try:
        store = open_store(target)
    except ReadOnlyStore:
        if not check:
            raise
        msg = f"migrations pending: {redact_url(url)} is behind this tenure (schema {latest}); run tenure migrate"
        if as_json:
            emit_json({"store": redact_url(url), "latest": latest, "current": False})
            sys.exit(EXIT_ERROR)
        _fail(msg)
    try:
        applied = Insights(store).schema_versions()
    finally:
        _close(store)
    version = max((v for v, _, _ in applied), default=0)
    if as_json:
        emit_json({"store": redact_url(url), "version": version, "latest": latest, "current": version == latest,
                   "applied": [{"version": v, "name": n, "applied_at": a} for v, n, a in applied]})
        return
    click.echo(f"{redact_url(url)}: schema version {version} (this tenure: {latest}) — "
               + ("up to date" if version == latest else "behind"))
    print_table(["version", "name", "applied (UTC)"], [(v, n, fmt_ms(a)) for v, n, a in applied])


@main.command()
@url_option
@click.option("--once", is_flag=True, required=True, help="Run one maintenance pass and exit.")
@json_option
def maintain(url: str | None, once: bool, as_json: bool) -> None:
    """Run one maintenance pass by hand (schedules, expiry, retention); workers run it in the background."""
    try:
        from .maintenance import Maintainer
    except ImportError:
        _fail("this tenure has no maintenance service")
    store = open_store(url)
    try:
        run_once = _need(Maintainer(store), "run_once", "maintenance pass (Maintainer.run_once)")
        result = run_once()
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


# -- dashboard ---------------------------------------------------------------------------------

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach."""
    if host in _LOOPBACK:
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@main.command()
@url_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8350, show_default=True, type=click.IntRange(min=0, max=65535))
@click.option("--token", envvar="TENURE_DASHBOARD_TOKEN", default=None, metavar="TOKEN",
              help="Require this token (Bearer, or the basic-auth password) for every page and action "
                   "[default: $TENURE_DASHBOARD_TOKEN]. Required when --host is not a loopback address.")
@click.option("--read-only", is_flag=True, help="Hide and refuse every action (cancel, requeue, pause...).")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="Also answer requests addressed to this host name (repeatable): a reverse proxy's public "
                   "name, a name Prometheus scrapes. Any other Host gets 421 (DNS-rebinding defence).")
def dashboard(url: str | None, host: str, port: int, token: str | None, read_only: bool,
              allowed_hosts: tuple[str, ...]) -> None:
    """Serve the web dashboard (and Prometheus /metrics): tenure dashboard --port 8350.

    It answers only requests addressed to its own names: the bound address, localhost, loopback
    addresses and each --allowed-host."""
    if token:
        _SECRETS.add(token)
    from .dashboard.hosts import normalize_host

    for name in allowed_hosts:
        if normalize_host(name) is None:
            raise click.BadParameter(f"{name!r} is not a host name or an IP address (no scheme, no port)",
                                     param_hint="--allowed-host")
    names = [*allowed_hosts]
    if host not in ("0.0.0.0", "::") and normalize_host(host) is not None:
        names.append(host)  # the bound name or address is one of the dashboard's own
    if not is_loopback(host) and not token:
        raise click.UsageError(f"--host {host} is reachable from other machines: set --token (or "
                               "$TENURE_DASHBOARD_TOKEN) so pages and actions need it")
    try:
        import uvicorn

        from .dashboard import create_app
    except ImportError as exc:
        _fail(f"the dashboard needs its extra: pip install 'tenure[dashboard]' ({exc})")
    store = open_store(url)
    app = create_app(store, auth_token=token or None, read_only=read_only, allowed_hosts=names)
    click.echo(f"tenure dashboard for {redact_url(store.engine.describe())} on http://{host}:{port}/"
               + (" (token required)" if token else ""), err=True)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    finally:
        _close(store)


if __name__ == "__main__":  # pragma: no cover
    main()
