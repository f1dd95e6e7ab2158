"""``tenure worker``: run a worker (or a supervisor of worker processes) over an App's tasks."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import click

from .common import (
    _fail,
    _remember_secret,
    included,
    load_app,
    main,
    open_store,
    parse_duration,
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

    def capturing_create_worker(**options: Any):
        w = create_worker(**options)
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
#: flight while two settlers' round trips (a commit each) overlap: 256 slots drained 1.4-2x what
#: 64 did in drains alternating on one loaded host, at the same or less CPU per job; 512 drained
#: no more (docs/performance.md, "PostgreSQL drain: what the server and the worker spend").
DEFAULT_CONCURRENCY_POSTGRES = 256


def default_concurrency(dialect: str) -> int:
    """``tenure worker``'s default --concurrency for a store of this dialect."""
    return DEFAULT_CONCURRENCY_POSTGRES if dialect == "postgres" else DEFAULT_CONCURRENCY


def _slots(concurrency: int | None, url: str | None, app: Any) -> int:
    """--concurrency, else the default for the dialect of the store the worker will open."""
    return concurrency if concurrency is not None else default_concurrency(_store_dialect(url, app))


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


@main.command()
@click.argument("app_spec", metavar="APP")
@url_option
@click.option("--concurrency", default=None, type=click.IntRange(min=1),
              help=f"Handlers run at once per process (each a thread, or a task for async handlers); "
                   f"default {DEFAULT_CONCURRENCY} on SQLite, {DEFAULT_CONCURRENCY_POSTGRES} on PostgreSQL.")
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
@click.option("--include", "include", multiple=True, metavar="MODULE",
              help="Import MODULE before starting, for the tasks it declares on the app (repeatable; "
                   "adds to the app's own App(include=[...]) and to $TENURE_INCLUDE).")
def worker(app_spec: str, url: str | None, concurrency: int | None, queues: str | None, processes: int,
           max_jobs_per_process: int | None, metrics_port: int | None, metrics_host: str,
           zombie_share: float, stop_grace: float | None, lease: str | None, grace: float,
           log_level: str | None, log_format: str | None, include: tuple[str, ...]) -> None:
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
            from ..supervisor import run_supervisor
        except ImportError:
            _fail("--processes and --max-jobs-per-process need tenure's supervisor, which this tenure lacks")
        concurrency = _slots(concurrency, url, load_app(app_spec))  # load: fail fast, in the parent, on a bad APP
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
    concurrency = _slots(concurrency, url, app)
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
