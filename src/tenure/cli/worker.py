"""``tenure worker``: run a worker (or a supervisor of worker processes) over an App's tasks."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click

from .. import durations
from ..errors import TenureError
from ..worker.config import WorkerConfig, option_doc, text_options
from .common import (
    _fail,
    _remember_secret,
    included,
    load_app,
    main,
    open_store,
    url_option,
)


def _instrument(app: Any, registry_box: list) -> None:
    """Time every handler of ``app`` into a job-duration histogram and capture the worker it
    creates, for ``--metrics-port``. Both wrap the app's own methods (on this instance only) and
    call through to them, so whatever ``run_worker`` does otherwise is unchanged."""
    from ..metrics import build_registry

    workers: list = []
    registry, jm = build_registry(store=app.store, workers=lambda: workers, job_metrics=True)
    assert jm is not None  # asked for with job_metrics=True
    registry_box.append(registry)
    handlers, create_worker = app.handlers, app.create_worker

    def timed_handlers() -> dict:
        return jm.wrap_all(handlers())

    def capturing_create_worker(*args: Any, **options: Any):
        w = create_worker(*args, **options)
        workers.append(w)
        return w

    app.handlers = timed_handlers
    app.create_worker = capturing_create_worker


#: ``tenure worker``'s default --concurrency on SQLite. Short jobs drain at a rate set by how
#: many settle and are claimed per round trip, which is at most the free slots: 4 slots drained
#: ~1/2 to 1/5 of what 64 do (docs/performance.md, "Default settings"). An idle slot costs a
#: parked thread and nothing else, and a handler that blocks on I/O wants many; for CPU-bound
#: handlers give --processes instead (the GIL runs one handler at a time per process). SQLite has
#: one writer and one settler, and its drain peaks near 64 slots.
DEFAULT_CONCURRENCY = 64
#: The default on PostgreSQL. Its throughput for short jobs is set by how many leases are in
#: flight while the settlers' round trips (a commit each) overlap: 256 slots drained 1.4-2x what
#: 64 did in drains alternating on one loaded host, at the same or less CPU per job; 512 with two
#: settlers drained no more, but 512 with four (one per 128 slots, ``worker.completer``) drained
#: 1.3-1.5x what 256 did, at ~8% more CPU per job (docs/performance.md, "PostgreSQL drain: what the
#: server and the worker spend"). An idle slot is a parked thread.
DEFAULT_CONCURRENCY_POSTGRES = 512


def default_concurrency(dialect: str) -> int:
    """``tenure worker``'s default --concurrency for a store of this dialect."""
    return DEFAULT_CONCURRENCY_POSTGRES if dialect == "postgres" else DEFAULT_CONCURRENCY


def _with_slots(config: WorkerConfig, given: dict[str, Any], url: str | None, app: Any) -> WorkerConfig:
    """``config`` with --concurrency if it was given, else the command line's default for the
    dialect of the store the worker will open."""
    if given.get("w_concurrency") is not None:
        return config
    return replace(config, concurrency=default_concurrency(_store_dialect(url, app)))


def _store_dialect(url: str | None, app: Any) -> str:
    """The dialect the worker's store will have: the --url's, else the app's own store's or URL's,
    else ``$TENURE_URL``'s, else the default URL's. A URL that names no dialect counts as SQLite
    here (opening the store refuses it with its own coded error)."""
    from ..engine.urls import dialect_of
    from ..errors import TenureError
    from ..store import DEFAULT_URL

    store = getattr(app, "_store", None)
    if not url and store is not None:
        return str(store.engine.dialect)
    try:
        return dialect_of(url or getattr(app, "_url", None) or os.environ.get("TENURE_URL") or DEFAULT_URL)
    except TenureError:
        return "sqlite"


#: Help of the flags whose table doc line says less than an operator needs.
_HELP = {
    "concurrency": f"Handlers run at once per process (each a thread, or a task for async handlers); "
                   f"default {DEFAULT_CONCURRENCY} on SQLite, {DEFAULT_CONCURRENCY_POSTGRES} on PostgreSQL.",
    "queues": "Comma-separated queues (default: all but dead-letter queues and copies).",
    "lease": "Lease of each claimed job (default 30s): how long a job whose worker was killed waits before "
             "another claims it; renewed at a third of it while the job runs (e.g. 10s, 2m).",
    "stop_grace": "How long handlers get to wind up on a stop, and after a timeout or cancellation before they "
                  "count as zombie slots (default 5s).",
    "max_jobs": "Stop after this many jobs have settled, then exit 0 (a one-process worker for a script or a "
                "cron job, like rq's --burst for a known count; --processes recycles with --max-jobs-per-process).",
    "zombie_share": "Exit with status 75 (to be replaced) once handlers that outlived their timeout or "
                    "cancellation hold this share of the slots (default 0.5).",
}
#: Worker options the command line does not take as flags.
_NOT_FLAGS: set[str] = set()


class _WorkerOption(click.ParamType):
    """The text form of one worker option, checked by the worker's own table at parse time (a bad
    value is a usage error naming the flag), kept as text for :meth:`WorkerConfig.from_text`."""

    def __init__(self, name: str) -> None:
        self.option = name
        self.name = "DURATION" if option_doc(name)[0] == "seconds" else option_doc(name)[0].upper() or "TEXT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            WorkerConfig.from_text({self.option: str(value)})
        except TenureError as exc:
            self.fail(exc.message, param, ctx)
        return str(value)


def _worker_flags(fn: Callable[..., Any]) -> Callable[..., Any]:
    """One ``--flag`` per worker option that has a text form, from :class:`WorkerConfig`'s table."""
    for name in reversed(text_options()):
        if name in _NOT_FLAGS:
            continue
        unit, doc = option_doc(name)
        help_ = _HELP.get(name) or f"{doc[0].upper()}{doc[1:]} ({unit})."
        fn = click.option(f"--{name.replace('_', '-')}", f"w_{name}", type=_WorkerOption(name), default=None,
                          help=help_)(fn)
    return fn


def _one_process_only(config: WorkerConfig) -> None:
    """Refuse --max-jobs under the supervisor, in the command line's words (the supervisor's own
    refusal speaks Python: ``max_jobs_per_process=``)."""
    if config.max_jobs is not None:
        raise click.UsageError("--max-jobs stops a one-process worker; under --processes or --max-jobs-per-process "
                               "(which recycles each child after that many jobs) it has no meaning")


@main.command()
@click.argument("app_spec", metavar="APP")
@url_option
@_worker_flags
@click.option("--processes", default=1, show_default=True, type=click.IntRange(min=1),
              help="Worker processes under one supervisor (for CPU-bound handlers).")
@click.option("--max-jobs-per-process", default=None, type=click.IntRange(min=1),
              help="Recycle a worker process after this many jobs (leaky handlers).")
@click.option("--metrics-port", default=None, type=click.IntRange(min=0, max=65535),
              help="Serve Prometheus /metrics on this port.")
@click.option("--metrics-host", default="127.0.0.1", show_default=True, help="Address for --metrics-port.")
@click.option("--grace", default="30", show_default=True, metavar="DURATION",
              help="How long running jobs get to finish on SIGTERM/SIGINT (seconds, or e.g. 30s, 2m); a job "
                   "still running then is released (pending again). A second signal stops at once.")
@click.option("--log-level", default=None, type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
                                                              case_sensitive=False),
              help="Level of the tenure.* loggers (default $TENURE_LOG_LEVEL, else INFO). Failed attempts "
                   "log at WARNING with their traceback, dead jobs at ERROR.")
@click.option("--log-format", default=None, type=click.Choice(["text", "json"]),
              help="text lines, or one JSON object per line (default $TENURE_LOG_FORMAT, else text).")
@click.option("--include", "include", multiple=True, metavar="MODULE",
              help="Import MODULE before starting, for the tasks it declares on the app (repeatable; "
                   "adds to the app's own App(include=[...]) and to $TENURE_INCLUDE).")
def worker(app_spec: str, url: str | None, processes: int, max_jobs_per_process: int | None,
           metrics_port: int | None, metrics_host: str, grace: str, log_level: str | None, log_format: str | None,
           include: tuple[str, ...], **flags: str | None) -> None:
    """Run a worker over an App's tasks: tenure worker myproject.tasks:app.

    With --processes N (or --max-jobs-per-process) the worker runs as N child processes under a
    supervisor that restarts any that die and forwards SIGINT/SIGTERM. A worker whose slots are
    held by zombie handlers (--zombie-share) exits with status 75; under the supervisor it is
    replaced.
    """
    from ..worker_log import configure

    log_level = (log_level or os.environ.get("TENURE_LOG_LEVEL") or "INFO").upper()
    log_format = log_format or os.environ.get("TENURE_LOG_FORMAT") or "text"
    os.environ["TENURE_LOG_LEVEL"], os.environ["TENURE_LOG_FORMAT"] = log_level, log_format  # the children's
    configure(log_level, log_format)
    if include:  # read by load_app, here and in every supervised child
        os.environ["TENURE_INCLUDE"] = ",".join([*included(), *include])
    try:
        config = WorkerConfig.from_text({k[2:]: val for k, val in flags.items() if val is not None})
        grace_s = durations.parse(grace, "--grace")
    except TenureError as exc:
        raise click.BadParameter(exc.message) from None
    if url:
        _remember_secret(url)
    if processes > 1 or max_jobs_per_process is not None:
        _one_process_only(config)
        try:
            from ..supervisor import run_supervisor
        except ImportError:
            _fail("--processes and --max-jobs-per-process need tenure's supervisor, which this tenure lacks")
        config = _with_slots(config, flags, url, load_app(app_spec))  # load: fail fast, in the parent, on a bad APP
        server = None
        if metrics_port is not None:
            # Children are separate processes: the parent serves the store's gauges only.
            try:
                from ..metrics import build_registry, serve
            except ImportError as exc:
                _fail(f"--metrics-port needs prometheus-client: pip install 'tenure[metrics]' ({exc})")

            registry, _ = build_registry(store=open_store(url))
            server = serve(registry, metrics_port, metrics_host)
        try:
            rc = run_supervisor(app_spec, config, processes=processes, max_jobs_per_process=max_jobs_per_process,
                                url=url, grace=grace_s)
        finally:
            if server is not None:
                server.shutdown()
        if isinstance(rc, int) and rc:
            sys.exit(rc)
        return
    app = load_app(app_spec)
    if url:
        app._url = url
    config = _with_slots(config, flags, url, app)
    server = None
    if metrics_port is not None:
        try:
            from ..metrics import serve
        except ImportError as exc:
            _fail(f"--metrics-port needs prometheus-client: pip install 'tenure[metrics]' ({exc})")

        box: list = []
        _instrument(app, box)
        server = serve(box[0], metrics_port, metrics_host)
        logging.getLogger("tenure").info("metrics on http://%s:%d/metrics", metrics_host, metrics_port)
    from ..errors import WorkerUnhealthy
    from ..worker_health import EXIT_UNHEALTHY

    try:
        app.run_worker(config, grace=grace_s)
    except WorkerUnhealthy as exc:
        click.echo(f"tenure worker: {exc}; exiting with status {EXIT_UNHEALTHY} to be replaced", err=True)
        sys.exit(EXIT_UNHEALTHY)
    finally:
        if server is not None:
            server.shutdown()
