"""A worker process for the cancel tests: ``python _cancel_child.py URL LEDGER [--grace S]``.

Handler ``long``: writes ``["started", attempt, pid]`` to the ledger, waits for ``ctx.cancelled``
(up to the payload's ``seconds``), writes ``["stopped", reason code, waited seconds]`` and returns.
With ``--ignore`` it ignores its cancellation for the whole time (a hostile handler). Runs through
``App.run_worker`` (signals installed), so SIGTERM / a second signal behave as in production.
Plain module, no pytest: it runs in a child process."""

from __future__ import annotations

import json
import os
import sys
import time

import tenure


def _ledger(path: str, *record) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(list(record)) + "\n").encode())
    finally:
        os.close(fd)


def main() -> None:
    url, ledger = sys.argv[1], sys.argv[2]
    grace = float(sys.argv[sys.argv.index("--grace") + 1]) if "--grace" in sys.argv else None
    ignore = "--ignore" in sys.argv
    app = tenure.App(url)

    @app.task(name="long")
    def long(seconds: float, ctx) -> str:
        _ledger(ledger, "started", ctx.attempt, os.getpid())
        t0 = time.monotonic()
        if ignore:
            time.sleep(seconds)
        else:
            ctx.cancelled.wait(seconds)
        reason = ctx.cancelled.reason
        _ledger(ledger, "stopped", getattr(reason, "code", None), round(time.monotonic() - t0, 3))
        return "finished"

    options = {"lease": 3, "poll_interval": 0.05}
    if grace is not None:
        options["grace"] = grace
    app.run_worker(**options)


if __name__ == "__main__":
    main()
