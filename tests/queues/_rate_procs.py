"""Child-process side of the rate-limit and order tests: imported by name in spawned
processes, so it stays a plain module with no pytest dependency."""

from __future__ import annotations

import time


def run_worker(url: str, queue: str, owner: str, expected: int, seconds: float, barrier, out,
               fail_first: dict[str, int] | None = None, hold: float = 0.01, concurrency: int = 8,
               stop=None) -> None:
    """Run a worker on ``queue`` until the queue has ``expected`` settled jobs (done or dead) or
    ``seconds`` pass. Each handler sleeps ``hold`` seconds and answers the claim's instant
    (``ctx.job.updated_at``, the claim's clock); a payload named in ``fail_first`` fails that many
    times first (counted in the job's attempts); a set ``stop`` event ends it early. Reports
    ``(owner, error)``."""
    import tenure

    error = None
    try:
        store = tenure.connect(url)
        try:
            fails = fail_first or {}

            def handler(payload, ctx):
                started = ctx.job.updated_at
                time.sleep(hold)
                key = str(payload.get("name")) if isinstance(payload, dict) else str(payload)
                if ctx.job.attempts <= fails.get(key, 0):
                    raise RuntimeError(f"{key} fails on attempt {ctx.job.attempts}")
                return {"started": started, "attempt": ctx.job.attempts}

            worker = store.jobs.create_worker({"k": handler}, concurrency=concurrency, queues=[queue],
                                              maintenance=False, poll_interval=0.5)
            barrier.wait(timeout=60)
            worker.start()
            deadline = time.monotonic() + seconds
            try:
                while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
                    counts = store.jobs.counts()
                    if counts.get("done", 0) + counts.get("dead", 0) >= expected:
                        break
                    time.sleep(0.1)
            finally:
                worker.stop()
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the test with it
        error = f"{type(exc).__name__}: {exc}"
    out.put((owner, error))
