"""huey's side of ``python -m bench.peers`` (see ``common.py`` for the protocol).

    huey_driver.py setup PATH N
    huey_driver.py work PATH WORKERS

``SqliteHuey`` on the file PATH (bench.peers deletes it before every run), with
``store_none=True`` so that a finished task leaves its (None) result in huey's ``kv`` table: that
row is the job's done record in huey's own store (huey deletes a task's queue row when a worker
takes it, before running it). ``setup`` queues N calls of the ``noop`` task, one insert each, on
a connection opened with ``fsync=False`` (synchronous=OFF; only the untimed fill uses it).
``work`` runs huey's ``Consumer`` in this process with WORKERS thread workers (what
``huey_consumer -w WORKERS -k thread`` runs) over huey's default storage settings: WAL,
SQLite's default synchronous (FULL), 5 s busy timeout.
"""

import sys
import time
from typing import Any

import huey
from common import expect, handled, main, say
from huey import SqliteHuey

NAME = "peers"


def make(path: str, seen: list[Any], **storage: Any) -> tuple[SqliteHuey, Any]:
    app = SqliteHuey(NAME, filename=path, store_none=True, **storage)

    @app.task(name="noop")
    def noop(i: int) -> None:
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


if __name__ == "__main__":
    main(sys.argv[1:], setup, work)
