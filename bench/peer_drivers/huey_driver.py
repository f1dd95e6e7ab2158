"""huey's side of ``python -m bench.peers`` (see ``common.py`` for the protocol).

    huey_driver.py setup PATH N
    huey_driver.py work PATH WORKERS
    huey_driver.py enqueue1 PATH N
    huey_driver.py lwork PATH WORKERS
    huey_driver.py lenqueue PATH N GAP_US

``SqliteHuey`` on the file PATH (bench.peers deletes it before every run), with
``store_none=True`` so that a finished task leaves its (None) result in huey's ``kv`` table: that
row is the job's done record in huey's own store (huey deletes a task's queue row when a worker
takes it, before running it). ``setup`` queues N calls of the ``noop`` task, one insert each, on
a connection opened with ``fsync=False`` (synchronous=OFF; only the untimed fill uses it).
``work`` runs huey's ``Consumer`` in this process with WORKERS thread workers (what
``huey_consumer -w WORKERS -k thread`` runs) over huey's default storage settings: WAL,
SQLite's default synchronous (FULL), 5 s busy timeout. ``enqueue1`` and ``lenqueue`` queue one
call at a time over those default settings; ``lwork`` is ``work`` whose task records each job's
enqueue-to-start time.
"""

import sys
import time
from typing import Any

import huey
from common import cpu_seconds, enqueued, expect, handled, latency_ms, main, say, stamp
from huey import SqliteHuey

NAME = "peers"


def make(path: str, seen: list[Any], lat: list[float] | None = None, **storage: Any) -> tuple[SqliteHuey, Any]:
    app = SqliteHuey(NAME, filename=path, store_none=True, **storage)

    @app.task(name="noop")
    def noop(i: int, t: int = 0) -> None:
        if lat is not None:
            lat.append(latency_ms(t))
        seen.append(i)

    return app, noop


def setup(path: str, n: int) -> None:
    app, noop = make(path, [], fsync=False)
    t0 = time.perf_counter()
    for i in range(n):
        noop(i)
    secs = time.perf_counter() - t0
    app.storage.close()
    say({"enqueued": n, "enqueue_seconds": round(secs, 3), "versions": {"huey": huey.__version__}})


def work(path: str, workers: int) -> None:
    seen: list[int] = []
    app, _ = make(path, seen)
    consumer = app.create_consumer(workers=workers, worker_type="thread")
    say("ready")
    expect("go")
    consumer.start()
    expect("stop")
    consumer.stop(graceful=True)
    say(handled(seen))


def enqueue1(path: str, n: int) -> None:
    app, noop = make(path, [])
    c0, t0 = cpu_seconds(), time.perf_counter()
    for i in range(n):
        noop(i)
    secs, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    app.storage.close()
    enqueued(n, secs, cpu)


def lwork(path: str, workers: int) -> None:
    seen: list[int] = []
    lat: list[float] = []
    app, _ = make(path, seen, lat)
    consumer = app.create_consumer(workers=workers, worker_type="thread")
    consumer.start()
    time.sleep(0.5)  # polling and idle before the first job
    say("ready")
    expect("stop")
    consumer.stop(graceful=True)
    say({**handled(seen), "lat_ms": lat})


def lenqueue(path: str, n: int, gap_us: int) -> None:
    app, noop = make(path, [])
    for i in range(n):
        noop(i, stamp())
        time.sleep(gap_us / 1e6)
    app.storage.close()
    say({"enqueued": n})


if __name__ == "__main__":
    main(sys.argv[1:], setup, work, enqueue1=enqueue1, lwork=lwork, lenqueue=lenqueue)
