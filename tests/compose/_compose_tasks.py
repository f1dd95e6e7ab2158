"""The tasks the composition process tests run (tests/compose/test_processes.py): the test process
enqueues through ``make_app(url)``; worker processes run ``python _compose_tasks.py ...`` (store
URL from $TENURE_URL). Each task records every execution in a ledger (at least once) and its
effect in a table through the handler transaction (exactly once: the row commits with the
completion). Plain module, no pytest: child processes import it."""

from __future__ import annotations

import json
import os
import random
import sys
import time

import tenure

FIRED = "tn_compose_fired"


def _ledger(path: str, *record) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(list(record)) + "\n").encode())
    finally:
        os.close(fd)


def _fire(ctx, ledger: str, what: str, value):
    """Run a step: ledger line, a pause a SIGKILL can land in, then the effect row and the result
    committed together."""
    _ledger(ledger, ctx.job.id, ctx.attempt, os.getpid(), what)
    time.sleep(random.uniform(0.02, 0.12))
    mark = "?" if ctx.store.dialect == "sqlite" else "%s"
    with ctx.transaction() as tx:
        tx.execute(f"INSERT INTO {FIRED} (job_id, what) VALUES ({mark}, {mark})", (ctx.job.id, what))
        tx.result = value
    return value


def make_app(url: str | None = None) -> tenure.App:
    app = tenure.App(url)

    @app.task(name="c_add")
    def c_add(x: int, n: int, ledger: str, ctx) -> int:
        return _fire(ctx, ledger, "add", x + n)

    @app.task(name="c_sum")
    def c_sum(results: list, ledger: str, ctx) -> dict:
        return _fire(ctx, ledger, "sum", {"sum": sum(results), "n": len(results)})

    @app.task(name="c_fail", max_attempts=1)
    def c_fail(ledger: str, ctx) -> None:
        _ledger(ledger, ctx.job.id, ctx.attempt, os.getpid(), "fail")
        time.sleep(random.uniform(0.02, 0.12))
        raise RuntimeError("the parent dies")

    return app


app = make_app()

if __name__ == "__main__":
    app.run_worker(concurrency=int(sys.argv[1]), lease=int(sys.argv[2]) / 1000, poll_interval=0.05, stop_grace=1.0)
