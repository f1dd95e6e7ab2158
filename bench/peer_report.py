"""What ``python -m bench.peers`` reports: each system's runs summed up (medians), the table, and
tenure's ratios to pgqueuer against their targets."""

from __future__ import annotations

import statistics
from typing import Any

from .peer_systems import System
from .peers_calls import summarize_calls


def summarize(system: System, runs: list[dict[str, Any]], calls: dict[str, Any] | None = None,
              fills: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One system's row of the results: the median of its drains (jobs/s, worker CPU per job), of
    its bulk fills (rows/s) and of its per-call runs (``calls``, :func:`summarize_calls`), each
    run kept, and verified only when every run was and something was measured."""
    rates = [r["jobs_per_s"] for r in runs]
    median = statistics.median(rates) if rates else None
    calls = calls or summarize_calls([], [])
    cpus = [r["worker_cpu_us_per_job"] for r in runs if r["worker_cpu_us_per_job"] is not None]
    failures = [f for r in runs for f in r["verified"]["failures"]]
    fills = fills or []
    failures_bulk = [f for r in fills for f in r["verified"]["failures"]]
    bulk = [r["fill"]["enqueued"] / r["fill"]["enqueue_seconds"] for r in [*runs, *fills]
            if (r.get("fill") or {}).get("enqueue_seconds")]
    return {
        "system": system.label, "engine": system.engine, "settings": system.settings(),
        "jobs_per_s": None if median is None else round(median, 1), "jobs_per_s_all": rates,
        "bulk_enqueue_rows_per_s": round(statistics.median(bulk), 1) if bulk else None,
        "cli_defaults": getattr(system, "cli_defaults", False),
        "bulk_enqueue_rows_per_s_all": [round(b, 1) for b in bulk],
        "seconds_all": [r["seconds"] for r in runs],
        "worker_cpu_us_per_job": round(statistics.median(cpus), 1) if cpus else None,
        "verified": {"ok": not failures and not failures_bulk and not calls["calls_failures"]
                     and (bool(runs) or bool(fills) or bool(calls.get("measured"))),
                     "done_per_run": [r["verified"].get("done") for r in runs],
                     "failures": failures + failures_bulk + calls["calls_failures"]},
        "runs": runs,
        **{k: v for k, v in calls.items() if k != "calls_failures"},
    }


def render(out: dict[str, Any]) -> str:
    n = out["config"]["jobs"]
    head = ("system", "engine", "jobs/s", "runs (jobs/s)", "CPU us/job", "bulk enqueue rows/s", "1-by-1 enq/s",
            "CPU us/enq", "latency p50/p99 ms", "verified", "settings")
    rows = [head]

    def num(x: Any, fmt: str = "{:,.0f}") -> str:
        return "-" if x is None else fmt.format(x)

    for r in out["results"]:
        done = r["verified"]["done_per_run"]
        ok = "ok" if r["verified"]["ok"] else "FAILED"
        lat = ("-" if r.get("latency_p50_ms") is None
               else f"{r['latency_p50_ms']:.2f} / {r['latency_p99_ms']:.2f}")
        drained = f"{min(done, default=0) if None not in done else '?'}/{n}" if done else "-"
        rows.append((r["system"], r["engine"], num(r["jobs_per_s"]),
                     " ".join(f"{x:,.0f}" for x in r["jobs_per_s_all"]) or "-",
                     num(r["worker_cpu_us_per_job"]), num(r.get("bulk_enqueue_rows_per_s") or None),
                     num(r.get("enqueue_one_per_s")), num(r.get("enqueue_one_cpu_us")), lat,
                     f"{drained} {ok}", r["settings"]))
    for name, err in out.get("errors", {}).items():
        rows.append((name, "-", "-", "-", "-", "-", "-", "-", "-", "ERROR", err[:200]))
    rows_text = _table(rows, head)
    return rows_text + "\n" + "\n".join(ratio_lines(out))


#: targets against pgqueuer, measured in the same run: (what, tenure system label,
#: the result field, at least this many times pgqueuer's).
RATIO_TARGETS = (
    ("drain, tenure worker's default settings", "tenure (defaults)", "jobs_per_s", 1.5),
    ("drain, best settings", "tenure", "jobs_per_s", 1.5),
    ("bulk enqueue", "tenure", "bulk_enqueue_rows_per_s", 2.0),
    ("enqueue one by one", "tenure", "enqueue_one_per_s", 1.2),
)


def ratio_lines(out: dict[str, Any]) -> list[str]:
    """tenure (PostgreSQL) against pgqueuer in this run, each ratio with its target."""
    pg = {r["system"]: r for r in out["results"] if r["engine"] == "postgres"}
    for r in out["results"]:  # the run at tenure worker's defaults, whatever its label
        if r["engine"] == "postgres" and r.get("cli_defaults"):
            pg.setdefault("tenure (defaults)", r)
    base = pg.get("pgqueuer")
    if base is None:
        return []
    lines = ["ratios to pgqueuer (PostgreSQL, this run):"]
    for what, label, field_name, want in RATIO_TARGETS:
        row = pg.get(label) or {}
        mine, theirs = row.get(field_name), base.get(field_name)
        if not mine or not theirs:
            lines.append(f"  [not measured] {what} >= {want}x")
            continue
        ratio = mine / theirs
        verdict = "met" if ratio >= want else "NOT MET"
        lines.append(f"  [{verdict}] {what} ({row['system']}): {mine:,.0f} / {theirs:,.0f} = {ratio:.2f}x "
                     f"(target >= {want}x)")
    mine, theirs = (pg.get("tenure") or {}), base
    if mine.get("latency_p50_ms") is not None and theirs.get("latency_p50_ms") is not None:
        p50, p99, their50 = mine["latency_p50_ms"], mine["latency_p99_ms"], theirs["latency_p50_ms"]
        lines.append(f"  [{'met' if p50 < their50 else 'NOT MET'}] latency p50 below pgqueuer's: "
                     f"{p50:.2f} vs {their50:.2f} ms")
        lines.append(f"  [{'met' if p99 <= 2 * p50 else 'NOT MET'}] latency p99 <= 2x p50 (tenure): "
                     f"{p99:.2f} / {p50:.2f} = {p99 / p50:.2f}x")
    else:
        lines.append("  [not measured] latency p50 below pgqueuer's, p99 <= 2x p50")
    return lines


def _table(rows: list[tuple], head: tuple) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head) - 1)]
    lines = []
    for i, row in enumerate(rows):
        cells = [str(c).rjust(w) if 2 <= j <= 8 else str(c).ljust(w) for j, (c, w) in enumerate(zip(row, widths, strict=False))]
        lines.append("  ".join([*cells, str(row[-1])]))
        if i == 0:
            lines.append("  ".join(["-" * w for w in widths] + ["-" * 8]))
    return "\n".join(lines)
