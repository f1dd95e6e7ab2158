"""Soak: enqueue and work for N minutes on PostgreSQL, with the maintenance service deleting settled
jobs, and show that throughput does not decay and the jobs table stays bounded.

    python -m bench.soak --minutes 10 --url postgresql://postgres@127.0.0.1:5432/tenure_soak

A benchmark, not a test. The load is closed-loop at saturation: a producer thread keeps about
``--backlog`` jobs pending (enqueue_many in batches of 500), ``--workers`` worker processes
(``--concurrency`` slots each, no-op handler) drain them as fast as they can, and their shared
maintenance service (on by default, as in production) deletes settled jobs ``--delete-after``
seconds after they settle. Once a minute (``--every``) it prints completions per second over that
interval, the backlog, the live and dead tuples of tenure_jobs and
``pg_total_relation_size('tenure_jobs')`` (table + indexes + TOAST). The summary compares the
first and last intervals: no decay means the last is within a few percent of the first, and a
bounded table means its size stops growing once deletions match completions (about
``throughput x (delete-after + delete cadence)`` rows).

The database is emptied first (``--keep`` to skip that): use a database of its own.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import threading
import time
from typing import Any

DEFAULT_URL = os.environ.get("TENURE_SOAK_URL", "postgresql://postgres@127.0.0.1:5432/tenure_soak")
KIND = "soak.noop"


def _noop(payload: Any, ctx: Any) -> None:
    return None


def worker_process(url: str, concurrency: int, delete_after_s: float, delete_every_s: float, stop,
                   ready, out) -> None:
    """One worker process: a worker over KIND with the maintenance service configured for the soak."""
    import tenure

    store = tenure.connect(url, pool_max=max(4, concurrency // 4 + 3))
    store.maintenance.configure(delete_after=delete_after_s, delete_interval=delete_every_s,
                                expire_interval=delete_every_s, reap_interval=delete_every_s,
                                vacuum_interval=delete_every_s * 2)
    worker = store.jobs.create_worker({KIND: _noop}, concurrency=concurrency, poll_interval=0.2,
                                      lease=30)
    worker.start()
    ready.set()
    stop.wait()
    worker.stop(grace=5)
    stats = worker.stats()
    m = store.maintenance.stats()
    store.close()
    out.put({"pid": os.getpid(), "completions": stats["completions"], "deleted": m["deleted"],
             "vacuums": m["vacuums"], "leader_terms": m["leader_terms"], "maintenance_errors": m["errors"]})


def _sample(conn) -> dict[str, Any]:
    row = conn.execute(
        "SELECT pg_total_relation_size('tenure_jobs'), pg_relation_size('tenure_jobs'), "
        "coalesce(n_live_tup, 0), coalesce(n_dead_tup, 0), coalesce(autovacuum_count, 0), "
        "coalesce(vacuum_count, 0) "
        "FROM pg_stat_user_tables WHERE relid = 'tenure_jobs'::regclass").fetchone()
    states = dict(conn.execute("SELECT state, count(*) FROM tenure_jobs GROUP BY state").fetchall())
    return {"total_bytes": row[0], "heap_bytes": row[1], "live_tup": row[2], "dead_tup": row[3],
            "autovacuums": row[4], "vacuums": row[5], "states": states}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=DEFAULT_URL)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--every", type=float, default=60.0, help="seconds per report line")
    ap.add_argument("--workers", type=int, default=4, help="worker processes")
    ap.add_argument("--concurrency", type=int, default=16, help="slots per worker process")
    ap.add_argument("--backlog", type=int, default=5_000, help="pending jobs the producer keeps")
    ap.add_argument("--delete-after", type=float, default=30.0, help="seconds a settled job is kept")
    ap.add_argument("--delete-every", type=float, default=5.0, help="deletion sweep cadence (s)")
    ap.add_argument("--keep", action="store_true", help="do not empty the database first")
    ap.add_argument("--json", default=None, help="write the samples here as JSON")
    args = ap.parse_args(argv)

    import psycopg

    import tenure

    store = tenure.connect(args.url)
    store.jobs  # noqa: B018 - migrate
    with psycopg.connect(args.url, autocommit=True) as c:
        autovacuum = c.execute("SHOW autovacuum").fetchone()[0]
    if not args.keep:
        store._reset_for_tests()
        with psycopg.connect(args.url, autocommit=True) as c:
            c.execute("VACUUM FULL tenure_jobs")
    ctx = multiprocessing.get_context("spawn")
    stop, out = ctx.Event(), ctx.Queue()
    readies = [ctx.Event() for _ in range(args.workers)]
    procs = [ctx.Process(target=worker_process, args=(args.url, args.concurrency, args.delete_after,
                                                      args.delete_every, stop, r, out))
             for r in readies]
    for p in procs:
        p.start()
    for r in readies:
        r.wait(60)

    enqueued = [0]
    halt = threading.Event()
    jobs = store.jobs

    def produce() -> None:
        batch = [{"kind": KIND, "payload": {"n": i}} for i in range(500)]
        with psycopg.connect(args.url, autocommit=True) as c:
            while not halt.is_set():
                pending = c.execute("SELECT count(*) FROM tenure_jobs WHERE state = 'pending'").fetchone()[0]
                if pending >= args.backlog:
                    halt.wait(0.02)
                    continue
                for _ in range(max(1, (args.backlog - pending) // 500)):
                    jobs.enqueue_many(batch)
                    enqueued[0] += len(batch)

    producer = threading.Thread(target=produce, name="soak-producer", daemon=True)
    producer.start()
    print(f"soak: {args.minutes:g} min on {tenure.engine.redact_url(args.url)}, {args.workers} worker "
          f"processes x {args.concurrency} slots, backlog {args.backlog}, settled jobs deleted after "
          f"{args.delete_after:g} s (sweep every {args.delete_every:g} s); server autovacuum={autovacuum}",
          flush=True)
    print(f"{'min':>5} {'jobs/s':>8} {'backlog':>8} {'rows':>8} {'live':>8} {'dead':>8} {'table MB':>9} "
          f"{'heap MB':>8} {'autovac':>7} {'vacuum':>6}", flush=True)
    samples = []
    with psycopg.connect(args.url, autocommit=True) as mon:
        start = time.monotonic()
        last_t, last_done = start, 0
        end = start + args.minutes * 60
        while time.monotonic() < end:
            time.sleep(max(0.0, min(args.every, end - time.monotonic())))
            now = time.monotonic()
            snap = _sample(mon)
            waiting = sum(snap["states"].get(s, 0) for s in ("pending", "leased", "failed"))
            done = enqueued[0] - waiting
            rate = (done - last_done) / (now - last_t)
            rows = sum(snap["states"].values())
            sample = {"t_min": round((now - start) / 60, 2), "jobs_per_s": round(rate), "backlog": waiting,
                      "rows": rows, **{k: v for k, v in snap.items() if k != "states"}}
            samples.append(sample)
            print(f"{sample['t_min']:>5.1f} {rate:>8.0f} {waiting:>8} {rows:>8} {snap['live_tup']:>8} "
                  f"{snap['dead_tup']:>8} {snap['total_bytes'] / 2**20:>9.1f} {snap['heap_bytes'] / 2**20:>8.1f} "
                  f"{snap['autovacuums']:>7} {snap['vacuums']:>6}", flush=True)
            last_t, last_done = now, done
    halt.set()
    producer.join(10)
    stop.set()
    reports = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    store.close()
    first, last = samples[0], samples[-1]
    summary = {
        "throughput_first_per_s": first["jobs_per_s"], "throughput_last_per_s": last["jobs_per_s"],
        "throughput_last_vs_first": round(last["jobs_per_s"] / max(first["jobs_per_s"], 1), 3),
        "table_mb_max": round(max(s["total_bytes"] for s in samples) / 2**20, 1),
        "table_mb_last": round(last["total_bytes"] / 2**20, 1),
        "rows_max": max(s["rows"] for s in samples),
        "completions": sum(r["completions"] for r in reports),
        "deleted_by_maintenance": sum(r["deleted"] for r in reports),
        "vacuums_by_maintenance": sum(r["vacuums"] for r in reports),
        "leader_terms": sum(r["leader_terms"] for r in reports),
        "maintenance_errors": sum(r["maintenance_errors"] for r in reports),
    }
    print("summary: " + json.dumps(summary), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "samples": samples, "summary": summary, "workers": reports}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
