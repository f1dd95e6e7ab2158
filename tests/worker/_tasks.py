"""A tenure App used by the process tests: the test process enqueues through ``make_app(url)``;
worker processes run ``python _tasks.py ...`` (or the supervisor loads ``_tasks:app``). Task names
are explicit, so they match whichever module name the file is imported under.

Plain module, no pytest: it is imported by child processes.
"""

from __future__ import annotations

import json
import os
import sys
import time

import tenure


def _ledger(path: str, *record) -> None:
    """Append one JSON line (atomic for short lines with O_APPEND)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(list(record)) + "\n").encode())
    finally:
        os.close(fd)


def make_app(url: str | None = None) -> tenure.App:
    app = tenure.App(url)

    @app.task(name="add")
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="fail_always", max_attempts=1)
    def fail_always(message: str) -> None:
        raise RuntimeError(message)

    @app.task(name="pid")
    def pid(n: int = 0) -> dict:
        time.sleep(0.01)
        return {"pid": os.getpid(), "n": n}

    @app.task(name="polite_sleep")
    def polite_sleep(seconds: float, ctx) -> str:
        interrupted = ctx.cancelled.wait(seconds)
        return "interrupted" if interrupted else "slept"

    @app.task(name="busy")
    def busy(seconds: float, ledger: str, ctx) -> str:
        """Ignores its cancellation: runs its full time, then reports it finished."""
        _ledger(ledger, ctx.job.id, ctx.attempt, os.getpid(), "start")
        time.sleep(seconds)
        _ledger(ledger, ctx.job.id, ctx.attempt, os.getpid(), "end")
        return "finished"

    @app.task(name="stall_first")
    def stall_first(ledger: str, ctx) -> dict:
        """The first attempt stalls (its process is killed); later attempts return at once."""
        _ledger(ledger, ctx.job.id, ctx.attempt, os.getpid(), "start")
        if ctx.attempt == 1:
            time.sleep(60)
        return {"attempt": ctx.attempt, "pid": os.getpid()}

    @app.task(name="count")
    def count(ledger: str, mode: str, table: str, hold: float, ctx) -> dict:
        """Increment a counter row, then hold: through the handler transaction (mode "tx": the
        increment commits with the completion) or outside it (mode "plain")."""
        mark = "?" if ctx.store.dialect == "sqlite" else "%s"
        sql = f"UPDATE {table} SET n = n + {mark} WHERE id = 1"
        if mode == "tx":
            with ctx.transaction() as tx:
                tx.execute(sql, (1,))
                _ledger(ledger, ctx.job.id, ctx.attempt, os.getpid(), "incremented")
                time.sleep(hold)
                tx.result = {"attempt": ctx.attempt}
            return {"attempt": ctx.attempt}
        with ctx.store.transaction() as tx:
            tx.execute(sql, (1,))
        _ledger(ledger, ctx.job.id, ctx.attempt, os.getpid(), "incremented")
        time.sleep(hold)
        return {"attempt": ctx.attempt}

    return app


app = make_app()


def main(argv: list[str]) -> int:
    """``python _tasks.py [--concurrency N] [--lease-ms MS] [--poll S] [--max-jobs N]``: run a
    worker (the store URL comes from $TENURE_URL)."""
    import argparse
    import logging

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    p = argparse.ArgumentParser()
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--lease-ms", type=int, default=30_000)
    p.add_argument("--poll", type=float, default=0.5)
    p.add_argument("--stop-grace", type=float, default=5.0)
    p.add_argument("--max-jobs", type=int, default=None)
    a = p.parse_args(argv)
    app.run_worker(concurrency=a.concurrency, lease=a.lease_ms / 1000, poll_interval=a.poll,
                   stop_grace=a.stop_grace, max_jobs=a.max_jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
