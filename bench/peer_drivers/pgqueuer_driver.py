"""pgqueuer's side of ``python -m bench.peers`` (see ``common.py`` for the protocol).

    pgqueuer_driver.py setup DSN N
    pgqueuer_driver.py work DSN BATCH_SIZE POOL_SIZE
    pgqueuer_driver.py enqueue1 DSN N
    pgqueuer_driver.py lwork DSN BATCH_SIZE POOL_SIZE
    pgqueuer_driver.py lenqueue DSN N GAP_US

pgqueuer's objects live in the schema named by ``PGQUEUER_SCHEMA`` (set by bench.peers, which
drops that schema before every run). ``setup`` installs pgqueuer's tables (default durability:
every table logged) and queues N jobs of entrypoint ``noop`` with bulk ``Queries.enqueue``.
``work`` runs one ``QueueManager`` over an asyncpg pool on uvloop (what ``pgq run`` uses when
uvloop is installed), continuous mode, no global task cap, with an async no-op entrypoint. A job
is done in pgqueuer's store once its row has moved to ``pgqueuer_log`` with status
``successful``. ``enqueue1`` and ``lenqueue`` call ``Queries.enqueue`` with one job per call on one
asyncpg connection; ``lwork`` is ``work`` whose handler records each job's enqueue-to-start time.
"""

import asyncio
import sys
import time

import asyncpg
import pgqueuer
import uvloop
from common import cpu_seconds, enqueued, expect, handled, latency_ms, main, say, stamp
from pgqueuer import AsyncpgDriver, AsyncpgPoolDriver, Job, Queries, QueueManager

ENTRYPOINT = "noop"
ENQUEUE_CHUNK = 10_000


async def setup(dsn: str, n: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(conn))
        await queries.install()
        t0 = time.perf_counter()
        for start in range(0, n, ENQUEUE_CHUNK):
            k = min(ENQUEUE_CHUNK, n - start)
            await queries.enqueue([ENTRYPOINT] * k, [str(i).encode() for i in range(start, start + k)], [0] * k)
        secs = time.perf_counter() - t0
    finally:
        await conn.close()
    say({"enqueued": n, "enqueue_seconds": round(secs, 3),
         "versions": {"pgqueuer": pgqueuer.__version__, "asyncpg": asyncpg.__version__,
                      "uvloop": uvloop.__version__}})


async def work(dsn: str, batch_size: int, pool_size: int) -> None:
    pool = await asyncpg.create_pool(dsn, min_size=pool_size, max_size=pool_size)
    qm = QueueManager(Queries(AsyncpgPoolDriver(pool)))
    seen: list[int] = []

    @qm.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        seen.append(job.id)

    say("ready")
    await asyncio.to_thread(expect, "go")
    runner = asyncio.create_task(qm.run(batch_size=batch_size))
    await asyncio.to_thread(expect, "stop")
    qm.shutdown.set()
    await runner
    await pool.close()
    say(handled(seen))


async def enqueue1(dsn: str, n: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(conn))
        c0, t0 = cpu_seconds(), time.perf_counter()
        for i in range(n):
            await queries.enqueue(ENTRYPOINT, str(i).encode(), 0)
        secs, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    finally:
        await conn.close()
    enqueued(n, secs, cpu)


async def lwork(dsn: str, batch_size: int, pool_size: int) -> None:
    pool = await asyncpg.create_pool(dsn, min_size=pool_size, max_size=pool_size)
    qm = QueueManager(Queries(AsyncpgPoolDriver(pool)))
    seen: list[int] = []
    lat: list[float] = []

    @qm.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        lat.append(latency_ms(int(job.payload or b"0")))
        seen.append(job.id)

    runner = asyncio.create_task(qm.run(batch_size=batch_size))
    await asyncio.sleep(0.5)  # listening and idle before the first job
    say("ready")
    await asyncio.to_thread(expect, "stop")
    qm.shutdown.set()
    await runner
    await pool.close()
    say({**handled(seen), "lat_ms": lat})


async def lenqueue(dsn: str, n: int, gap_us: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(conn))
        for _ in range(n):
            await queries.enqueue(ENTRYPOINT, str(stamp()).encode(), 0)
            await asyncio.sleep(gap_us / 1e6)
    finally:
        await conn.close()
    say({"enqueued": n})


if __name__ == "__main__":
    main(sys.argv[1:], setup, work, uvloop.run, enqueue1=enqueue1, lwork=lwork, lenqueue=lenqueue)
