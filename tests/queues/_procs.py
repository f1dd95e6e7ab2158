"""Child-process side of the queue tests: imported by name in spawned processes, so it stays a
plain module with no pytest dependency. Each function reports to the parent through ``out``."""

from __future__ import annotations

import random
import time


def _retry_busy(fn):
    """Call ``fn``; a classified busy store (TN0003) is retried, anything else propagates."""
    while True:
        try:
            return fn()
        except Exception as exc:
            if getattr(exc, "code", None) != "TN0003":
                raise


def claim_loop(url: str, queue: str | list[str], owner: str, seconds: float, barrier, out, stop=None) -> None:
    """Claim batches from ``queue`` (one or several) for ``seconds`` (or until ``stop``, an event,
    is set), hold each job a few ms, complete it."""
    import tenure

    done, error = 0, None
    try:
        store = tenure.connect(url)
        try:
            jobs = store.jobs
            barrier.wait(timeout=60)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
                got = _retry_busy(lambda: jobs.claim_many("k", owner=owner, limit=2, queues=queue))
                if not got:
                    time.sleep(0.001)
                    continue
                time.sleep(random.uniform(0.002, 0.02))
                for c in got:
                    _retry_busy(lambda c=c: jobs.complete(c.lease))
                    done += 1
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the test with it
        error = f"{type(exc).__name__}: {exc}"
    out.put((owner, done, error))


def enqueue_keys(url: str, scenarios: list[tuple[str, dict]], keys: list[str], barrier, out) -> None:
    """For each ``(queue, options)``: wait for every sibling, then enqueue one job per key at the
    same instant. Reports ``{queue: [id answered per key]}``."""
    import tenure

    answers: dict[str, list] = {}
    error = None
    try:
        store = tenure.connect(url)
        try:
            jobs = store.jobs
            for queue, options in scenarios:
                barrier.wait(timeout=60)
                answers[queue] = [_retry_busy(lambda key=key, queue=queue, options=options: jobs.enqueue(
                    "k", {"key": key}, queue=queue, singleton_key=key, **options)) for key in keys]
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - a child process reports any failure to the parent
        error = f"{type(exc).__name__}: {exc}"
    out.put((answers, error))


def enqueue_bulk(url: str, queue: str, n: int, barrier, out) -> None:
    """Wait for every sibling, then ``enqueue_many`` ``n`` jobs into ``queue`` at the same
    instant. Reports the ids answered."""
    import tenure

    answers: list = []
    error = None
    try:
        store = tenure.connect(url)
        try:
            specs = [{"kind": "k", "payload": {"i": i}, "queue": queue} for i in range(n)]
            barrier.wait(timeout=60)
            answers = _retry_busy(lambda: store.jobs.enqueue_many(specs))
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - a child process reports any failure to the parent
        error = f"{type(exc).__name__}: {exc}"
    out.put((answers, error))
