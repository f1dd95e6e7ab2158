"""procrastinate's side of ``python -m bench.peers`` (see ``common.py`` for the protocol).

    procrastinate_driver.py setup CONNINFO N
    procrastinate_driver.py work CONNINFO CONCURRENCY POOL_SIZE
    procrastinate_driver.py enqueue1 CONNINFO N
    procrastinate_driver.py lwork CONNINFO CONCURRENCY POOL_SIZE
    procrastinate_driver.py lenqueue CONNINFO N GAP_US

CONNINFO sets ``search_path`` to the schema bench.peers recreates before every run.
``setup`` applies procrastinate's schema there and queues N ``noop`` jobs with
``batch_defer_async``. ``work`` runs one worker (``App.run_worker_async``: LISTEN/NOTIFY on,
jobs kept after completion, procrastinate's defaults otherwise) with CONCURRENCY concurrent async
jobs over a psycopg pool of POOL_SIZE connections, on asyncio's own loop (as ``procrastinate
worker`` runs). A job is done in procrastinate's store when its row's status is ``succeeded``.
``enqueue1`` and ``lenqueue`` call ``defer_async`` once per job; ``lwork`` is ``work`` whose handler
records each job's enqueue-to-start time.
"""

import asyncio
import contextlib
import sys
import time
from typing import Any

import procrastinate
import psycopg
from common import cpu_seconds, enqueued, expect, handled, latency_ms, main, say, stamp

DEFER_CHUNK = 5_000


def make(conninfo: str, pool_size: int, seen: list[Any],
         lat: list[float] | None = None) -> tuple[procrastinate.App, Any]:
    connector = procrastinate.PsycopgConnector(conninfo=conninfo, min_size=pool_size, max_size=pool_size)
    app = procrastinate.App(connector=connector)

    @app.task(name="noop")
    async def noop(i: int, t: int = 0) -> None:
        if lat is not None:
            lat.append(latency_ms(t))
        seen.append(i)

    return app, noop


async def setup(conninfo: str, n: int) -> None:
    app, noop = make(conninfo, 2, [])
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        t0 = time.perf_counter()
        for start in range(0, n, DEFER_CHUNK):
            await noop.batch_defer_async(*({"i": i} for i in range(start, min(n, start + DEFER_CHUNK))))
        secs = time.perf_counter() - t0
    say({"enqueued": n, "enqueue_seconds": round(secs, 3),
         "versions": {"procrastinate": procrastinate.__version__, "psycopg": psycopg.__version__}})


async def work(conninfo: str, concurrency: int, pool_size: int) -> None:
    seen: list[int] = []
    app, _ = make(conninfo, pool_size, seen)
    async with app.open_async():
        say("ready")
        await asyncio.to_thread(expect, "go")
        worker = asyncio.create_task(app.run_worker_async(concurrency=concurrency,
                                                          install_signal_handlers=False))
        await asyncio.to_thread(expect, "stop")
        worker.cancel()  # procrastinate's graceful stop: running jobs finish first
        with contextlib.suppress(asyncio.CancelledError):
            await worker
    say(handled(seen))


async def enqueue1(conninfo: str, n: int) -> None:
    app, noop = make(conninfo, 1, [])
    async with app.open_async():
        c0, t0 = cpu_seconds(), time.perf_counter()
        for i in range(n):
            await noop.defer_async(i=i)
        secs, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    enqueued(n, secs, cpu)


async def lwork(conninfo: str, concurrency: int, pool_size: int) -> None:
    seen: list[int] = []
    lat: list[float] = []
    app, _ = make(conninfo, pool_size, seen, lat)
    async with app.open_async():
        worker = asyncio.create_task(app.run_worker_async(concurrency=concurrency,
                                                          install_signal_handlers=False))
        await asyncio.sleep(0.5)  # listening and idle before the first job
        say("ready")
        await asyncio.to_thread(expect, "stop")
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
    say({**handled(seen), "lat_ms": lat})


async def lenqueue(conninfo: str, n: int, gap_us: int) -> None:
    app, noop = make(conninfo, 1, [])
    async with app.open_async():
        for i in range(n):
            await noop.defer_async(i=i, t=stamp())
            await asyncio.sleep(gap_us / 1e6)
    say({"enqueued": n})


if __name__ == "__main__":
    main(sys.argv[1:], setup, work, asyncio.run, enqueue1=enqueue1, lwork=lwork, lenqueue=lenqueue)
