"""Load shapes the throughput scenarios do not cover, each verified exactly-once in the
store like every other scenario.

* ``light_load``: two worker processes (``process_concurrency`` slots each, ``tenure worker``'s
  default) serve one queue that this process feeds one ``enqueue`` at a time: first at a light
  pace (``light_rate`` jobs/s for ``load_seconds``), then flat out (as fast as one enqueuer goes,
  for ``load_seconds``). Each phase ends when its last job has settled. **CPU per job** = the
  CPU time of the enqueuer, of both worker processes and, on PostgreSQL, of every server backend
  of the bench's database (``/proc/<pid>/stat``; the server runs on this host), over the phase,
  divided by its jobs; on PostgreSQL also the **commits per job**: ``pg_stat_database.xact_commit``
  of the bench's database (every transaction committed in it, read-only ones included) from the
  phase's start to its end, each end read :data:`STATS_SETTLE_S` after the phase (PostgreSQL 15
  flushes a backend's counters at most once a second, and one that then goes idle only 10 s
  later), so the idle workers' polls and the meter's own reads in that window count too (a few
  per second against the phase's jobs). The target: light / saturated CPU per job <= 1.5.
* ``churn``: the drain rate of ``jobs`` fresh no-op jobs (one worker at ``process_concurrency``)
  on a table that has first served ``churn_jobs`` jobs (bulk-enqueued and drained, their done rows
  retained as the default retention keeps them, their dead tuples wherever the server's vacuum
  left them), against the same drain on a fresh schema in the same run, once before and once after
  it (the ratio is against their mean, so a host whose load drifts during the minutes the history
  takes does not make the ratio). The target: churned / fresh >= 0.8 with autovacuum at
  PostgreSQL's defaults, >= 0.5 with it off (the result names the server's setting: the bench
  never changes it, it is the whole server's).
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import tenure

from .child import Recorder, wait_completions
from .machine import proc_cpu_seconds
from .scenarios import KIND, Config, Prepared, _cpu_us, _elapsed_rate, fill
from .targets import PostgresTarget, Target, verify_store

#: Seconds between a phase's last settle and reading its commit count. A PostgreSQL 15 backend
#: flushes its statistics when it goes idle, but at most once a second: one that committed less
#: than a second after its last flush and then stays idle (the enqueuer's connection, a listening
#: connection) flushes only when its 10 s idle timer (PGSTAT_IDLE_INTERVAL) fires.
#: ``pg_stat_force_next_flush()`` flushes only the calling backend. A 1.2 s wait assigned those
#: late commits to the next phase (commits per job swung by ~1.5 between runs).
STATS_SETTLE_S = 11.0
#: When the commit count is also read early (after one flush interval), to report how many
#: commits reached the counter only after it (``late_commits_per_job``).
EARLY_READ_S = 1.2


class _Meter:
    """CPU of this process, the worker processes and (PostgreSQL) the database's backends, and
    the database's commit count, between :meth:`start` and :meth:`stop`."""

    def __init__(self, target: Target, url: str, pids: list[int]) -> None:
        self.pg = isinstance(target, PostgresTarget)
        self.raw = target.raw(url) if self.pg else None
        self.pids = pids
        self._settled_commits: int | None = None  # the last stop()'s reading, the next start's
        self.early: int | None = None  # the last _commits()'s reading after EARLY_READ_S

    def _backends(self) -> dict[int, float]:
        if self.raw is None:
            return {}
        rows = self.raw.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                                "AND pid <> pg_backend_pid()").fetchall()
        out = {}
        for (pid,) in rows:
            cpu = proc_cpu_seconds(pid)
            if cpu is not None:
                out[pid] = cpu
        return out

    def _commits(self) -> int | None:
        """The database's committed transactions once every backend has flushed what it
        committed up to now (:data:`STATS_SETTLE_S`)."""
        if self.raw is None:
            return None
        time.sleep(EARLY_READ_S)
        self.early = self._read_commits()  # what the old 1.2 s reading saw, for the record
        time.sleep(STATS_SETTLE_S - EARLY_READ_S)
        return self._read_commits()

    def _read_commits(self) -> int:
        assert self.raw is not None
        self.raw.execute("SELECT pg_stat_clear_snapshot()")
        return int(self.raw.execute("SELECT xact_commit FROM pg_stat_database "
                                    "WHERE datname = current_database()").fetchone()[0])

    def start(self) -> None:
        # Right after a stop() its settled reading is this phase's start: nothing ran between.
        settled, self._settled_commits = self._settled_commits, None
        self.commits0 = settled if settled is not None else self._commits()
        self.own0 = time.process_time()
        self.workers0 = [proc_cpu_seconds(p) or 0.0 for p in self.pids]
        self.backends0 = self._backends()

    def stop(self, jobs: int) -> dict[str, Any]:
        own = time.process_time() - self.own0
        workers = sum((proc_cpu_seconds(p) or 0.0) - c for p, c in zip(self.pids, self.workers0, strict=True))
        backends = sum(cpu - self.backends0.get(pid, 0.0) for pid, cpu in self._backends().items())
        commits = self._settled_commits = self._commits()
        early = self.early if commits is not None else None
        total = own + workers + backends
        out: dict[str, Any] = {
            "cpu_us_per_job": _cpu_us(total, jobs), "enqueuer_cpu_us_per_job": _cpu_us(own, jobs),
            "workers_cpu_us_per_job": _cpu_us(workers, jobs)}
        if self.pg:
            out["server_cpu_us_per_job"] = _cpu_us(backends, jobs)
            if commits is not None and self.commits0 is not None:
                out["commits_per_job"] = round((commits - self.commits0) / jobs, 2) if jobs else None
                out["commits_counted"] = ("xact_commit of the bench's database (idle polls and the "
                                          "meter's reads included), phase start to commits_settle_s "
                                          "after its last settle")
                out["commits_settle_s"] = STATS_SETTLE_S
                if early is not None and jobs:  # counted only after the phase's first flush interval
                    out["late_commits_per_job"] = round((commits - early) / jobs, 2)
        return out

    def close(self) -> None:
        if self.raw is not None:
            self.raw.close()


def light_load(target: Target, cfg: Config, prepared: Prepared) -> dict[str, Any]:
    """See the module docstring."""
    from .scenarios import _drain_process_entry

    url = target.fresh_url("light-load")
    with tenure.connect(url) as st:
        st.jobs.counts()  # made and migrated before the workers open it
    nproc = cfg.processes
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    go, stop = ctx.Event(), ctx.Event()
    progress = ctx.Array("q", nproc, lock=False)
    procs = [ctx.Process(target=_drain_process_entry, daemon=True,
                         args=(url, cfg.process_concurrency, i, ready, go, stop, progress, results))
             for i in range(nproc)]
    phases: dict[str, Any] = {}
    ids: list[str] = []
    meter = None
    try:
        for p in procs:
            p.start()
        for _ in procs:
            ready.get(timeout=60)
        go.set()
        store = tenure.connect(url)
        meter = _Meter(target, url, [p.pid for p in procs if p.pid is not None])
        try:
            jobs = store.jobs
            for phase, rate in (("light", float(cfg.light_rate)), ("saturated", None)):
                meter.start()
                t0 = time.perf_counter()
                first = len(ids)
                i = 0
                while True:
                    now = time.perf_counter() - t0
                    if now >= cfg.load_seconds:
                        break
                    if rate is not None:
                        due = i / rate
                        if due > now:
                            time.sleep(due - now)
                    ids.append(jobs.enqueue(KIND, {"i": len(ids)}))
                    i += 1
                enqueued_s = time.perf_counter() - t0
                deadline = time.perf_counter() + max(60.0, i / 100)
                while sum(progress) < len(ids) and time.perf_counter() < deadline:
                    time.sleep(0.002)
                drained = sum(progress) >= len(ids)
                secs = time.perf_counter() - t0
                n = len(ids) - first
                phases[phase] = {"jobs": n, "offered_rate": rate, "enqueue_seconds": round(enqueued_s, 3),
                                 "seconds": round(secs, 3), "jobs_per_s": _elapsed_rate(n, secs),
                                 "drained": drained, **meter.stop(n)}
        finally:
            store.close()
        stop.set()
        got = dict(results.get(timeout=60)[:2] for _ in procs)
        for p in procs:
            p.join(timeout=30)
        handled = [i for idx in sorted(got) for i in got[idx]]
        with target.connect(url) as raw:
            ver = verify_store(raw, done=len(ids), handled_ids=handled, enqueued_ids=ids)
        ver.check("every_phase_drained", all(ph["drained"] for ph in phases.values()), True)
    finally:
        if meter is not None:
            meter.close()
        for p in procs:
            if p.is_alive():
                p.kill()
        target.discard(url)
    light, sat = phases.get("light", {}), phases.get("saturated", {})
    ratio = (round(light["cpu_us_per_job"] / sat["cpu_us_per_job"], 2)
             if light.get("cpu_us_per_job") and sat.get("cpu_us_per_job") else None)
    return {"processes": nproc, "concurrency_per_process": cfg.process_concurrency, "light": light,
            "saturated": sat, "light_vs_saturated_cpu": ratio, "verified": ver.as_dict()}


def _drain(target: Target, url: str, ids: list[str], concurrency: int, done_before: int) -> dict[str, Any]:
    """One worker drains the queued ``ids`` of ``url`` (``done_before`` rows already done)."""
    n = len(ids)
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
        ver = verify_store(raw, done=done_before + n, released=stats.get("claims_released", 0))
        handled = set(rec.ids)
        ver.check("handled_each_new_job_once", (len(rec.ids), handled == set(ids)), (n, True))
    ver.check("drained_before_timeout", ok, True)
    return {"jobs": n, "seconds": round(secs, 3), "jobs_per_s": _elapsed_rate(n, secs),
            "cpu_us_per_job": _cpu_us(cpu, n), "verified": ver.as_dict()}


def _table_state(target: Target, url: str) -> dict[str, Any]:
    if not isinstance(target, PostgresTarget):
        return {}
    with target.connect(url) as raw:
        row = raw.execute("SELECT n_live_tup, n_dead_tup, pg_total_relation_size('tenure_jobs'), "
                          "last_autovacuum IS NOT NULL OR last_vacuum IS NOT NULL, "
                          "current_setting('autovacuum') FROM pg_stat_user_tables "
                          "WHERE relname = 'tenure_jobs' AND schemaname = current_schema()").fetchone()
    return {"live_tuples": row[0], "dead_tuples": row[1], "table_mb": round(row[2] / 2**20, 1),
            "vacuumed": bool(row[3]), "autovacuum": row[4]}


def churn(target: Target, cfg: Config, prepared: Prepared) -> dict[str, Any]:
    """See the module docstring."""
    conc = cfg.process_concurrency
    runs: dict[str, Any] = {}
    for label, history in (("fresh", 0), ("churned", cfg.churn_jobs), ("fresh_after", 0)):
        url = target.fresh_url(f"churn-{label}")
        try:
            served: dict[str, Any] = {}
            if history:
                with tenure.connect(url) as st:
                    old, _ = fill(st, history)
                served = _drain(target, url, old, conc, 0)
            with tenure.connect(url) as st:
                ids, _ = fill(st, cfg.jobs)
            state = _table_state(target, url)
            run = _drain(target, url, ids, conc, history)
            run.update(state_before_drain=state, served=served)
            if served and not served["verified"]["ok"]:
                run["verified"] = dict(run["verified"], ok=False,
                                       failures=run["verified"]["failures"] + served["verified"]["failures"])
            runs[label] = run
        finally:
            target.discard(url)
    fresh, churned, after = runs["fresh"], runs["churned"], runs["fresh_after"]
    fresh_rate = (fresh["jobs_per_s"] + after["jobs_per_s"]) / 2
    ok = all(r["verified"]["ok"] for r in runs.values())
    return {"history_jobs": cfg.churn_jobs, "jobs": cfg.jobs, "concurrency": conc, "fresh": fresh,
            "churned": churned, "fresh_after": after,
            "churned_vs_fresh": round(churned["jobs_per_s"] / fresh_rate, 2) if fresh_rate else None,
            "verified": {"ok": ok, "failures": [f for r in runs.values() for f in r["verified"]["failures"]]}}
