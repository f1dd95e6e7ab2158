"""The per-call measurements of ``python -m bench.peers``, beside its drains: each system's
enqueue of one job per call, and its enqueue-to-start latency across processes.

* **one by one** (``enqueue1``): a fresh, empty store; a process of the system's own (its driver,
  or ``bench.peer_tenure`` for tenure) queues ``N`` no-op jobs, one call each: pgqueuer's
  ``Queries.enqueue`` of one job, tenure's ``store.jobs.enqueue``, procrastinate's
  ``defer_async``, huey's task call. Reported: jobs/s and that process's CPU per enqueue.
  Verified: exactly ``N`` jobs queued in the store afterwards.
* **latency** (``lwork`` + ``lenqueue``): a fresh, empty store; one worker process at its
  drain settings is started and left idle, then an enqueuer in another process sends ``N`` jobs,
  one every ``GAP`` ms (the same offered rate for every system), each carrying the machine clock
  taken just before its enqueue; the handler records how long after that it started. Reported:
  p50 and p99 in ms, and the worker process's CPU (every thread, ``/proc``) per job from the first
  enqueue to the last job seen done: what an idle worker costs at this light offered rate.
  Verified: ``N`` jobs done in the store, the handler ran ``N`` times on ``N`` distinct jobs.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from typing import Any

from .machine import proc_cpu_seconds
from .peer_process import stderr_tail, worker_process

POLL_S = 0.01


def _last_json(stdout: str) -> dict[str, Any]:
    return json.loads(stdout.strip().splitlines()[-1])


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def measure_enqueue_one(system: Any, n: int, root: str) -> dict[str, Any]:
    """One run of ``n`` one-by-one enqueues into a fresh store of ``system``."""
    system.prepare_empty()
    try:
        argv, env = system.calls_argv("enqueue1", str(n))
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=max(300, n / 20), env=env, cwd=root)
        if proc.returncode != 0:
            raise RuntimeError(f"{system.label} enqueue1 failed: {proc.stderr[-3000:]}")
        rep = _last_json(proc.stdout)
        queued = system.queued()
        ok = queued == n and rep.get("enqueued") == n
        return {"jobs": n, "jobs_per_s": round(n / rep["seconds"], 1),
                "cpu_us_per_enqueue": round(rep["cpu_s"] / n * 1e6, 1),
                "verified": {"ok": ok, "queued": queued,
                             "failures": [] if ok else [f"enqueue1: {queued} queued, expected {n}"]}}
    finally:
        system.discard()


def measure_latency(system: Any, n: int, gap_ms: float, root: str) -> dict[str, Any]:
    """One latency run of ``n`` jobs, one every ``gap_ms``, into an idle worker of ``system``."""
    system.prepare_empty()
    argv, env = system.calls_argv("lwork", *system.lwork_args())
    with worker_process(system, argv, env, root) as (proc, stderr):
        assert proc.stdin is not None and proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"{system.label} latency worker did not start: {line!r} {stderr_tail(stderr)}")
        eargv, eenv = system.calls_argv("lenqueue", str(n), str(int(gap_ms * 1000)))
        cpu0 = proc_cpu_seconds(proc.pid)
        enq = subprocess.run(eargv, capture_output=True, text=True, timeout=max(300, n * gap_ms / 100),
                             env=eenv, cwd=root)
        if enq.returncode != 0:
            raise RuntimeError(f"{system.label} lenqueue failed: {enq.stderr[-3000:]}")
        deadline = time.monotonic() + 120
        while system.done() < n and time.monotonic() < deadline:
            time.sleep(POLL_S)
        cpu1 = proc_cpu_seconds(proc.pid)
        stdout, _ = proc.communicate("stop\n", timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{system.label} latency worker exited {proc.returncode}: {stderr_tail(stderr)}")
        rep = _last_json(stdout)
        done = system.done()
    lat = rep.get("lat_ms", [])
    failures = []
    if done != n:
        failures.append(f"latency: {done} done in the store, expected {n}")
    if rep.get("handled") != n or rep.get("distinct") != n:
        failures.append(f"latency: handler ran {rep.get('handled')} times on {rep.get('distinct')} jobs, expected {n}")
    return {"jobs": n, "gap_ms": gap_ms,
            "p50_ms": round(percentile(lat, 0.5), 2) if lat else None,
            "p99_ms": round(percentile(lat, 0.99), 2) if lat else None,
            "cpu_us_per_job": None if cpu0 is None or cpu1 is None else round((cpu1 - cpu0) / n * 1e6, 1),
            "verified": {"ok": not failures, "failures": failures}}


def summarize_calls(runs_e: list[dict[str, Any]], runs_l: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the runs of one system (each field None when not measured)."""
    out: dict[str, Any] = {"enqueue_one_per_s": None, "enqueue_one_cpu_us": None,
                           "latency_p50_ms": None, "latency_p99_ms": None, "latency_cpu_us_per_job": None,
                           "calls_failures": [],
                           "measured": bool(runs_e or runs_l)}
    if runs_e:
        out["enqueue_one_per_s"] = round(statistics.median(r["jobs_per_s"] for r in runs_e), 1)
        out["enqueue_one_cpu_us"] = round(statistics.median(r["cpu_us_per_enqueue"] for r in runs_e), 1)
        out["enqueue_one_all"] = [r["jobs_per_s"] for r in runs_e]
    p50s = [r["p50_ms"] for r in runs_l if r["p50_ms"] is not None]
    if p50s:
        out["latency_p50_ms"] = round(statistics.median(p50s), 2)
        out["latency_p99_ms"] = round(statistics.median(r["p99_ms"] for r in runs_l if r["p99_ms"] is not None), 2)
        out["latency_all"] = [(r["p50_ms"], r["p99_ms"]) for r in runs_l]
        cpus = [r["cpu_us_per_job"] for r in runs_l if r.get("cpu_us_per_job") is not None]
        out["latency_cpu_us_per_job"] = round(statistics.median(cpus), 1) if cpus else None
    out["calls_failures"] = [f for r in [*runs_e, *runs_l] for f in r["verified"]["failures"]]
    return out
