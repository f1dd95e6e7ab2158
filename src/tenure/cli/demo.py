"""``tenure demo``: enqueue jobs and work them with a real worker, showing progress."""

from __future__ import annotations

import json
import logging
import sys
import time

import click

from ..redact import redact_url
from .common import (
    emit_json,
    json_option,
    main,
    open_store,
    url_option,
)


@main.command()
@url_option
@click.option("--jobs", "n_jobs", default=500, show_default=True, help="How many demo jobs to enqueue.")
@click.option("--concurrency", default=8, show_default=True, help="Handlers run at once.")
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

    before = jobs.counts()
    t0 = time.perf_counter()
    ids = jobs.enqueue_many([{"kind": "demo.resize", "payload": {"n": i}} for i in range(n_jobs)])
    say(f"enqueued {len(ids)} jobs in {(time.perf_counter() - t0) * 1000:.1f} ms")
    worker = jobs.create_worker({"demo.resize": resize}, concurrency=concurrency, backoff_base=0.05,
                                backoff_cap=0.2)
    t1 = time.perf_counter()
    # The demo's failures are deliberate and counted below: their WARNING lines (each with a
    # traceback) would bury the progress line. A job that dies still logs at ERROR.
    quiet, level = logging.getLogger("tenure"), logging.getLogger("tenure").level
    quiet.setLevel(max(level, logging.ERROR))
    live = not as_json and sys.stdout.isatty()  # a pipe or a file gets the summary only
    try:
        with worker:
            while True:
                counts = jobs.counts()
                finished = counts["done"] + counts["dead"]
                pending = counts["pending"] + counts["failed"] + counts["leased"]
                if live:  # this run's jobs: a reused demo file keeps the earlier runs' rows
                    click.echo(f"\r  done {counts['done'] - before['done']:>6}  waiting {pending:>6}  "
                               f"dead {counts['dead'] - before['dead']:>4}", nl=False)
                if pending == 0 and finished:
                    break
                time.sleep(0.05)
    finally:
        quiet.setLevel(level)
    elapsed = time.perf_counter() - t1
    stats = worker.stats()
    final = jobs.counts()
    sample = jobs.get(ids[13]) if len(ids) > 13 and ids[13] is not None else None  # plain jobs: never None
    if as_json:
        emit_json({"store": redact_url(url), "enqueued": len(ids), "seconds": round(elapsed, 3),
                   "completions": stats["completions"], "failures": stats["failures"], "counts": final})
    else:
        if live:
            click.echo("")
        click.echo(f"worked {stats['completions']} completions and {stats['failures']} retried failures in "
                   f"{elapsed:.2f} s ({stats['completions'] / max(elapsed, 1e-9):.0f} jobs/s)")
        click.echo("counts in the store: " + json.dumps(final))
        if sample is not None:
            click.echo(f"job {sample.id}: state={sample.state} attempts={sample.attempts} "
                       f"last_error={sample.last_error!r} result={sample.result}")
    store.close()
