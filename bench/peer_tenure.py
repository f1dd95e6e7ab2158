"""tenure's side of the one-by-one enqueue and latency measurements of ``python -m bench.peers``,
speaking the peer drivers' line protocol (``bench/peer_drivers/common.py``) so that
``bench/peers_calls.py`` runs every system alike:

    python -m bench.peer_tenure enqueue1 URL N
    python -m bench.peer_tenure lwork URL CONCURRENCY
    python -m bench.peer_tenure lenqueue URL N GAP_US

``enqueue1``: ``store.jobs.enqueue`` of N no-op jobs, one call each (timed, with this process's
CPU). ``lwork``: one worker (``create_worker``, cross-process wake-up on) whose handler records how
long after its enqueue each job started. ``lenqueue``: N enqueues, GAP_US apart, each payload
carrying ``time.time_ns()`` taken just before the call.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from .scenarios import KIND


def _say(obj: Any) -> None:
    print(obj if isinstance(obj, str) else json.dumps(obj), flush=True)


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def enqueue1(url: str, n: int) -> None:
    import tenure

    with tenure.connect(url) as store:
        enqueue = store.jobs.enqueue
        enqueue(KIND, -1)  # connect and migrate before the clock (its row is counted below)
        c0, t0 = _cpu(), time.perf_counter()
        for i in range(n - 1):
            enqueue(KIND, i)
        secs, cpu = time.perf_counter() - t0, _cpu() - c0
    _say({"enqueued": n, "seconds": round(secs * n / max(n - 1, 1), 4), "cpu_s": round(cpu * n / max(n - 1, 1), 4)})


def lwork(url: str, concurrency: int) -> None:
    import tenure

    seen: list[str] = []
    lat: list[float] = []

    def handler(payload: Any, ctx: Any) -> None:
        lat.append((time.time_ns() - payload["t"]) / 1e6)
        seen.append(ctx.job.id)

    store = tenure.connect(url)
    worker = store.jobs.create_worker({KIND: handler}, concurrency=concurrency)
    worker.start()
    time.sleep(0.5)  # listening and idle before the first job
    _say("ready")
    sys.stdin.readline()
    worker.stop()
    store.close()
    _say({"handled": len(seen), "distinct": len(set(seen)), "lat_ms": lat})


def lenqueue(url: str, n: int, gap_us: int) -> None:
    import tenure

    with tenure.connect(url) as store:
        # Connected (pool, schema check) before the first stamp, as every peer's driver is; no
        # job is written (N are verified). Without it the first sample carried the store's
        # opening (~70 ms on a loaded host), the other systems' none of theirs.
        store.jobs.get("bench-warm-up")
        enqueue = store.jobs.enqueue
        for _ in range(n):
            enqueue(KIND, {"t": time.time_ns()})
            time.sleep(gap_us / 1e6)
    _say({"enqueued": n})


def main(argv: list[str]) -> None:
    cmd, url, *rest = argv
    commands = {"enqueue1": enqueue1, "lwork": lwork, "lenqueue": lenqueue}
    if cmd not in commands:
        raise SystemExit(f"unknown command {cmd!r}")
    commands[cmd](url, *(int(x) for x in rest))


if __name__ == "__main__":
    main(sys.argv[1:])
