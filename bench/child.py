"""What runs in the bench's second processes.

* ``python -m bench.child enqueue URL KIND N GAP_MS``: the cross-process enqueuer of the latency
  scenario. Each payload carries ``time.time_ns()`` taken just before ``enqueue`` (the same machine
  clock the worker's handler reads). Prints the enqueued ids as JSON.
* ``python -m bench.child rss URL N CONCURRENCY``: a fresh interpreter that imports only tenure,
  runs one worker over ``N`` queued no-op jobs and reports its resident memory from
  ``/proc/self/status`` (VmRSS, and VmHWM: the peak). Prints JSON.
* ``python -m bench.child drain URL N CONCURRENCY [OUT]``: one worker drains ``N`` queued jobs
  (what ``python -m bench.profile`` samples with py-spy). Prints JSON, or writes it to ``OUT``.
* :func:`drain_process`: one of the worker processes that drain a PostgreSQL queue together
  (started by ``multiprocessing`` with the spawn method).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any


def proc_status_mb() -> dict[str, float]:
    """VmRSS and VmHWM of this process in MB (Linux; empty elsewhere)."""
    out: dict[str, float] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in ("VmRSS", "VmHWM"):
                    out[key] = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return out


class Recorder:
    """A no-op handler that remembers which job ids it ran (to prove exactly-once), sets ``ran``
    after each (a watcher clears it) and ``done`` once it has run ``expected`` jobs.
    ``list.append`` is atomic under the GIL."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.ids: list[str] = []
        self.done = threading.Event()
        self.ran = threading.Event()

    def __call__(self, payload: Any, ctx: Any) -> None:
        ids = self.ids
        ids.append(ctx.job.id)
        if not self.ran.is_set():  # a plain read; set() takes the event's lock
            self.ran.set()
        if len(ids) >= self.expected:
            self.done.set()


def wait_completions(worker: Any, n: int, timeout: float, poll: float = 0.0005) -> bool:
    """Block until the worker has SETTLED ``n`` completions (committed), or ``timeout``."""
    deadline = time.perf_counter() + timeout
    while worker.stats()["completions"] < n:
        if time.perf_counter() > deadline:
            return False
        time.sleep(poll)
    return True


def enqueue_main(url: str, kind: str, n: int, gap_ms: float) -> None:
    import tenure

    with tenure.connect(url) as store:
        jobs = store.jobs
        ids = []
        for _ in range(n):
            ids.append(jobs.enqueue(kind, {"t": time.time_ns()}))
            time.sleep(gap_ms / 1000)
    print(json.dumps({"ids": ids}))


def rss_main(url: str, n: int, concurrency: int) -> None:
    import tenure

    store = tenure.connect(url)
    store.jobs  # noqa: B018 - open the store
    before = proc_status_mb()
    rec = Recorder(n)
    worker = store.jobs.create_worker({"noop": rec}, concurrency=concurrency)
    worker.start()
    started = proc_status_mb()
    threads = threading.active_count()
    ok = rec.done.wait(max(60.0, n / 100)) and wait_completions(worker, n, 60.0)
    after = proc_status_mb()
    worker.stop()
    store.close()
    print(json.dumps({"ok": ok, "threads_while_running": threads, "before_worker": before,
                      "worker_started": started, "after_drain": after, "ids": rec.ids}))


def drain_main(url: str, n: int, concurrency: int, out: str | None = None) -> None:
    """Drain ``n`` queued no-op jobs with one worker (the process ``bench.profile`` samples)."""
    import tenure

    store = tenure.connect(url)
    store.jobs  # noqa: B018 - open the store
    rec = Recorder(n)
    worker = store.jobs.create_worker({"noop": rec}, concurrency=concurrency)
    if out is not None:  # the profiler attaches now (imports and opening are not profiled)
        print("ready", flush=True)
        sys.stdin.readline()
    c0 = time.process_time()
    t0 = time.perf_counter()
    worker.start()
    ok = rec.done.wait(max(120.0, n / 50)) and wait_completions(worker, n, 120.0)
    secs = time.perf_counter() - t0
    cpu = time.process_time() - c0
    worker.stop()
    store.close()
    text = json.dumps({"ok": ok, "seconds": secs, "jobs_per_s": n / secs, "cpu_us_per_job": cpu / n * 1e6,
                       "ids": rec.ids})
    if out is None:
        print(text)
    else:
        with open(out, "w") as f:
            f.write(text)


def drain_process(url: str, concurrency: int, index: int, ready: Any, go: Any, stop: Any,
                  progress: Any, results: Any) -> None:
    """One worker process of the multi-process drain: open, report ready, start on ``go``,
    publish its settled-completion count in ``progress[index]`` (at most 5 ms after each
    settle) until ``stop``, send its ids."""
    import tenure

    from .experiments import apply_from_env

    apply_from_env()

    store = tenure.connect(url)
    store.jobs  # noqa: B018 - connect and migrate before the clock starts
    rec = Recorder(1 << 62)
    worker = store.jobs.create_worker({"noop": rec}, concurrency=concurrency)
    ready.put(index)
    go.wait()
    worker.start()
    # While a job this worker ran has yet to settle, publish every 5 ms, not faster: this loop
    # shares the GIL with the worker it measures, and a 0.5 ms poll cost the two-process
    # PostgreSQL drain ~40% of its throughput (8.7k against 15k jobs/s). Once every job it ran has
    # settled there is nothing new to publish until its handler runs again: sleep on ``rec.ran``
    # (a 5 ms poll there was 200 wake-ups a second per process, ~240 us of the light-load
    # scenario's CPU per job), waking every 100 ms only to see ``stop``, and look 1 ms after a
    # handler ran (a lone job settles ~0.4 ms after its handler, median on SQLite). A completion
    # is still published at most 5 ms after it settles, and a lone one sooner than before.
    while not stop.is_set():
        rec.ran.clear()  # before reading: a handler that runs after this sets it again
        handled = len(rec.ids)
        settled = worker.stats()["completions"]
        progress[index] = settled
        if settled < handled:
            time.sleep(0.005)
        elif rec.ran.wait(0.1):
            time.sleep(0.001)
    worker.stop()
    progress[index] = worker.stats()["completions"]
    results.put((index, rec.ids, proc_status_mb()))
    store.close()


def main(argv: list[str]) -> None:
    from .experiments import apply_from_env

    apply_from_env()
    cmd, *args = argv
    if cmd == "enqueue":
        url, kind, n, gap = args
        enqueue_main(url, kind, int(n), float(gap))
    elif cmd == "drain":
        url, n, conc, *out = args
        drain_main(url, int(n), int(conc), *out)
    elif cmd == "rss":
        url, n, conc = args
        rss_main(url, int(n), int(conc))
    else:
        raise SystemExit(f"unknown child command {cmd!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
