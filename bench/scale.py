"""``python -m bench.scale``: what a claim, a settlement, an enqueue and the dashboard's overview
cost at 10 000 000 pending jobs against 10 000, and whether retention at that size grows the table
(PostgreSQL; docs/performance.md, "Scale").

* One database, one schema per depth (``scale_<depth>``), each filled with ``enqueue_many`` (the
  COPY path) and then ``VACUUM (ANALYZE)``d — what the maintenance backstop does after such a
  burst (:mod:`tenure.table_care`) — so both tables are in the state a running system keeps them in.
* Rounds alternate between the depths (a loaded host drifts; alternation spreads the drift over
  both): each round times ``--ops`` times ``claim_many(limit=1)``, ``complete_many`` of that claim
  and one ``enqueue``, then one fresh ``store.insights.overview()``. Medians of the rounds, and
  their ratio deepest / shallowest. ``--exact-overview`` also times the overview counting every
  row at the deepest depth.
* ``EXPLAIN (ANALYZE, BUFFERS)`` of one claim at each depth (rolled back): the plan's root timing
  and shared buffers.
* ``--retention N`` (deepest depth): N pending jobs made settled 8 days ago (setup), then
  ``store.maintenance.delete_settled(drain=True)`` (batches of 1000) and ``vacuum_jobs()`` (the
  backstop decides), then N jobs enqueued again: the heap's and the relation's size after each step.
* Verified in the store before the retention step: every claimed job done exactly once, every other
  job pending and never claimed.

The schemas are dropped at the end unless ``--keep`` (a 10 000 000-job schema is ~4.2 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any
from urllib.parse import urlsplit

import tenure
from tenure.insights import Insights

from .scenarios import KIND, OWNER, fill
from .targets import DEFAULT_PG_URL, FORBIDDEN_PG_DATABASES, PostgresTarget, verify_store

WARMUP = 20
METRICS = ("claim_us", "settle_us", "enqueue_us", "cpu_us", "overview_ms")


def _raw(base: str, schema: str) -> Any:
    import psycopg

    return psycopg.connect(base, autocommit=True, options=f"-c search_path={schema}")


def _fill(base: str, schema: str, depth: int) -> dict[str, Any]:
    with _raw(base, "public") as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')
    with tenure.connect(f"{base}?schema={schema}") as st:
        st.jobs.counts()  # migrate before the clock starts
        _, fill_s = fill(st, depth)
    with _raw(base, schema) as conn:
        t0 = time.perf_counter()
        conn.execute("VACUUM (ANALYZE) tenure_jobs")
        vac_s = time.perf_counter() - t0
        total, heap = conn.execute("SELECT pg_total_relation_size('tenure_jobs'), "
                                   "pg_relation_size('tenure_jobs')").fetchone()
    return {"depth": depth, "fill_rows_per_s": round(depth / fill_s), "fill_s": round(fill_s, 1),
            "vacuum_s": round(vac_s, 1), "total_mb": round(total / 2**20), "heap_mb": round(heap / 2**20)}


def _round(st: tenure.Store, ops: int) -> dict[str, float]:
    jobs = st.jobs
    claim = settle = enq = 0
    c0 = time.process_time()
    for _ in range(ops):
        a = time.perf_counter_ns()
        got = jobs.claim_many(KIND, owner=OWNER, limit=1, lease_ms=60_000)
        b = time.perf_counter_ns()
        errs = jobs.complete_many([(got[0].lease, None)])
        c = time.perf_counter_ns()
        jobs.enqueue(KIND, {"i": -1})
        d = time.perf_counter_ns()
        if errs[0] is not None:
            raise errs[0]
        claim, settle, enq = claim + b - a, settle + c - b, enq + d - c
    cpu = time.process_time() - c0
    t0 = time.perf_counter()
    Insights(st).overview(fresh=True)
    return {"claim_us": claim / ops / 1000, "settle_us": settle / ops / 1000, "enqueue_us": enq / ops / 1000,
            "cpu_us": cpu / ops * 1e6, "overview_ms": (time.perf_counter() - t0) * 1000}


def _plan(target: PostgresTarget, base: str, schema: str) -> dict[str, Any]:
    import psycopg

    st = target.floor_statements([KIND])
    with _raw(base, schema) as conn:
        cur = psycopg.ClientCursor(conn)
        with conn.transaction(force_rollback=True):
            cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + st.claim_sql(1), st.claim_params("plan", 30_000, None, 1))
            lines = [r[0] for r in cur.fetchall()]
    return {"buffers": next((ln.strip() for ln in lines if ln.strip().startswith("Buffers:")), ""),
            "execution": next((ln for ln in lines if ln.startswith("Execution Time")), "")}


def _retention(base: str, schema: str, n: int) -> dict[str, Any]:
    with _raw(base, schema) as conn, tenure.connect(f"{base}?schema={schema}") as st:
        def size() -> list[int]:
            return list(conn.execute("SELECT pg_relation_size('tenure_jobs'), "
                                     "pg_total_relation_size('tenure_jobs')").fetchone())

        old = int(time.time() * 1000) - 8 * 86_400_000
        conn.execute("UPDATE tenure_jobs SET state = 'done', updated_at = %s WHERE id IN (SELECT id FROM "
                     "tenure_jobs WHERE state = 'pending' ORDER BY id LIMIT %s)", (old, n))
        conn.execute("VACUUM (ANALYZE) tenure_jobs")
        before = size()
        m = st.maintenance
        t0 = time.perf_counter()
        deleted = m.delete_settled(drain=True)
        del_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        vacuumed = m.vacuum_jobs()
        vac_s = time.perf_counter() - t0
        after_delete = size()
        fill(st, deleted)
        refilled = size()
    return {"settled": n, "deleted": deleted, "delete_s": round(del_s, 1),
            "delete_rows_per_s": round(deleted / del_s) if del_s else None, "backstop_vacuumed": vacuumed,
            "vacuum_s": round(vac_s, 1), "bytes_before": before, "bytes_after_delete_vacuum": after_delete,
            "bytes_after_refill": refilled,
            "heap_growth_vs_after_delete": round(refilled[0] / after_delete[0] - 1, 5),
            "total_growth_vs_after_delete": round(refilled[1] / after_delete[1] - 1, 5)}


def run(base: str, depths: list[int], rounds: int, ops: int, retention: int, exact_overview: bool,
        keep: bool, log: Any = print) -> dict[str, Any]:
    """Run the measurements described in the module docstring; answers the report."""
    target = PostgresTarget(base)  # refuses the test suites' databases; one run per database
    schemas = {d: f"scale_{d}" for d in depths}
    out: dict[str, Any] = {"depths": depths, "rounds": rounds, "ops": ops, "load_start": os.getloadavg()}
    try:
        out["fills"] = []
        for d in depths:
            log(f"filling {d:,} ...")
            out["fills"].append(_fill(base, schemas[d], d))
        stores = {d: tenure.connect(f"{base}?schema={schemas[d]}") for d in depths}
        try:
            for st in stores.values():
                _round(st, WARMUP)
            samples: dict[int, list[dict[str, float]]] = {d: [] for d in depths}
            for r in range(rounds):
                for d in depths:
                    samples[d].append(_round(stores[d], ops))
                    log(f"round {r} depth {d:,}: " + ", ".join(f"{k} {v:,.1f}" for k, v in samples[d][-1].items()))
            out["medians"] = {d: {k: round(statistics.median(s[k] for s in samples[d]), 1) for k in METRICS}
                              for d in depths}
            lo, hi = out["medians"][depths[0]], out["medians"][depths[-1]]
            out["ratios"] = {k: round(hi[k] / lo[k], 2) for k in METRICS}
            if exact_overview:
                t0 = time.perf_counter()
                Insights(stores[depths[-1]], exact_below=sys.maxsize).overview(fresh=True)
                out["exact_overview_ms_deepest"] = round((time.perf_counter() - t0) * 1000)
            out["plans"] = {d: _plan(target, base, schemas[d]) for d in depths}
            claimed = WARMUP + rounds * ops
            out["verified"] = {}
            for d in depths:
                with _raw(base, schemas[d]) as raw:
                    ver = verify_store(raw, done=claimed, pending=d)  # each round enqueues what it claims
                out["verified"][d] = ver.as_dict()
        finally:
            for st in stores.values():
                st.close()
        if retention:
            log(f"retention: {retention:,} settled jobs at depth {depths[-1]:,} ...")
            out["retention"] = _retention(base, schemas[depths[-1]], retention)
    finally:
        if not keep:
            with _raw(base, "public") as conn:
                for s in schemas.values():
                    conn.execute(f'DROP SCHEMA IF EXISTS "{s}" CASCADE')
        target.close()
    out["load_end"] = os.getloadavg()
    out["ok"] = all(v["ok"] for v in out.get("verified", {}).values()) and bool(out.get("verified"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pg-url", default=os.environ.get("TENURE_BENCH_PG_URL") or DEFAULT_PG_URL)
    p.add_argument("--depths", default="10000,10000000", help="pending jobs per table (default 10000,10000000)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--ops", type=int, default=300, help="claim/settle/enqueue triples per round (default 300)")
    p.add_argument("--retention", type=int, default=300_000, help="settled jobs the retention step deletes (0: skip)")
    p.add_argument("--exact-overview", action="store_true", help="also time the overview counting every row")
    p.add_argument("--keep", action="store_true", help="keep the schemas (inspect them with EXPLAIN)")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    if urlsplit(args.pg_url).path.lstrip("/") in FORBIDDEN_PG_DATABASES:
        raise SystemExit("refusing a test suite's database; give the bench its own (--pg-url)")
    depths = sorted(int(x.replace("_", "")) for x in args.depths.split(","))
    if len(depths) < 2 or depths[0] < 1 or args.rounds < 1 or args.ops < 1 or args.retention < 0:
        raise SystemExit("need two depths or more, and positive --rounds and --ops")
    if args.retention > depths[-1] - WARMUP - args.rounds * args.ops:
        raise SystemExit("--retention must leave room: at most the deepest depth less the jobs claimed")
    out = run(args.pg_url, depths, args.rounds, args.ops, args.retention, args.exact_overview, args.keep,
              log=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(json.dumps({k: out[k] for k in ("fills", "medians", "ratios", "plans") if k in out}, indent=1))
    for k in ("exact_overview_ms_deepest", "retention", "load_start", "load_end"):
        if k in out:
            print(f"{k}: {out[k]}")
    print(f"exactly-once verification: {'passed' if out['ok'] else 'FAILED'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
