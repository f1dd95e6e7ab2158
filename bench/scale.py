"""``python -m bench.scale``: what a claim, a settlement, an enqueue and the dashboard's overview
cost at 10 000 000 pending jobs against 10 000, and whether retention at that size grows the table
(PostgreSQL; docs/performance.md, "Scale").

* One database, one schema per depth (``scale_<depth>``), each filled with ``enqueue_many`` (the
  COPY path) and then vacuumed with the maintenance backstop's own statement
  (``tenure.engine.postgres.maintenance.JOBS_VACUUM``: ``VACUUM (ANALYZE, INDEX_CLEANUP ON,
  TRUNCATE false)``) — what it runs after such a burst (:mod:`tenure.table_care`) — so both
  tables are in the state a running system keeps them in.
* Rounds alternate between the depths (a loaded host drifts; alternation spreads the drift over
  both): each round times ``--ops`` times ``claim_many(limit=1)``, ``complete_many`` of that claim
  and one ``enqueue``, then one fresh ``store.insights.overview()``. Medians of the rounds, and
  their ratio deepest / shallowest. ``--exact-overview`` also times the overview counting every
  row at the deepest depth.
* ``EXPLAIN (ANALYZE, BUFFERS)`` of one claim at each depth (rolled back): the plan's root timing
  and shared buffers.
* ``--history N`` (the 100 000 000-row shape): the deepest table also holds N finished jobs
  (state done, each claimed once, settled over the five days before the pending jobs were made —
  inside the default 7-day deletion horizon, so retained as a running system keeps them). They,
  and with ``--generate`` the pending jobs of every depth too, are written server-side by
  ``INSERT ... SELECT generate_series`` in committed chunks (not COPY: the rows never cross the
  wire; ~120k rows/s on this machine against ~44k for ``enqueue_many``'s COPY): every column
  copied from a template row the API wrote (one job enqueued, one enqueued, claimed and
  completed), except the id (a UUIDv7 of the row's creation ms, as the API mints them), the
  payload (``{"i": n}``), the times and the lease token (32 hex digits, as the API's). The
  report states the generation time, the disk used (heap, indexes, the WAL written and the
  ``pg_wal`` peak) and the free space, which must stay above ``--min-free-gb`` or the run stops
  and drops its schemas. ``--nice`` renices (19) and ionices (idle) this process and its
  generating backend: the machine is shared.
* ``--retention N`` (deepest depth): N pending jobs made settled 8 days ago (setup; with
  ``--retention-own`` each with a ``delete_after`` of its own, 1 day: the custom horizon's walk,
  all N tied at one horizon), then
  ``store.maintenance.delete_settled(drain=True)`` (batches of 1000) and ``vacuum_jobs()`` (the
  backstop decides), then N jobs enqueued again: the heap's and the relation's size after each step.
* Verified in the store before the retention step: every claimed job done exactly once, every other
  job pending and never claimed.

The schemas are dropped at the end unless ``--keep`` (a 10 000 000-job schema is ~4.2 GB; with
``--history 90000000``, ~35 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
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


DAY_MS = 86_400_000
#: Rows per committed INSERT ... SELECT of the generator (progress, and the disk check between).
CHUNK = 2_000_000


class Generation:
    """How the rows of a fill are made and watched: server-side, reniced, with a disk floor."""

    def __init__(self, generate: bool = False, nice: bool = False, min_free_gb: float = 15.0,
                 chunk: int = CHUNK, log: Any = print) -> None:
        self.generate, self.nice, self.min_free_gb, self.chunk, self.log = generate, nice, min_free_gb, chunk, log
        self.wal_peak = 0

    def watch(self, conn: Any) -> None:
        """Note the ``pg_wal`` size; stop the run when the disk's free space is under the floor."""
        self.wal_peak = max(self.wal_peak, int(conn.execute("SELECT sum(size) FROM pg_ls_waldir()").fetchone()[0]))
        free = _free_bytes(conn)
        if free is not None and free < self.min_free_gb * 2**30:
            raise SystemExit(f"free disk {free / 2**30:.1f} GB is under --min-free-gb {self.min_free_gb}: stopping")

    def lower(self, conn: Any) -> None:
        """With ``nice``: this process and the connection's backend at the lowest CPU and I/O priority."""
        if not self.nice:
            return
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        for p in {pid, os.getpid()}:
            subprocess.run(["renice", "-n", "19", "-p", str(p)], check=False, capture_output=True)
            subprocess.run(["ionice", "-c3", "-p", str(p)], check=False, capture_output=True)


def _free_bytes(conn: Any) -> int | None:
    path = conn.execute("SELECT current_setting('data_directory')").fetchone()[0]
    return shutil.disk_usage(path).free if os.path.exists(path) else None


def _templates(st: tenure.Store) -> tuple[str, str]:
    """Two rows the API wrote: (a pending job's id, a done job's id) — claimed and completed once."""
    a, b = (str(i) for i in st.jobs.enqueue_many([{"kind": KIND, "payload": {"i": 0}} for _ in range(2)]))
    got = st.jobs.claim_many(KIND, owner=OWNER, limit=1, lease_ms=60_000)
    errs = st.jobs.complete_many([(got[0].lease, None)])
    if errs[0] is not None:
        raise errs[0]
    return (b, a) if got[0].job.id == a else (a, b)


def _generate_sql(conn: Any, template_id: str) -> str:
    """``INSERT ... SELECT`` of rows copied from the template except id, payload, times and lease
    token; parameters: first n, last n, first ms, ms span, rows."""
    cols = [r[0] for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = 'tenure_jobs' ORDER BY ordinal_position").fetchall()]
    payload, token = conn.execute("SELECT payload, lease_token FROM tenure_jobs WHERE id = %s",
                                  (template_id,)).fetchone()
    head, _, tail = payload.partition("0")  # the template's payload is {"i": 0} as the API spelled it

    def q(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    over = {
        # UUIDv7 as tenure.ids mints it: 48 bits of ms, version 7, then the row number where the
        # random bits go (variant 10): increasing with the creation time, like the API's.
        "id": "(substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(r, 1, 3) || '-8' || "
              "substr(r, 4, 3) || '-' || substr(r, 7, 12))",
        "payload": f"{q(head)} || g || {q(tail)}",
        "run_at": "ms", "created_at": "ms", "updated_at": "ms + (t.updated_at - t.created_at)",
        "lease_token": "md5(g::text)" if token is not None and len(token) == 32 else "t.lease_token",
    }
    select = ", ".join(over.get(c, f't."{c}"') for c in cols)
    names = ", ".join(f'"{c}"' for c in cols)
    return (f"INSERT INTO tenure_jobs ({names}) "
            f"SELECT {select} FROM (SELECT * FROM tenure_jobs WHERE id = {q(template_id)}) t, "
            "LATERAL (SELECT g, %(ms0)s::bigint + (g - %(first)s) * %(span)s::bigint / %(rows)s AS ms "
            "FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) g) s, "
            "LATERAL (SELECT lpad(to_hex(s.ms), 12, '0') AS h, lpad(to_hex(g), 18, '0') AS r) x")


def _generate(conn: Any, gen: Generation, template_id: str, first: int, rows: int, ms0: int, span: int,
              label: str) -> None:
    sql = _generate_sql(conn, template_id)
    for lo in range(first, first + rows, gen.chunk):
        hi = min(lo + gen.chunk, first + rows) - 1
        conn.execute(sql, {"ms0": ms0, "first": first, "span": span, "rows": rows, "lo": lo, "hi": hi})
        gen.watch(conn)
        if rows > gen.chunk:
            gen.log(f"  {label}: {hi - first + 1:,} / {rows:,}")


def _fill(base: str, schema: str, depth: int, history: int = 0, gen: Generation | None = None) -> dict[str, Any]:
    gen = gen or Generation()
    with _raw(base, "public") as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')
    out: dict[str, Any] = {"depth": depth, "history": history}
    with tenure.connect(f"{base}?schema={schema}") as st:
        st.jobs.counts()  # migrate before the clock starts
        if not (gen.generate or history):
            _, fill_s = fill(st, depth)
        else:
            pending_id, done_id = _templates(st)
            with _raw(base, schema) as conn:
                gen.lower(conn)
                lsn0 = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
                gen.wal_peak = 0
                gen.watch(conn)
                out["wal_dir_start_mb"] = round(gen.wal_peak / 2**20)
                now = int(time.time() * 1000)
                t0 = time.perf_counter()
                # The finished jobs were made (and settled ms later) over the 5 days before the
                # pending ones, which were made over the last day: ids and times increase together.
                _generate(conn, gen, done_id, 1, history - 1, now - 6 * DAY_MS, 5 * DAY_MS, "finished")
                _generate(conn, gen, pending_id, history + 1, depth - 1, now - DAY_MS, DAY_MS - 1000, "pending")
                if not history:
                    conn.execute("DELETE FROM tenure_jobs WHERE id = %s", (done_id,))
                fill_s = time.perf_counter() - t0
                out["wal_mb"] = round(int(conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)",
                                                       (lsn0,)).fetchone()[0]) / 2**20)
                out["wal_dir_peak_mb"] = round(gen.wal_peak / 2**20)
    rows = depth + history
    with _raw(base, schema) as conn:
        gen.lower(conn)
        t0 = time.perf_counter()
        conn.execute(_backstop_vacuum())
        vac_s = time.perf_counter() - t0
        total, heap, idx = conn.execute("SELECT pg_total_relation_size('tenure_jobs'), "
                                        "pg_relation_size('tenure_jobs'), pg_indexes_size('tenure_jobs')").fetchone()
        free = _free_bytes(conn)
    out.update({"fill_rows_per_s": round(rows / fill_s), "fill_s": round(fill_s, 1),
                "vacuum_s": round(vac_s, 1), "total_mb": round(total / 2**20), "heap_mb": round(heap / 2**20),
                "indexes_mb": round(idx / 2**20)})
    if free is not None:
        out["disk_free_gb"] = round(free / 2**30, 1)
    return out


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


def _backstop_vacuum() -> str:
    """The statement the maintenance backstop vacuums tenure_jobs with (imported here: psycopg is
    an optional dependency, and this module's imports stay free of it)."""
    from tenure.engine.postgres.maintenance import JOBS_VACUUM

    return JOBS_VACUUM


def _retention(base: str, schema: str, n: int, own: bool = False) -> dict[str, Any]:
    with _raw(base, schema) as conn, tenure.connect(f"{base}?schema={schema}") as st:
        def size() -> list[int]:
            return list(conn.execute("SELECT pg_relation_size('tenure_jobs'), "
                                     "pg_total_relation_size('tenure_jobs')").fetchone())

        old = int(time.time() * 1000) - 8 * 86_400_000
        # The first pending jobs in claim order (its index; by id, the walk would cross every
        # finished row of a --history table first).
        # --retention-own: each with a delete_after of its own (1 day), the custom horizon's walk.
        conn.execute("UPDATE tenure_jobs SET state = 'done', updated_at = %s, delete_after_ms = %s WHERE id IN "
                     "(SELECT id FROM tenure_jobs WHERE state IN ('pending', 'failed') AND waiting_on = 0 "
                     "ORDER BY priority DESC, run_at, created_at, id LIMIT %s)", (old, 86_400_000 if own else None, n))
        conn.execute(_backstop_vacuum())
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
    return {"settled": n, "own_horizon": own, "deleted": deleted, "delete_s": round(del_s, 1),
            "delete_rows_per_s": round(deleted / del_s) if del_s else None, "backstop_vacuumed": vacuumed,
            "vacuum_s": round(vac_s, 1), "bytes_before": before, "bytes_after_delete_vacuum": after_delete,
            "bytes_after_refill": refilled,
            "heap_growth_vs_after_delete": round(refilled[0] / after_delete[0] - 1, 5),
            "total_growth_vs_after_delete": round(refilled[1] / after_delete[1] - 1, 5)}


class _PrimaryKeyDistinct:
    """``verify_store``'s connection for a table of 100 000 000 rows: its ``count(DISTINCT id)``
    (a sort of every id) read as ``count(id)`` — the primary key already makes ids distinct."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, sql: str, *args: Any) -> Any:
        return self.raw.execute(sql.replace("count(DISTINCT id)", "count(id)"), *args)


def run(base: str, depths: list[int], rounds: int, ops: int, retention: int, exact_overview: bool,
        keep: bool, log: Any = print, history: int = 0, gen: Generation | None = None,
        retention_own: bool = False) -> dict[str, Any]:
    """Run the measurements described in the module docstring; answers the report."""
    target = PostgresTarget(base)  # refuses the test suites' databases; one run per database
    schemas = {d: f"scale_{d}" for d in depths}
    gen = gen or Generation(log=log)
    out: dict[str, Any] = {"depths": depths, "history": history, "rounds": rounds, "ops": ops,
                           "load_start": os.getloadavg()}
    try:
        out["fills"] = []
        for d in depths:
            extra = history if d == depths[-1] else 0
            log(f"filling {d:,}" + (f" + {extra:,} finished" if extra else "") + " ...")
            out["fills"].append(_fill(base, schemas[d], d, extra, gen))
            log(f"  {out['fills'][-1]}")
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
                extra = history if d == depths[-1] else 0
                with _raw(base, schemas[d]) as raw:  # each round enqueues what it claims
                    ver = verify_store(_PrimaryKeyDistinct(raw) if extra else raw, done=claimed + extra, pending=d)
                out["verified"][d] = ver.as_dict()
        finally:
            for st in stores.values():
                st.close()
        # Logged before the retention step, which can take long at 100 000 000 rows: the
        # measurements so far survive an interrupted run.
        log("so far: " + json.dumps({k: out[k] for k in ("medians", "ratios", "plans", "verified") if k in out},
                                    default=str))
        if retention:
            log(f"retention: {retention:,} settled jobs at depth {depths[-1]:,} ...")
            out["retention"] = _retention(base, schemas[depths[-1]], retention, retention_own)
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
    p.add_argument("--retention-own", action="store_true",
                   help="the retention step's jobs carry a delete_after of their own (the custom horizon's walk)")
    p.add_argument("--exact-overview", action="store_true", help="also time the overview counting every row")
    p.add_argument("--history", type=int, default=0,
                   help="finished jobs the deepest table also holds, generated server-side (90000000: 100M rows)")
    p.add_argument("--generate", action="store_true",
                   help="generate the pending jobs server-side too (INSERT ... SELECT generate_series)")
    p.add_argument("--nice", action="store_true", help="renice/ionice this process and its generating backend")
    p.add_argument("--min-free-gb", type=float, default=15.0, help="stop when the disk's free space falls under")
    p.add_argument("--keep", action="store_true", help="keep the schemas (inspect them with EXPLAIN)")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    if urlsplit(args.pg_url).path.lstrip("/") in FORBIDDEN_PG_DATABASES:
        raise SystemExit("refusing a test suite's database; give the bench its own (--pg-url)")
    depths = sorted(int(x.replace("_", "")) for x in args.depths.split(","))
    if len(depths) < 2 or depths[0] < 1 or args.rounds < 1 or args.ops < 1 or args.retention < 0 or args.history < 0:
        raise SystemExit("need two depths or more, and positive --rounds and --ops")
    if args.retention > depths[-1] - WARMUP - args.rounds * args.ops:
        raise SystemExit("--retention must leave room: at most the deepest depth less the jobs claimed")
    def log(msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)

    gen = Generation(args.generate, args.nice, args.min_free_gb, log=log)
    out = run(args.pg_url, depths, args.rounds, args.ops, args.retention, args.exact_overview, args.keep,
              log=log, history=args.history, gen=gen, retention_own=args.retention_own)
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
