"""``python -m bench``: run the suite on one or both engines; print a table, write JSON and a plot.

Exit status: 0 when every run verified (every job done exactly once, counted in the store), 1
otherwise. Targets not met are reported, not failed: the numbers are evidence, not a gate.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any

from . import machine, report
from .scenarios import ALL_SCENARIOS, QUICK, Config, run_all
from .targets import make_target


def _ints(text: str) -> list[int]:
    try:
        out = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not out or any(x < 1 for x in out):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return out


def _names(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    out = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in out if x not in allowed]
    if bad or not out:
        raise argparse.ArgumentTypeError(f"unknown {what} {bad or text!r}; choose from {', '.join(allowed)}")
    return out


def _default(name: str) -> str:
    """The help text's default of Config field ``name``, read from the code (and --quick's, where
    it differs), so the help cannot go stale when a default changes."""
    def text(cfg: Config) -> str:
        value = getattr(cfg, name)
        return ",".join(map(str, value)) if isinstance(value, list) else str(value)
    full, quick = text(Config()), text(QUICK)
    return f"default {full}" + ("" if quick == full else f"; --quick {quick}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", default="sqlite",
                   type=lambda t: _names(t, ("sqlite", "postgres"), "engine"),
                   help="sqlite, postgres, or both: sqlite,postgres (default sqlite)")
    p.add_argument("--jobs", type=int, help=f"jobs per throughput run ({_default('jobs')})")
    p.add_argument("--concurrency", type=_ints, help=f"worker concurrencies to drain at ({_default('concurrency')})")
    p.add_argument("--scenarios", type=lambda t: _names(t, ALL_SCENARIOS, "scenario"),
                   help=f"comma-separated subset of: {', '.join(ALL_SCENARIOS)} (default all)")
    p.add_argument("--repeat", type=int, help=f"repetitions of each throughput run; the median is reported ({_default('repeat')})")
    p.add_argument("--depths", type=_ints, help=f"queue depths for the claim-cost scenario ({_default('depths')})")
    p.add_argument("--depth-claims", type=int, help=f"claims timed at each depth ({_default('depth_claims')})")
    p.add_argument("--latency-samples", type=int, help=f"enqueue->start samples per variant ({_default('latency_samples')})")
    p.add_argument("--processes", type=int, help=f"worker processes of the PostgreSQL multi-process drain ({_default('processes')})")
    p.add_argument("--process-concurrency", type=int, help=f"concurrency of each of those processes ({_default('process_concurrency')})")
    p.add_argument("--churn-jobs", type=int,
                   help=f"churn: jobs the table serves before the measured drain ({_default('churn_jobs')}; "
                        "the target asks for 1000000)")
    p.add_argument("--no-analyze", action="store_true",
                   help="PostgreSQL: do not ANALYZE a filled queue before the throughput runs")
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run in well under a minute")
    p.add_argument("--json", metavar="PATH", help="write the full report as JSON here")
    p.add_argument("--plot", metavar="PNG", help="write throughput vs concurrency here (needs matplotlib)")
    p.add_argument("--pg-url", help="PostgreSQL URL (default $TENURE_BENCH_PG_URL or "
                                    "postgresql://postgres@127.0.0.1:5432/tenure_bench; never the 'test' db)")
    p.add_argument("--workdir", help="directory for the SQLite files (default: a temporary one)")
    p.add_argument("--plain", action="store_true", help="plain-text table even when rich is installed")
    return p


def config_from(args: argparse.Namespace) -> Config:
    cfg = dataclasses.replace(QUICK) if args.quick else Config()
    for name, attr in (("jobs", "jobs"), ("concurrency", "concurrency"), ("repeat", "repeat"),
                       ("depths", "depths"), ("depth_claims", "depth_claims"),
                       ("latency_samples", "latency_samples"), ("processes", "processes"),
                       ("process_concurrency", "process_concurrency"), ("churn_jobs", "churn_jobs")):
        value = getattr(args, name)
        if value is not None:
            setattr(cfg, attr, value)
    for name in ("jobs", "repeat", "depth_claims", "latency_samples", "processes", "process_concurrency",
                 "churn_jobs"):
        if getattr(cfg, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1")
    cfg.rss_jobs = min(cfg.rss_jobs, cfg.jobs)
    cfg.pg_analyze = not args.no_analyze
    return cfg


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    cfg = config_from(args)
    scenarios = args.scenarios or list(ALL_SCENARIOS)
    out: dict[str, Any] = {"machine": machine.describe(), "config": dataclasses.asdict(cfg),
                           "scenarios": scenarios, "command": "python -m bench " + " ".join(sys.argv[1:]
                                                                                            if argv is None else argv),
                           "engines": {}}
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    for engine in args.engine:
        target = make_target(engine, pg_url=args.pg_url, workdir=args.workdir)
        try:
            results = run_all(target, cfg, scenarios, log=log)
            try:
                versions = target.versions()
            except Exception as exc:  # noqa: BLE001 - the numbers are still worth keeping
                versions = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            target.close()
        rat = report.ratios(engine, results)
        out["engines"][engine] = {"versions": versions, "scenarios": results, "ratios": rat,
                                  "targets": report.targets(engine, results, rat)}
        if args.json:  # after each engine, so a later failure never loses a finished engine's run
            with open(args.json, "w") as f:
                json.dump(out, f, indent=2, default=str)
    out["machine"]["loadavg_at_end"] = machine.loadavg()
    out["wall_seconds"] = round(time.perf_counter() - t0, 1)
    out["verified"] = all(r.get("verified", {}).get("ok", False)
                          for e in out["engines"].values() for r in e["scenarios"].values())

    if args.plain:
        print(report.render_table(out))
    else:
        report.print_table(out)
    m = out["machine"]
    print(f"machine: {m['cores']} cores ({m['cpu']}), {m['python']}, load {m['loadavg_at_start']} -> "
          f"{m['loadavg_at_end']}; wall {out['wall_seconds']} s; "
          f"exactly-once verification: {'passed' if out['verified'] else 'FAILED'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)
        print(f"wrote {args.json}")
    if args.plot:
        why = report.plot(out, args.plot)
        print(f"plot skipped: {why}" if why else f"wrote {args.plot}")
    return 0 if out["verified"] else 1
