"""The ``tenure`` command line."""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import time
from typing import Any

import click

from . import connect
from .engine import redact_url
from .errors import TenureError


def _fail(message: str) -> None:
    click.echo(f"tenure: {message}", err=True)
    sys.exit(2)


class _Group(click.Group):
    """Every command exits with a one-line error (no traceback) on a coded error."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TenureError as exc:
            _fail(str(exc))


@click.group(cls=_Group)
@click.version_option(package_name="tenure")
def main() -> None:
    """tenure: a durable job queue (SQLite embedded, PostgreSQL scale-out)."""
    logging.basicConfig(level=os.environ.get("TENURE_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")


url_option = click.option("--url", envvar="TENURE_URL", default=None,
                          help="Store URL (default $TENURE_URL, else sqlite:///tenure.db).")


def load_app(spec: str):
    """``module:attribute`` -> the App object."""
    if ":" not in spec:
        _fail(f"expected module:attribute (e.g. myproject.tasks:app), got {spec!r}")
    module_name, attr = spec.split(":", 1)
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        _fail(f"cannot import {module_name!r}: {exc}")
    try:
        return getattr(module, attr)
    except AttributeError:
        _fail(f"{module_name!r} has no attribute {attr!r}")


@main.command()
@url_option
@click.option("--jobs", "n_jobs", default=500, show_default=True, help="How many demo jobs to enqueue.")
@click.option("--concurrency", default=8, show_default=True)
def demo(url: str | None, n_jobs: int, concurrency: int) -> None:
    """Enqueue jobs and work them with a real worker on SQLite, showing progress and counts."""
    url = url or "sqlite:///tenure-demo.db"
    store = connect(url)
    jobs = store.jobs
    click.echo(f"store: {redact_url(url)}")

    def resize(payload: dict, ctx) -> dict:
        if payload["n"] % 97 == 13 and ctx.attempt == 1:
            raise RuntimeError("flaky upstream (retried with backoff)")
        return {"thumb": f"img-{payload['n']}-small.png", "attempt": ctx.attempt}

    t0 = time.perf_counter()
    ids = jobs.enqueue_many([{"kind": "demo.resize", "payload": {"n": i}} for i in range(n_jobs)])
    click.echo(f"enqueued {len(ids)} jobs in {(time.perf_counter() - t0) * 1000:.1f} ms")
    worker = jobs.create_worker({"demo.resize": resize}, concurrency=concurrency, backoff_base=0.05,
                                backoff_cap=0.2)
    t1 = time.perf_counter()
    with worker:
        while True:
            counts = jobs.counts()
            finished = counts["done"] + counts["dead"]
            pending = counts["pending"] + counts["failed"] + counts["leased"]
            click.echo(f"\r  done {counts['done']:>6}  waiting {pending:>6}  dead {counts['dead']:>4}", nl=False)
            if pending == 0 and finished:
                break
            time.sleep(0.05)
    elapsed = time.perf_counter() - t1
    stats = worker.stats()
    click.echo("")
    click.echo(f"worked {stats['completions']} completions and {stats['failures']} retried failures in "
               f"{elapsed:.2f} s ({stats['completions'] / max(elapsed, 1e-9):.0f} jobs/s)")
    click.echo("counts: " + json.dumps(jobs.counts()))
    sample = jobs.get(ids[13]) if len(ids) > 13 else None
    if sample is not None:
        click.echo(f"job {sample.id}: state={sample.state} attempts={sample.attempts} "
                   f"last_error={sample.last_error!r} result={sample.result}")
    store.close()


@main.command()
@click.argument("app_spec")
@url_option
@click.option("--concurrency", default=4, show_default=True)
@click.option("--queues", default=None, help="Comma-separated queues (default: all).")
def worker(app_spec: str, url: str | None, concurrency: int, queues: str | None) -> None:
    """Run a worker over an App's tasks: tenure worker myproject.tasks:app."""
    app = load_app(app_spec)
    if url:
        app._url = url
    app.run_worker(concurrency=concurrency, queues=queues.split(",") if queues else None)


if __name__ == "__main__":  # pragma: no cover
    main()
