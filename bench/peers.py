"""Peer comparison: how fast one worker process drains N queued no-op jobs, for tenure and for
other Python job queues, measured on this machine in the same run.

    python -m bench.peers [--jobs 20000] [--repeat 3] [--peers tenure,pgqueuer,huey,procrastinate]
                          [--measure drain,enqueue1,latency,bulk] [--json PATH]

Every system is measured the same way. Its store is made afresh and N no-op jobs are queued
(untimed; PostgreSQL tables are then ANALYZEd, as autovacuum would have by the time a real queue
is that deep). ONE worker process is started and gets ready (imports, connections). The clock
starts when this process tells it to go and stops when this process, polling the system's own
store from outside, first sees all N jobs recorded as done there: tenure's rows in state
``done``; pgqueuer's ``successful`` rows in ``pgqueuer_log``; huey's result rows in ``kv``;
procrastinate's ``succeeded`` rows. The poll sleeps half the time the observed rate says is
left (at least 2 ms, at most 250 ms), so it costs a few queries per run and the end is seen
within a few ms. Then the worker is stopped gracefully and each run is verified: N jobs done
in the store, nothing left queued or failed, and the worker's handler ran exactly N times on N
distinct jobs (for tenure: :func:`bench.targets.verify_store`, every row claimed exactly once).
The worker process's CPU time (all threads, from ``/proc``) over the timed span is reported too;
the database server's is not. Repetitions run round-robin over the systems; the median is
reported.

Beside each drain, every system's one-by-one enqueue and its enqueue-to-start latency across
processes are measured the same way for all (``--measure``; see ``bench/peers_calls.py``), and
tenure's ratios to pgqueuer are printed for those targets too. ``--measure bulk`` (without
``drain``) times each system's fill alone: the same fill as a drain's (tenure: ``enqueue_many``
in batches of 10 000; pgqueuer: ``Queries.enqueue`` in chunks of 10 000; N jobs, commits
included), verified as N jobs queued in the store, and no drain after it.

The systems (their settings are in the table and the JSON):

* tenure, SQLite and PostgreSQL: ``python -m bench.child drain`` (one worker at ``tenure worker``'s
  default concurrency for the engine: 64 on SQLite, 256 on PostgreSQL), over stores filled by
  :class:`bench.scenarios.Prepared`. On SQLite also with ``durable=true`` (synchronous=FULL), the
  durability huey runs with by default.
* pgqueuer (PostgreSQL): one ``QueueManager`` with a bulk dequeue batch over an asyncpg pool.
* huey (SQLite): ``SqliteHuey`` with its consumer's thread workers.
* procrastinate (PostgreSQL, psycopg 3): one worker with concurrent async jobs.

The peers are installed, at pinned versions, into their own virtualenv (``bench/.peers-venv``,
made on first use with ``python -m venv`` and pip from PyPI) and run from there, so the
project's environment never sees them; their small drivers are in ``bench/peer_drivers/``.
PostgreSQL: the ``tenure_peers`` database (created if missing; never ``test`` or
``tenure_bench``), one schema per system, dropped and made afresh for every run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tenure.cli.worker import default_concurrency

from . import machine
from .peer_measure import POLL_MAX_S, POLL_MIN_S, measure, measure_bulk
from .peer_report import render, summarize
from .peer_systems import ROOT, Huey, PgQueuer, Procrastinate, System, Tenure
from .peers_calls import measure_enqueue_one, measure_latency, summarize_calls
from .targets import PostgresTarget, SQLiteTarget, Target

BENCH = os.path.join(ROOT, "bench")
DEFAULT_VENV = os.path.join(BENCH, ".peers-venv")
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/tenure_peers"
#: Databases this bench never touches: the test suites' and the main suite's.
FORBIDDEN_DATABASES = frozenset({"test", "tenure_bench", "postgres", "template0", "template1"})

#: What goes into the peers' virtualenv (PyPI, pinned).
PINS = (
    "pgqueuer==1.6.0",
    "asyncpg==0.32.0",
    "uvloop==0.23.0",
    "huey==3.5.4",
    "procrastinate==3.10.0",
    "psycopg[binary]==3.3.9",
    "psycopg-pool==3.3.3",
)
ALL_PEERS = ("tenure", "pgqueuer", "huey", "procrastinate")
#: What is measured of each system: its drain (above), its one-by-one enqueue and its latency
#: (bench/peers_calls.py).
MEASURES = ("drain", "enqueue1", "latency", "bulk")
#: The measures run when --measure is not given (``bulk`` alone fills and verifies without a
#: drain; with ``drain`` every drain's fill already reports the bulk rate).
DEFAULT_MEASURES = ("drain", "enqueue1", "latency")
#: tenure's drains run at ``tenure worker``'s default concurrency for each engine (None) unless
#: --tenure-concurrency says otherwise (then a run at the defaults is added on PostgreSQL, for the
#: target).
TENURE_CONCURRENCY: int | None = None


# -- the peers' virtualenv ------------------------------------------------------------------------


def venv_python(venv: str) -> str:
    return os.path.join(venv, "bin", "python")


def ensure_venv(venv: str, log: Any = print) -> None:
    """Make ``venv`` (if missing) and install :data:`PINS` into it (unless it already has them:
    the installed pin list is kept in ``venv/.pins``)."""
    marker = os.path.join(venv, ".pins")
    wanted = "\n".join(PINS) + "\n"
    if os.path.exists(marker) and open(marker).read() == wanted and os.path.exists(venv_python(venv)):
        return
    if not os.path.exists(venv_python(venv)):
        log(f"creating the peers' virtualenv {venv}")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    log(f"installing {' '.join(PINS)}")
    subprocess.run([venv_python(venv), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PINS],
                   check=True)
    with open(marker, "w") as f:
        f.write(wanted)


# -- main -----------------------------------------------------------------------------------------


@dataclass
class Options:
    jobs: int = 20_000
    repeat: int = 1
    peers: list[str] = field(default_factory=lambda: list(ALL_PEERS))
    engines: list[str] = field(default_factory=lambda: ["sqlite", "postgres"])
    pg_url: str = DEFAULT_PG_URL
    venv: str = DEFAULT_VENV
    tenure_concurrency: int | None = TENURE_CONCURRENCY
    pgqueuer_batch_size: int = 100
    pgqueuer_pool: int = 10
    huey_workers: int = 8
    procrastinate_concurrency: int = 64
    procrastinate_pool: int = 10
    measure: list[str] = field(default_factory=lambda: list(DEFAULT_MEASURES))
    enqueue_jobs: int = 2_000
    latency_jobs: int = 200
    latency_gap_ms: float = 20.0


def parser() -> argparse.ArgumentParser:
    d = Options()
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=d.jobs, help=f"jobs queued and drained per run ({d.jobs})")
    p.add_argument("--repeat", type=int, default=d.repeat, help="runs of each system; the median is reported")
    p.add_argument("--engines", default="sqlite,postgres",
                   help="only the systems on these engines (default sqlite,postgres)")
    p.add_argument("--peers", default=",".join(ALL_PEERS),
                   help=f"comma-separated subset of {','.join(ALL_PEERS)} (default all)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON here")
    p.add_argument("--pg-url", default=os.environ.get("TENURE_PEERS_PG_URL", d.pg_url),
                   help=f"PostgreSQL database for every PostgreSQL system (default {d.pg_url})")
    p.add_argument("--venv", default=d.venv, help="the peers' virtualenv (made and filled if missing)")
    p.add_argument("--tenure-concurrency", type=int, default=d.tenure_concurrency,
                   help="tenure's worker slots (default: tenure worker's default for each engine)")
    p.add_argument("--pgqueuer-batch-size", type=int, default=d.pgqueuer_batch_size)
    p.add_argument("--pgqueuer-pool", type=int, default=d.pgqueuer_pool, help="asyncpg pool size")
    p.add_argument("--huey-workers", type=int, default=d.huey_workers, help="consumer thread workers")
    p.add_argument("--procrastinate-concurrency", type=int, default=d.procrastinate_concurrency)
    p.add_argument("--procrastinate-pool", type=int, default=d.procrastinate_pool, help="psycopg pool size")
    p.add_argument("--measure", default=",".join(DEFAULT_MEASURES),
                   help=f"comma-separated subset of {','.join(MEASURES)} (default {','.join(DEFAULT_MEASURES)}; "
                        "bulk: each system's fill alone, no drain)")
    p.add_argument("--enqueue-jobs", type=int, default=d.enqueue_jobs,
                   help=f"jobs enqueued one call each per run ({d.enqueue_jobs})")
    p.add_argument("--latency-jobs", type=int, default=d.latency_jobs,
                   help=f"latency samples per run ({d.latency_jobs})")
    p.add_argument("--latency-gap-ms", type=float, default=d.latency_gap_ms,
                   help=f"ms between the latency run's enqueues, every system alike ({d.latency_gap_ms})")
    return p


def options_from(args: argparse.Namespace) -> Options:
    peers = [x.strip() for x in args.peers.split(",") if x.strip()]
    bad = [x for x in peers if x not in ALL_PEERS]
    if bad or not peers:
        raise SystemExit(f"unknown peers {bad or args.peers!r}; choose from {', '.join(ALL_PEERS)}")
    engines = [x.strip() for x in args.engines.split(",") if x.strip()]
    if not engines or any(e not in ("sqlite", "postgres") for e in engines):
        raise SystemExit(f"--engines takes sqlite, postgres or both, got {args.engines!r}")
    if args.jobs < 1 or args.repeat < 1:
        raise SystemExit("--jobs and --repeat must be at least 1")
    measure = [x.strip() for x in args.measure.split(",") if x.strip()]
    if not measure or any(m not in MEASURES for m in measure):
        raise SystemExit(f"--measure takes a subset of {','.join(MEASURES)}, got {args.measure!r}")
    if args.enqueue_jobs < 2 or args.latency_jobs < 1 or args.latency_gap_ms < 0:
        raise SystemExit("--enqueue-jobs must be at least 2, --latency-jobs at least 1, --latency-gap-ms >= 0")
    dbname = urlsplit(args.pg_url).path.lstrip("/")
    if not dbname or dbname in FORBIDDEN_DATABASES:
        raise SystemExit(f"refusing to use database {dbname!r}: use one of this bench's own, e.g. {DEFAULT_PG_URL}")
    return Options(jobs=args.jobs, repeat=args.repeat, peers=peers, engines=engines, pg_url=args.pg_url,
                   venv=os.path.abspath(args.venv), tenure_concurrency=args.tenure_concurrency,
                   pgqueuer_batch_size=args.pgqueuer_batch_size, pgqueuer_pool=args.pgqueuer_pool,
                   huey_workers=args.huey_workers, procrastinate_concurrency=args.procrastinate_concurrency,
                   procrastinate_pool=args.procrastinate_pool, measure=measure, enqueue_jobs=args.enqueue_jobs,
                   latency_jobs=args.latency_jobs, latency_gap_ms=args.latency_gap_ms)


def build_systems(opt: Options, workdir: str) -> tuple[list[System], list[Target]]:
    """The systems to measure, in table order, and the tenure targets behind them (whose
    ``versions()`` describe the engines: SQLite's settings, the PostgreSQL server's)."""
    needs_pg = "postgres" in opt.engines and any(p in opt.peers for p in ("tenure", "pgqueuer", "procrastinate"))
    pg_target = PostgresTarget(opt.pg_url) if needs_pg else None  # creates the database if missing
    python = venv_python(opt.venv)
    systems: list[System] = []
    targets: list[Target] = [pg_target] if pg_target is not None else []
    if "tenure" in opt.peers:
        sq = SQLiteTarget(os.path.join(workdir, "tenure"))
        targets.insert(0, sq)
        sq_conc = opt.tenure_concurrency or default_concurrency("sqlite")
        systems.append(Tenure(sq, sq_conc))
        systems.append(Tenure(sq, sq_conc, durable=True))
        if pg_target is not None:
            pg_default = default_concurrency("postgres")
            systems.append(Tenure(pg_target, opt.tenure_concurrency or pg_default))
            if opt.tenure_concurrency not in (None, pg_default):  # else that run is the defaults' run
                systems.append(Tenure(pg_target, pg_default, defaults=True))
    if "huey" in opt.peers:
        systems.append(Huey(workdir, python, opt.huey_workers))
    if "pgqueuer" in opt.peers:
        systems.append(PgQueuer(opt.pg_url, python, opt.pgqueuer_batch_size, opt.pgqueuer_pool))
    if "procrastinate" in opt.peers:
        systems.append(Procrastinate(opt.pg_url, python, opt.procrastinate_concurrency, opt.procrastinate_pool))
    systems = [s for s in systems if s.engine in opt.engines]
    return systems, targets


def versions(systems: list[System], targets: list[Target]) -> dict[str, Any]:
    out: dict[str, Any] = {"python": sys.version.split()[0]}
    for s in systems:
        out.update(getattr(s, "versions", {}) or {})
    for t in targets:
        try:
            out[f"tenure_{t.engine}"] = t.versions()
        except Exception as exc:  # noqa: BLE001 - the numbers are still worth keeping
            out[f"tenure_{t.engine}"] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    opt = options_from(args)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if any(p != "tenure" for p in opt.peers):
        ensure_venv(opt.venv, log)
    out: dict[str, Any] = {
        "machine": machine.describe(),
        "command": "python -m bench.peers " + " ".join(sys.argv[1:] if argv is None else argv),
        "config": {"jobs": opt.jobs, "repeat": opt.repeat, "peers": opt.peers, "pins": list(PINS),
                   "measure": opt.measure, "enqueue_jobs": opt.enqueue_jobs, "latency_jobs": opt.latency_jobs,
                   "latency_gap_ms": opt.latency_gap_ms,
                   "pg_url": opt.pg_url, "poll_s": [POLL_MIN_S, POLL_MAX_S]},
        "results": [], "errors": {}}
    t_start = time.perf_counter()
    workdir = tempfile.mkdtemp(prefix="tenure-peers-")
    systems, targets = build_systems(opt, workdir)
    runs: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(systems))}
    calls_e: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(systems))}
    calls_l: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(systems))}
    fills: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(systems))}
    try:
        for rep in range(opt.repeat):  # round-robin: slow drift on the host hits every system alike
            # ... and each round starts one system later, so none always runs right after another's
            # disk writes (a SQLite fill's writeback delays the next PostgreSQL fsyncs).
            shift = rep % len(systems)
            for i, system in [*enumerate(systems)][shift:] + [*enumerate(systems)][:shift]:
                if system.label + "/" + system.engine in out["errors"]:
                    continue
                log(f"[{rep + 1}/{opt.repeat}] {system.label} on {system.engine} ...")
                try:
                    if "drain" in opt.measure:
                        r = measure(system, opt.jobs)
                        runs[i].append(r)
                        log(f"    {r['jobs_per_s']:,.0f} jobs/s ({r['seconds']} s), "
                            f"{'verified' if r['verified']['ok'] else 'VERIFICATION FAILED: ' + str(r['verified']['failures'])}")
                    if "bulk" in opt.measure and "drain" not in opt.measure:
                        b = measure_bulk(system, opt.jobs)
                        fills[i].append(b)
                        secs = b["fill"].get("enqueue_seconds")
                        rate = f"{opt.jobs / secs:,.0f} rows/s" if secs else "not timed (a copied store)"
                        log(f"    bulk: {rate}, {'verified' if b['verified']['ok'] else b['verified']['failures']}")
                    if system.calls and "enqueue1" in opt.measure:
                        e = measure_enqueue_one(system, opt.enqueue_jobs, ROOT)
                        calls_e[i].append(e)
                        log(f"    one by one: {e['jobs_per_s']:,.0f} enqueues/s, {e['cpu_us_per_enqueue']:,.0f} us CPU "
                            f"each, {'verified' if e['verified']['ok'] else e['verified']['failures']}")
                    if system.calls and "latency" in opt.measure:
                        la = measure_latency(system, opt.latency_jobs, opt.latency_gap_ms, ROOT)
                        calls_l[i].append(la)
                        log(f"    latency: p50 {la['p50_ms']} / p99 {la['p99_ms']} ms, "
                            f"{'verified' if la['verified']['ok'] else la['verified']['failures']}")
                except Exception as exc:  # noqa: BLE001 - reported, and the other systems go on
                    out["errors"][system.label + "/" + system.engine] = f"{type(exc).__name__}: {exc}"
                    log(f"    failed: {type(exc).__name__}: {exc!s:.2000}")
                    continue
        out["results"] = [summarize(s, runs[i], summarize_calls(calls_e[i], calls_l[i]), fills[i])
                          for i, s in enumerate(systems) if runs[i] or calls_e[i] or calls_l[i] or fills[i]]
        out["versions"] = versions(systems, targets)
    finally:
        for s in systems:
            s.close()
        for t in targets:
            t.close()
        shutil.rmtree(workdir, ignore_errors=True)
    out["machine"]["loadavg_at_end"] = machine.loadavg()
    out["wall_seconds"] = round(time.perf_counter() - t_start, 1)
    ok = not out["errors"] and all(r["verified"]["ok"] for r in out["results"])
    out["verified"] = ok

    print(render(out))
    m = out["machine"]
    v = out["versions"]
    peers_v = ", ".join(f"{k} {v[k]}" for k in ("pgqueuer", "asyncpg", "uvloop", "huey", "procrastinate", "psycopg")
                        if k in v)
    pg = v.get("tenure_postgres", {})
    print(f"\n{opt.jobs} no-op jobs per run, median of {opt.repeat}; one worker process each; clock: go -> all "
          f"{opt.jobs} done in the store (polled). Python {v['python']}"
          + (f"; PostgreSQL {pg.get('postgresql')} (synchronous_commit={pg.get('synchronous_commit')})" if pg else "")
          + (f"; {peers_v}" if peers_v else ""))
    print(f"machine: {m['cores']} cores ({m['cpu']}), load {m['loadavg_at_start']} -> {m['loadavg_at_end']}; "
          f"wall {out['wall_seconds']} s; verification: {'passed' if ok else 'FAILED'}")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)
        print(f"wrote {args.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
