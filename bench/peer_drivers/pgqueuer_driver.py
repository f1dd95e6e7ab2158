"""pgqueuer's side of ``python -m bench.peers`` (see ``common.py`` for the protocol).

    pgqueuer_driver.py setup DSN N
    pgqueuer_driver.py work DSN BATCH_SIZE POOL_SIZE

pgqueuer's objects live in the schema named by ``PGQUEUER_SCHEMA`` (set by bench.peers, which
drops that schema before every run). ``setup`` installs pgqueuer's tables (default durability:
every table logged) and queues N jobs of entrypoint ``noop`` with bulk ``Queries.enqueue``.
``work`` runs one ``QueueManager`` over an asyncpg pool on uvloop (what ``pgq run`` uses when
uvloop is installed), continuous mode, no global task cap, with an async no-op entrypoint. A job
is done in pgqueuer's store once its row has moved to ``pgqueuer_log`` with status
``successful``.
"""

import asyncio
import sys
import time

import asyncpg
import pgqueuer
import uvloop
from common import expect, handled, main, say
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


if __name__ == "__main__":
    main(sys.argv[1:], setup, work, uvloop.run)
