"""One measurement of ``python -m bench.peers`` on one system: a drain (fill, start the worker, say
go, poll the store until every job is done, stop, verify) or a bulk fill alone. See the docstring
of :mod:`bench.peers` for how the clock is taken."""

from __future__ import annotations

import select
import time
from typing import Any

from .machine import proc_cpu_seconds
from .peer_process import stderr_tail, worker_process
from .peer_systems import ROOT, System, check

POLL_MIN_S = 0.002
POLL_MAX_S = 0.25
#: How long a worker may take to import, connect and say it is ready.
READY_TIMEOUT_S = 120.0


def wait_done(system: System, n: int, t0: float, timeout: float) -> tuple[int, float | None, int]:
    """Poll the store until it shows ``n`` done jobs; answers (done, seconds or None on timeout,
    polls). The end time is taken just before the query that first sees all ``n``."""
    polls = 0
    while True:
        at = time.perf_counter()
        done = system.done()
        polls += 1
        elapsed = at - t0
        if done >= n:
            return done, elapsed, polls
        if elapsed > timeout:
            return done, None, polls
        rate = done / elapsed if done and elapsed > 0 else 0.0
        pause = (n - done) / rate / 2 if rate else 0.05
        time.sleep(min(POLL_MAX_S, max(POLL_MIN_S, pause)))


def measure(system: System, n: int) -> dict[str, Any]:
    """One drain of ``n`` queued jobs by one worker process; see :mod:`bench.peers`."""
    fill = system.prepare(n)
    timeout = max(120.0, n / 50)
    argv, env = system.command()
    with worker_process(system, argv, env, ROOT) as (proc, stderr):
        assert proc.stdin is not None and proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
        line = proc.stdout.readline() if ready else "(no answer in time)"
        if line.strip() != "ready":
            proc.kill()
            proc.wait(timeout=30)
            raise RuntimeError(f"{system.label} worker did not start: {line!r} {stderr_tail(stderr)}")
        cpu0 = proc_cpu_seconds(proc.pid)
        t0 = time.perf_counter()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        done, secs, polls = wait_done(system, n, t0, timeout)
        cpu1 = proc_cpu_seconds(proc.pid)
        stdout, _ = proc.communicate("stop\n", timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{system.label} worker exited {proc.returncode}: {stderr_tail(stderr)}")
        report = system.report(stdout)
        ver = system.verify(n, report)
    if secs is None:
        ver["ok"] = False
        ver["failures"].append(f"timed out after {timeout:.0f} s with {done} of {n} done")
    cpu = (cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else None
    out: dict[str, Any] = {
        "jobs": n, "seconds": round(secs, 4) if secs else None,
        "jobs_per_s": round(n / secs, 1) if secs else 0.0,
        "worker_cpu_us_per_job": round(cpu / n * 1e6, 1) if cpu is not None else None,
        "polls": polls, "fill": fill, "verified": ver}
    if "jobs_per_s" in report:  # tenure's worker times itself too (worker.start to its last settlement)
        out["worker_own_jobs_per_s"] = round(report["jobs_per_s"], 1)
    return out


def measure_bulk(system: System, n: int) -> dict[str, Any]:
    """One fill of ``n`` jobs (the system's bulk enqueue, timed by the fill itself, see
    :meth:`System.prepare`) with no drain after it; verified: ``n`` jobs queued in the store."""
    try:
        fill = system.prepare(n)
        queued = system.queued()
    finally:
        system.discard()
    ver: dict[str, Any] = {"ok": True, "failures": [], "checks": {}}
    check(ver, "queued_after_fill", queued, n)
    return {"fill": fill, "verified": ver}
