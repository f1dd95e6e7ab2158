"""The scenarios. Each builds its own fresh store, measures, and verifies the run in the store.

Every result is a plain dict (it goes to the JSON report as is) with a ``verified`` entry from
:func:`bench.targets.verify_store`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import tenure
from tenure.engine.rows import TOKEN_INDEX, Settle

from .child import Recorder, wait_completions
from .targets import SQLiteTarget, Target, verify_store

KIND = "noop"
OWNER = "bench"
LEASE_MS = 30_000
ALL_SCENARIOS = ("enqueue_one", "enqueue_many", "drain", "drain_processes", "latency", "claim_depth",
                 "floor", "rss", "light_load", "churn")
#: Scenarios of bench/load.py.
LOAD_SCENARIOS = ("light_load", "churn")


@dataclass
class Config:
    """Sizes of one run (``--quick`` shrinks them)."""

    jobs: int = 20_000
    concurrency: list[int] = field(default_factory=lambda: [1, 4, 16, 32, 64, 128])
    repeat: int = 1
    enqueue_batch: int = 1_000
    floor_batch: int = 100
    latency_samples: int = 200
    latency_gap_ms: float = 20.0
    depths: list[int] = field(default_factory=lambda: [10_000, 1_000_000])
    depth_claims: int = 2_000
    processes: int = 2
    #: 64 slots each: two processes' claims and settlements then overlap (32 left both waiting
    #: on the store half the time: 9.4k against 15.0k jobs/s on PostgreSQL, measured here).
    process_concurrency: int = 64
    rss_concurrency: int = 32
    rss_jobs: int = 5_000
    #: Time budget of one floor loop (seconds).
    floor_budget_s: float = 30.0
    #: PostgreSQL: ANALYZE after filling a queue for the throughput scenarios (see Prepared).
    pg_analyze: bool = True
    #: light_load: the light pace (jobs/s) and how long each phase enqueues (seconds).
    light_rate: int = 100
    load_seconds: float = 10.0
    #: churn: jobs the table serves before the measured drain (the target asks for 1 000 000; a
    #: smaller history keeps the suite's run short, and the result states the number).
    churn_jobs: int = 200_000


QUICK = Config(jobs=1_000, concurrency=[1, 8, 32], latency_samples=30, latency_gap_ms=10.0,
               depths=[1_000, 20_000], depth_claims=200, rss_jobs=500, floor_budget_s=5.0,
               load_seconds=2.0, churn_jobs=5_000)


def _elapsed_rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def _cpu_us(cpu_seconds: float, n: int) -> float:
    """This process's CPU time (every thread; on SQLite that includes the database's own work)
    per job, in microseconds: unlike jobs/s it barely moves when other processes load the host."""
    return round(cpu_seconds / n * 1e6, 1) if n else 0.0


def _payloads(start: int, n: int) -> list[dict[str, Any]]:
    return [{"kind": KIND, "payload": {"i": i}} for i in range(start, start + n)]


def fill(store: tenure.Store, n: int, batch: int = 10_000) -> tuple[list[str], float]:
    """Queue ``n`` no-op jobs with ``enqueue_many`` in batches; answers (ids, seconds)."""
    ids: list[str] = []
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        ids.extend(store.jobs.enqueue_many(_payloads(start, min(batch, n - start))))
    return ids, time.perf_counter() - t0


class Prepared:
    """Stores holding ``n`` queued no-op jobs, made fast: on SQLite one filled file is copied for
    every measurement; on PostgreSQL a fresh schema is filled with ``enqueue_many`` and then, with
    ``analyze``, ANALYZEd (what autovacuum would have done by the time a real queue is this deep;
    see ``claim_depth`` for the claim before statistics exist)."""

    def __init__(self, target: Target, analyze: bool = True) -> None:
        self.target = target
        self.analyze = analyze
        self._templates: dict[int, tuple[str, list[str]]] = {}
        #: Seconds the last PostgreSQL fill spent in ``enqueue_many`` (None: copied from a template).
        self.last_enqueue_seconds: float | None = None

    def store(self, label: str, n: int) -> tuple[str, list[str]]:
        target = self.target
        url = target.fresh_url(label)
        if isinstance(target, SQLiteTarget):
            if n not in self._templates:
                turl = target.fresh_url(f"template-{n}")
                with tenure.connect(turl) as st:
                    ids, _ = fill(st, n)
                self._templates[n] = (turl, ids)
            turl, ids = self._templates[n]
            shutil.copyfile(SQLiteTarget.path(turl), SQLiteTarget.path(url))
            return url, ids
        with tenure.connect(url) as st:
            st.jobs.counts()  # the schema is made (migrated) before the clock starts
            ids, self.last_enqueue_seconds = fill(st, n)
        if self.analyze:
            target.analyze(url)
        return url, ids

    def close(self) -> None:
        for turl, _ in self._templates.values():
            self.target.discard(turl)
        self._templates.clear()


# -- 1, 2: enqueue -------------------------------------------------------------------------------


def enqueue_one(target: Target, cfg: Config) -> dict[str, Any]:
    """``store.jobs.enqueue`` one job per call (one transaction each), ``jobs`` times or until
    ``floor_budget_s`` has passed."""
    url = target.fresh_url("enqueue-one")
    try:
        with tenure.connect(url) as store:
            jobs = store.jobs
            enqueue = jobs.enqueue
            n = 0
            c0 = time.process_time()
            t0 = time.perf_counter()
            deadline = t0 + cfg.floor_budget_s
            while n < cfg.jobs:
                enqueue(KIND, {"i": n})
                n += 1
                if n % 100 == 0 and time.perf_counter() > deadline:
                    break
            secs = time.perf_counter() - t0
            cpu = time.process_time() - c0
        with target.connect(url) as raw:
            ver = verify_store(raw, pending=n)
    finally:
        target.discard(url)
    return {"jobs": n, "seconds": round(secs, 3), "jobs_per_s": _elapsed_rate(n, secs),
            "cpu_us_per_job": _cpu_us(cpu, n), "verified": ver.as_dict()}


def enqueue_many(target: Target, cfg: Config) -> dict[str, Any]:
    """``store.jobs.enqueue_many`` in batches of ``enqueue_batch`` (one transaction per batch)."""
    n, batch = cfg.jobs, cfg.enqueue_batch
    url = target.fresh_url("enqueue-many")
    try:
        with tenure.connect(url) as store:
            store.jobs  # noqa: B018 - create the tables outside the timing
            specs = [_payloads(s, min(batch, n - s)) for s in range(0, n, batch)]
            c0 = time.process_time()
            t0 = time.perf_counter()
            for chunk in specs:
                store.jobs.enqueue_many(chunk)
            secs = time.perf_counter() - t0
            cpu = time.process_time() - c0
        with target.connect(url) as raw:
            ver = verify_store(raw, pending=n)
    finally:
        target.discard(url)
    return {"jobs": n, "batch": batch, "seconds": round(secs, 3), "rows_per_s": _elapsed_rate(n, secs),
            "cpu_us_per_job": _cpu_us(cpu, n), "verified": ver.as_dict()}


# -- 3: drain with a real worker ------------------------------------------------------------------


def drain_once(target: Target, prepared: Prepared, n: int, concurrency: int) -> dict[str, Any]:
    """Start a worker over ``n`` queued no-op jobs; the clock stops when the worker has SETTLED
    (committed) the last completion."""
    url, ids = prepared.store(f"drain-c{concurrency}", n)
    try:
        store = tenure.connect(url)
        try:
            store.jobs  # noqa: B018 - open outside the timing
            rec = Recorder(n)
            worker = store.jobs.create_worker({KIND: rec}, concurrency=concurrency)
            timeout = max(120.0, n / 100)
            c0 = time.process_time()
            t0 = time.perf_counter()
            worker.start()
            ok = rec.done.wait(timeout) and wait_completions(worker, n, timeout)
            secs = time.perf_counter() - t0
            cpu = time.process_time() - c0
            stats = worker.stats()
            worker.stop()
        finally:
            store.close()
        with target.connect(url) as raw:
            ver = verify_store(raw, done=n, handled_ids=rec.ids, enqueued_ids=ids,
                               released=stats.get("claims_released", 0))
        ver.check("drained_before_timeout", ok, True)
    finally:
        target.discard(url)
    return {"concurrency": concurrency, "jobs": n, "seconds": round(secs, 3),
            "jobs_per_s": _elapsed_rate(n, secs), "cpu_us_per_job": _cpu_us(cpu, n),
            "worker_stats": stats, "verified": ver.as_dict()}


def drain(target: Target, cfg: Config, prepared: Prepared) -> dict[str, Any]:
    runs = []
    for c in cfg.concurrency:
        reps = [drain_once(target, prepared, cfg.jobs, c) for _ in range(cfg.repeat)]
        runs.append(_median_run(reps, "jobs_per_s"))
    ok = all(r["verified"]["ok"] for r in runs)
    best = max(runs, key=lambda r: r["jobs_per_s"])
    return {"jobs": cfg.jobs, "by_concurrency": runs, "best": {"concurrency": best["concurrency"],
            "jobs_per_s": best["jobs_per_s"]}, "verified": {"ok": ok}}


def _median_run(reps: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The repetition with the median ``key`` (all repetitions' values kept beside it); verified
    only if every repetition verified."""
    ordered = sorted(reps, key=lambda r: r[key])
    out = dict(ordered[(len(ordered) - 1) // 2])
    if len(reps) > 1:
        out[f"{key}_all"] = [r[key] for r in reps]
        ok = all(r["verified"]["ok"] for r in reps)
        out["verified"] = dict(out["verified"], ok=ok,
                               failures=[f for r in reps for f in r["verified"]["failures"]])
    return out


def drain_processes(target: Target, cfg: Config, prepared: Prepared) -> dict[str, Any]:
    """``processes`` worker processes (each ``process_concurrency`` slots) drain one queue
    together; the clock runs from the go signal to the last settled completion."""
    reps = [_drain_processes_once(target, cfg, prepared) for _ in range(cfg.repeat)]
    return _median_run(reps, "jobs_per_s")


def _drain_processes_once(target: Target, cfg: Config, prepared: Prepared) -> dict[str, Any]:
    n, nproc = cfg.jobs, cfg.processes
    url, ids = prepared.store("drain-procs", n)
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    go, stop = ctx.Event(), ctx.Event()
    progress = ctx.Array("q", nproc, lock=False)
    procs = [ctx.Process(target=_drain_process_entry, daemon=True,
                         args=(url, cfg.process_concurrency, i, ready, go, stop, progress, results))
             for i in range(nproc)]
    try:
        for p in procs:
            p.start()
        for _ in procs:
            ready.get(timeout=60)
        timeout = max(120.0, n / 100)
        t0 = time.perf_counter()
        go.set()
        ok = True
        while sum(progress) < n:  # the children report every 5 ms: the clock is that close
            if time.perf_counter() - t0 > timeout:
                ok = False
                break
            time.sleep(0.001)
        secs = time.perf_counter() - t0
        stop.set()
        got: dict[int, Any] = {}
        for _ in procs:
            idx, pids, mem = results.get(timeout=60)
            got[idx] = (pids, mem)
        for p in procs:
            p.join(timeout=30)
        handled = [i for idx in sorted(got) for i in got[idx][0]]
        with target.connect(url) as raw:
            ver = verify_store(raw, done=n, handled_ids=handled, enqueued_ids=ids)
        ver.check("drained_before_timeout", ok, True)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        target.discard(url)
    return {"processes": nproc, "concurrency_per_process": cfg.process_concurrency, "jobs": n,
            "seconds": round(secs, 3), "jobs_per_s": _elapsed_rate(n, secs),
            "per_process_jobs": [len(got[i][0]) for i in sorted(got)],
            "per_process_memory_mb": [got[i][1] for i in sorted(got)], "verified": ver.as_dict()}


def _drain_process_entry(*args: Any) -> None:
    from .child import drain_process

    drain_process(*args)


# -- 4: enqueue -> start latency --------------------------------------------------------------------


def _percentiles(samples_ns: list[int]) -> dict[str, float]:
    ms = sorted(s / 1e6 for s in samples_ns)
    if not ms:
        return {}

    def pct(p: float) -> float:
        return round(ms[min(len(ms) - 1, max(0, round(p / 100 * len(ms) + 0.5) - 1))], 3)

    return {"samples": len(ms), "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99),
            "max_ms": round(ms[-1], 3), "mean_ms": round(statistics.fmean(ms), 3)}


def latency(target: Target, cfg: Config) -> dict[str, Any]:
    """An idle worker (concurrency 1); the handler reads the clock when it starts and subtracts the
    ``time.time_ns()`` the enqueuer put in the payload just before calling ``enqueue``."""
    same = _latency_run(target, cfg, cross=False)
    cross = _latency_run(target, cfg, cross=True)
    return {"in_process": same, "cross_process": cross, "gap_ms": cfg.latency_gap_ms,
            "verified": {"ok": same["verified"]["ok"] and cross["verified"]["ok"]}}


def _latency_run(target: Target, cfg: Config, *, cross: bool) -> dict[str, Any]:
    n = cfg.latency_samples
    url = target.fresh_url("latency-x" if cross else "latency")
    lat: list[int] = []
    ids: list[str] = []
    arrived = threading.Event()

    def handler(payload: Any, ctx: Any) -> None:
        lat.append(time.time_ns() - payload["t"])
        ids.append(ctx.job.id)
        arrived.set()

    try:
        store = tenure.connect(url)
        try:
            jobs = store.jobs
            worker = jobs.create_worker({KIND: handler}, concurrency=1)
            worker.start()
            time.sleep(0.3)  # the worker is idle: claimed nothing, waiting to be woken
            enqueued: list[str] = []
            if cross:
                proc = subprocess.run([sys.executable, "-m", "bench.child", "enqueue", url, KIND, str(n),
                                       str(cfg.latency_gap_ms)], capture_output=True, text=True,
                                      timeout=60 + n * (cfg.latency_gap_ms / 1000 + 0.5),
                                      cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
                if proc.returncode != 0:
                    raise RuntimeError(f"the enqueuer process failed: {proc.stderr[-2000:]}")
                enqueued = json.loads(proc.stdout)["ids"]
                ok = wait_completions(worker, n, 30.0)
            else:
                ok = True
                for _ in range(n):
                    arrived.clear()
                    enqueued.append(jobs.enqueue(KIND, {"t": time.time_ns()}))
                    ok = arrived.wait(10.0) and ok
                    time.sleep(cfg.latency_gap_ms / 1000)
                ok = wait_completions(worker, n, 30.0) and ok
            worker.stop()
        finally:
            store.close()
        with target.connect(url) as raw:
            ver = verify_store(raw, done=n, handled_ids=ids, enqueued_ids=enqueued)
        ver.check("all_started", ok, True)
    finally:
        target.discard(url)
    wake = ("PRAGMA data_version watcher" if target.engine == "sqlite" else "LISTEN/NOTIFY") if cross \
        else "in-process wake hook"
    return {**_percentiles(lat), "wake": wake, "verified": ver.as_dict()}


# -- 5: claim cost at depth ----------------------------------------------------------------------


DEPTH_WARMUP = 20
DEPTH_BUDGET_S = 60.0


def _timed_claims(jobs: Any, k: int, budget_s: float) -> dict[str, Any]:
    """Up to ``k`` rounds of ``claim_many(limit=1)`` + ``complete_many``, stopping early after
    ``budget_s`` (a claim that scans can take seconds at depth)."""
    claim_ns = 0
    done = 0
    c0 = time.process_time()
    t0 = time.perf_counter_ns()
    stop_at = t0 + int(budget_s * 1e9)
    while done < k and time.perf_counter_ns() < stop_at:
        a = time.perf_counter_ns()
        got = jobs.claim_many(KIND, owner=OWNER, limit=1, lease_ms=LEASE_MS)
        claim_ns += time.perf_counter_ns() - a
        errs = jobs.complete_many([(got[0].lease, None)])
        if errs[0] is not None:
            raise errs[0]
        done += 1
    total_ns = time.perf_counter_ns() - t0
    cpu = time.process_time() - c0
    return {"claims": done, "claim_us": round(claim_ns / done / 1000, 1),
            "claim_complete_us": round(total_ns / done / 1000, 1), "cpu_us_per_job": _cpu_us(cpu, done)}


def claim_depth(target: Target, cfg: Config) -> dict[str, Any]:
    """``claim_many(limit=1)`` + ``complete_many`` per job with ``depth`` jobs pending, timed
    over ``depth_claims`` rounds after a short warm-up; the claim call is timed on its own too.
    Flat means the claim reads an index in claim order and stops (no scan, no sort).

    On PostgreSQL the rounds run twice: right after the fill ("as filled": the planner has no
    statistics for the new rows, as after any burst of enqueues before autovacuum analyzes), then
    after ``ANALYZE tenure_jobs``."""
    out: list[dict[str, Any]] = []
    for depth in cfg.depths:
        url = target.fresh_url(f"depth-{depth}")
        try:
            with tenure.connect(url) as store:
                _, fill_secs = fill(store, depth)
                plan = target.claim_plan(url, [KIND])
                jobs = store.jobs
                k = min(cfg.depth_claims, max(1, (depth - DEPTH_WARMUP) // 2))
                _timed_claims(jobs, DEPTH_WARMUP, DEPTH_BUDGET_S)
                row: dict[str, Any] = {"depth": depth, "fill_rows_per_s": _elapsed_rate(depth, fill_secs),
                                       **_timed_claims(jobs, k, DEPTH_BUDGET_S), "plan": plan}
                claimed = DEPTH_WARMUP + row["claims"]
                if target.engine == "postgres":
                    target.analyze(url)
                    analyzed = _timed_claims(jobs, k, DEPTH_BUDGET_S)
                    row["analyzed"] = {**analyzed, "plan": target.claim_plan(url, [KIND])}
                    claimed += analyzed["claims"]
            with target.connect(url) as raw:
                ver = verify_store(raw, done=claimed, pending=depth - claimed)
        finally:
            target.discard(url)
        out.append({**row, "verified": ver.as_dict()})
    first, last = out[0], out[-1]
    res: dict[str, Any] = {
        "by_depth": out,
        "claim_ratio": round(last["claim_us"] / first["claim_us"], 3),
        "claim_complete_ratio": round(last["claim_complete_us"] / first["claim_complete_us"], 3),
        "cpu_ratio": round(last["cpu_us_per_job"] / first["cpu_us_per_job"], 3),
        "verified": {"ok": all(r["verified"]["ok"] for r in out)}}
    if "analyzed" in first:
        res["analyzed_claim_ratio"] = round(last["analyzed"]["claim_us"] / first["analyzed"]["claim_us"], 3)
        every = [r["claim_us"] for r in out] + [r["analyzed"]["claim_us"] for r in out]
        res["worst_best_claim_ratio"] = round(max(every) / min(every), 3)
    return res


# -- 6: the bare-SQL floor and the layers above it -----------------------------------------------


def _floor_raw(target: Target, url: str, batch: int, budget: float) -> tuple[int, float, float]:
    """The engine's claim and fenced-complete statements, autocommitted, on a raw connection."""
    st = target.floor_statements([KIND])
    with target.connect(url) as raw:
        execute = raw.execute
        claim_sql, complete_sql = st.claim_sql(batch), st.complete_sql
        claim_params, complete_params, now, probe_sql = st.claim_params, st.complete_params, st.now, st.probe_sql
        done = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        while True:
            if probe_sql is not None and execute(probe_sql, (now(),)).fetchone() is not None:
                raise RuntimeError("an expired lease in the floor's queue: the bare-SQL claim does not reclaim")
            rows = execute(claim_sql, claim_params(OWNER, LEASE_MS, now(), batch)).fetchall()
            if not rows:
                break
            done += len(execute(complete_sql, complete_params(rows, now())).fetchall())
            if time.perf_counter() - t0 > budget:
                break
        secs = time.perf_counter() - t0
        cpu = time.process_time() - c0
    return done, secs, cpu


def _floor_engine(target: Target, url: str, batch: int, budget: float) -> tuple[int, float, float]:
    """The engine's session methods (every statement the engine issues, no semantics layer)."""
    with tenure.connect(url) as store:
        store.jobs  # noqa: B018
        engine = store.engine
        done = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        while True:
            with engine.session() as s:
                rows = s.job_claim(kinds=[KIND], queues=None, owner=OWNER, lease_ms=LEASE_MS, now=None,
                                   limit=batch)
            if not rows:
                break
            with engine.session() as s:
                done += len(s.job_complete([Settle(r[0], r[TOKEN_INDEX], generation=r[9]) for r in rows],
                                           None))
            if time.perf_counter() - t0 > budget:
                break
        secs = time.perf_counter() - t0
        cpu = time.process_time() - c0
    return done, secs, cpu


def _floor_api(target: Target, url: str, batch: int, budget: float) -> tuple[int, float, float]:
    """The public API: ``claim_many`` + ``complete_many``."""
    with tenure.connect(url) as store:
        jobs = store.jobs
        done = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        while True:
            claims = jobs.claim_many(KIND, owner=OWNER, limit=batch, lease_ms=LEASE_MS)
            if not claims:
                break
            errs = jobs.complete_many([(c.lease, None) for c in claims])
            done += sum(e is None for e in errs)
            if time.perf_counter() - t0 > budget:
                break
        secs = time.perf_counter() - t0
        cpu = time.process_time() - c0
    return done, secs, cpu


LAYERS = {"sql": _floor_raw, "engine": _floor_engine, "api": _floor_api}


def floor(target: Target, cfg: Config, prepared: Prepared) -> dict[str, Any]:
    """The same claim + fenced-complete loop at three layers, unbatched (1) and batched:
    ``sql`` (raw driver, the engine's own statements), ``engine`` (its session methods, i.e. every
    statement it issues), ``api`` (``store.jobs``). Each run works through ``jobs`` fresh jobs, or
    stops after ``floor_budget_s`` (one commit per job can take minutes on a slow disk); the rows
    it settled are verified either way and the rest are still pending, untouched."""
    out: dict[str, Any] = {"jobs": cfg.jobs, "batch": cfg.floor_batch,
                           "statements": target.floor_statements([KIND]).description}
    ok = True
    for layer, fn in LAYERS.items():
        for batch in (1, cfg.floor_batch):
            reps = []
            for _ in range(cfg.repeat):
                url, ids = prepared.store(f"floor-{layer}-{batch}", cfg.jobs)
                try:
                    done, secs, cpu = fn(target, url, batch, cfg.floor_budget_s)
                    with target.connect(url) as raw:
                        ver = verify_store(raw, done=done, pending=cfg.jobs - done)
                finally:
                    target.discard(url)
                reps.append({"jobs": done, "jobs_per_s": _elapsed_rate(done, secs), "seconds": round(secs, 3),
                             "cpu_us_per_job": _cpu_us(cpu, done), "verified": ver.as_dict()})
            run = _median_run(reps, "jobs_per_s")
            ok = ok and run["verified"]["ok"]
            out[f"{layer}_{'unbatched' if batch == 1 else 'batched'}"] = run
    out["verified"] = {"ok": ok}
    return out


# -- 7: worker memory ----------------------------------------------------------------------------


def rss(target: Target, cfg: Config, prepared: Prepared) -> dict[str, Any]:
    """A fresh interpreter (only tenure imported) runs a worker at ``rss_concurrency`` over
    ``rss_jobs`` queued jobs; VmRSS/VmHWM from ``/proc/self/status``."""
    n = cfg.rss_jobs
    url, ids = prepared.store("rss", n)
    try:
        proc = subprocess.run([sys.executable, "-m", "bench.child", "rss", url, str(n), str(cfg.rss_concurrency)],
                              capture_output=True, text=True, timeout=300,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        if proc.returncode != 0:
            raise RuntimeError(f"the rss process failed: {proc.stderr[-2000:]}")
        res = json.loads(proc.stdout)
        with target.connect(url) as raw:
            ver = verify_store(raw, done=n, handled_ids=res.pop("ids"), enqueued_ids=ids)
        ver.check("drained_before_timeout", res.pop("ok"), True)
    finally:
        target.discard(url)
    after = res["after_drain"]
    return {"concurrency": cfg.rss_concurrency, "jobs": n, **res,
            "rss_mb": after.get("VmRSS"), "peak_rss_mb": after.get("VmHWM"), "verified": ver.as_dict()}


#: Attempts per scenario when the database goes away mid-run (a restarted server invalidates that
#: measurement, so it is run again from a fresh store; the count is kept in the result).
ATTEMPTS = 3


def _lost_database(exc: BaseException) -> bool:
    from tenure.errors import StoreUnavailable

    if isinstance(exc, StoreUnavailable):
        return True
    try:
        import psycopg
    except ImportError:
        return False
    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)


def _wait_for_database(target: Target, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            target.discard(target.fresh_url("probe"))
            return
        except Exception:  # noqa: BLE001 - still down
            time.sleep(2)


def run_all(target: Target, cfg: Config, scenarios: list[str], log: Any = print) -> dict[str, Any]:
    """Run the chosen scenarios on one target, in a fixed order; answers {name: result}. A scenario
    whose database connection is lost (a server restart) is run again, up to :data:`ATTEMPTS`
    times; any other error is recorded as that scenario's failed result, and the run goes on."""
    results: dict[str, Any] = {}
    order = [s for s in ALL_SCENARIOS if s in scenarios]
    if target.engine != "postgres" and "drain_processes" in order:
        order.remove("drain_processes")  # the multi-process drain target is PostgreSQL's
    for name in order:
        for attempt in range(1, ATTEMPTS + 1):
            prepared = Prepared(target, analyze=cfg.pg_analyze)
            log(f"[{target.engine}] {name} ...")
            t0 = time.perf_counter()
            try:
                if name in LOAD_SCENARIOS:
                    from . import load

                    res = getattr(load, name)(target, cfg, prepared)
                elif name in ("drain", "drain_processes", "floor", "rss"):
                    res = globals()[name](target, cfg, prepared)
                else:
                    res = globals()[name](target, cfg)
            except Exception as exc:  # noqa: BLE001 - reported in the result, never hidden
                if _lost_database(exc) and attempt < ATTEMPTS:
                    log(f"[{target.engine}] {name}: lost the database ({exc!s:.200}); running it again")
                    _wait_for_database(target)
                    continue
                res = {"error": f"{type(exc).__name__}: {exc}",
                       "verified": {"ok": False, "failures": [f"the scenario raised {type(exc).__name__}"]}}
            finally:
                prepared.close()
            res["wall_seconds"] = round(time.perf_counter() - t0, 1)
            if attempt > 1:
                res["attempts"] = attempt
            results[name] = res
            status = "verified" if res["verified"]["ok"] else "VERIFICATION FAILED"
            log(f"[{target.engine}] {name} done in {res['wall_seconds']} s ({status})")
            break
    return results
