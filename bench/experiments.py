"""A/B-measure an optimisation WITHOUT editing tenure: ``python -m bench.experiments``.

Each patch below is a reversible monkeypatch of one tenure function or constant, named after the
change it stands for (file, function, what). ``ab`` runs the chosen bench scenarios alternately
without and with the patch (ABBA order over ``--rounds``, so drift in the machine's load hits both
sides alike) and prints the median of each metric per side and the change. Every run is still
verified in the store (every job done exactly once): a patch that broke a guarantee shows up as a
failed verification, not as a speed-up.

    python -m bench.experiments list
    python -m bench.experiments ab sqlite-watch-0.5ms --engine sqlite --scenarios latency

A patch is removed once its change ships (the first four, for proposals 1-4 of
docs/performance.md, were retired with commit 50d7754; git history has them). Patches are applied in this process only, plus child processes started by the bench (they read
``TENURE_BENCH_PATCHES``). They are evidence for a proposal, not code to ship: the real change
belongs in the file each one names.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

ENV = "TENURE_BENCH_PATCHES"


@dataclasses.dataclass(frozen=True)
class Patch:
    name: str
    where: str  # file and function the real change belongs in
    what: str
    apply: Callable[[], Any]  # a context manager factory


PATCHES: dict[str, Patch] = {}


def patch(name: str, where: str, what: str) -> Callable[[Callable[[], Iterator[None]]], Callable[[], Any]]:
    def deco(fn: Callable[[], Iterator[None]]) -> Callable[[], Any]:
        cm = contextmanager(fn)
        PATCHES[name] = Patch(name, where, what, cm)
        return cm

    return deco


@contextmanager
def _setattr(obj: Any, attr: str, value: Any) -> Iterator[None]:
    old = getattr(obj, attr)
    setattr(obj, attr, value)
    try:
        yield
    finally:
        setattr(obj, attr, old)


# -- SQLite engine ------------------------------------------------------------------------------------


def _null_test_first(where: str) -> str:
    """``a AND b IS NOT NULL AND c`` -> ``b IS NOT NULL AND a AND c`` (top-level ANDs only)."""
    terms, depth, cur = [], 0, ""
    i = 0
    while i < len(where):
        ch = where[i]
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and where[i:i + 5].upper() == " AND ":
            terms.append(cur.strip())
            cur = ""
            i += 5
            continue
        cur += ch
        i += 1
    terms.append(cur.strip())
    first = [t for t in terms if t.upper().endswith("IS NOT NULL")]
    return " AND ".join(first + [t for t in terms if t not in first])


@patch("sqlite-watch-0.5ms", "src/tenure/engine/sqlite/engine.py: SQLiteEngine.__init__ (watch_interval)",
       "the cross-process watcher polls PRAGMA data_version every 2 ms, so a job enqueued by another "
       "process waits 1 ms on average before the worker even looks; poll every 0.5 ms (one cheap "
       "PRAGMA on a private connection: ~2 000 per second per idle worker)")
def _sqlite_watch_fast() -> Iterator[None]:
    from tenure.engine.sqlite import engine as E

    orig = E.SQLiteEngine.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, *args, **kwargs)
        self.watch_interval = 0.0005

    with _setattr(E.SQLiteEngine, "__init__", __init__):
        yield


# -- applying ---------------------------------------------------------------------------------------


@contextmanager
def applied(names: list[str]) -> Iterator[None]:
    """Apply the named patches (and export them to the bench's child processes)."""
    unknown = [n for n in names if n not in PATCHES]
    if unknown:
        raise SystemExit(f"unknown patch {unknown}; see: python -m bench.experiments list")
    old = os.environ.get(ENV)
    os.environ[ENV] = ",".join(names)
    try:
        with ExitStack() as stack:
            for n in names:
                stack.enter_context(PATCHES[n].apply())
            yield
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old


_CHILD_PATCHES: list[ExitStack] = []  # held so the patches' generators are never finalised (undone)


def apply_from_env() -> None:
    """In a child process: apply the patches the parent exported (kept until exit)."""
    stack = ExitStack()
    names = [n for n in os.environ.get(ENV, "").split(",") if n]
    for n in names:
        stack.enter_context(PATCHES[n].apply())
    _CHILD_PATCHES.append(stack)


# -- A/B runner -----------------------------------------------------------------------------------------


def _metrics(engine: str, results: dict[str, Any]) -> dict[str, float]:
    """The numbers an A/B compares: jobs/s (higher is better) and CPU us/job (lower is better)."""
    out: dict[str, float] = {}
    for run in results.get("drain", {}).get("by_concurrency", []):
        out[f"drain c{run['concurrency']} jobs/s"] = run["jobs_per_s"]
        out[f"drain c{run['concurrency']} cpu us/job"] = run["cpu_us_per_job"]
    dp = results.get("drain_processes")
    if dp:
        out["drain processes jobs/s"] = dp["jobs_per_s"]
    for key, run in results.get("floor", {}).items():
        if isinstance(run, dict) and "jobs_per_s" in run:
            out[f"floor {key} jobs/s"] = run["jobs_per_s"]
            out[f"floor {key} cpu us/job"] = run["cpu_us_per_job"]
    for row in results.get("claim_depth", {}).get("by_depth", []):
        out[f"claim at {row['depth']} us"] = row["claim_us"]
        if "analyzed" in row:
            out[f"claim at {row['depth']} analyzed us"] = row["analyzed"]["claim_us"]
    for key in ("enqueue_one", "enqueue_many"):
        r = results.get(key)
        if r:
            out[f"{key} per s"] = r.get("jobs_per_s") or r.get("rows_per_s")
    lat = results.get("latency")
    if lat:
        out["latency in p50 ms"] = lat["in_process"]["p50_ms"]
        out["latency cross p50 ms"] = lat["cross_process"]["p50_ms"]
    return out


def ab(patch_names: list[str], bench_args: list[str], rounds: int) -> dict[str, Any]:
    from . import cli
    from .scenarios import run_all
    from .targets import make_target

    args = cli.parser().parse_args(bench_args)
    cfg = cli.config_from(args)
    cfg.repeat = 1
    scenarios = args.scenarios or ["floor", "drain"]
    sides: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    verified = {"A": True, "B": True}
    order = []
    for r in range(rounds):
        order += ["A", "B"] if r % 2 == 0 else ["B", "A"]
    for engine in args.engine:
        for side in order:
            target = make_target(engine, pg_url=args.pg_url, workdir=args.workdir)
            try:
                label = "baseline" if side == "A" else "+".join(patch_names)
                print(f"[{engine}] {label} ...", file=sys.stderr, flush=True)
                with applied(patch_names) if side == "B" else ExitStack():
                    res = run_all(target, cfg, scenarios, log=lambda m: None)
            finally:
                target.close()
            verified[side] = verified[side] and all(v["verified"]["ok"] for v in res.values())
            sides[side].append({f"{engine} {k}": v for k, v in _metrics(engine, res).items()})
    keys = list(dict.fromkeys(k for run in sides["A"] for k in run))
    rows = []
    for k in keys:
        a = [run[k] for run in sides["A"] if k in run]
        b = [run[k] for run in sides["B"] if k in run]
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        rows.append({"metric": k, "baseline": ma, "patched": mb,
                     "change_pct": round((mb - ma) / ma * 100, 1) if ma else None, "baseline_all": a,
                     "patched_all": b})
    return {"patches": [dataclasses.asdict(PATCHES[n]) | {"apply": None} for n in patch_names],
            "bench_args": bench_args, "rounds": rounds, "rows": rows, "verified": verified}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python -m bench.experiments", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the patches")
    a = sub.add_parser("ab", help="A/B-measure patches; other options go to the bench (see python -m bench -h)")
    a.add_argument("patches", help="comma-separated patch names")
    a.add_argument("--rounds", type=int, default=2, help="A/B rounds (ABBA order); medians are compared")
    a.add_argument("--out", help="write the comparison as JSON here")
    args, rest = p.parse_known_args(argv)
    if args.cmd == "list":
        for patch_ in PATCHES.values():
            print(f"{patch_.name}\n    where: {patch_.where}\n    what:  {patch_.what}\n")
        return 0
    names = [n for n in args.patches.split(",") if n]
    out = ab(names, rest, args.rounds)
    width = max(len(r["metric"]) for r in out["rows"]) if out["rows"] else 10
    print(f"A/B over {args.rounds} round(s): baseline vs {'+'.join(names)} (medians)")
    for r in out["rows"]:
        ch = "" if r["change_pct"] is None else f"{r['change_pct']:+.1f}%"
        print(f"  {r['metric'].ljust(width)}  {r['baseline']:>12,.1f}  {r['patched']:>12,.1f}  {ch:>8}")
    print(f"exactly-once verification: baseline {'passed' if out['verified']['A'] else 'FAILED'}, "
          f"patched {'passed' if out['verified']['B'] else 'FAILED'}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=2, default=str)
    return 0 if all(out["verified"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
