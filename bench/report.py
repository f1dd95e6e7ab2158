"""Ratios, targets, the stdout table and the throughput-vs-concurrency plot."""

from __future__ import annotations

from typing import Any

#: targets, per engine: (key, label, comparison, threshold).
TARGETS: dict[str, list[tuple[str, str, str, float]]] = {
    "sqlite": [
        ("drain_vs_floor", "worker drain / bare-SQL floor (unbatched)", ">=", 0.60),
        ("drain_vs_floor_batched", "worker drain / bare-SQL floor (batched) [stricter reading]", ">=", 0.60),
        ("latency_in_p50", "enqueue->start p50, same process (ms)", "<=", 5.0),
        ("latency_cross_p50", "enqueue->start p50, other process (ms)", "<", 3.0),
        ("claim_depth_ratio", "claim cost, deepest / shallowest queue", "<=", 1.5),
        ("rss_mb", "worker RSS at concurrency 32 (MB)", "<=", 80.0),
        ("light_vs_saturated", "CPU per job at a light pace / flat out (2 worker processes)", "<=", 1.5),
        ("churn_ratio", "drain after serving the churn history / on a fresh table", ">=", 0.8),
    ],
    "postgres": [
        ("drain_processes", "2 worker processes drain (jobs/s)", ">=", 10_000.0),
        ("latency_in_p50", "enqueue->start p50, same process (ms)", "<=", 5.0),
        ("latency_cross_p50", "enqueue->start p50, other process (ms)", "<=", 15.0),
        ("claim_depth_ratio_analyzed", "claim cost, deepest / shallowest queue (after ANALYZE)", "<=", 1.5),
        ("claim_worst_best", "claim cost, worst / best over depths, with and without statistics", "<=", 1.5),
        ("rss_mb", "worker RSS at concurrency 32 (MB)", "<=", 80.0),
        ("light_vs_saturated", "CPU per job at a light pace / flat out (2 worker processes)", "<=", 1.5),
        ("churn_ratio", "drain after serving the churn history / on a fresh table", ">=", 0.8),
    ],
}


def _get(d: dict[str, Any], *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def _ratio(a: Any, b: Any) -> float | None:
    if not a or not b:
        return None
    return round(a / b, 3)


def ratios(engine: str, res: dict[str, Any]) -> dict[str, Any]:
    """Every throughput as a fraction of the bare-SQL floor measured in the same run."""
    fu = _get(res, "floor", "sql_unbatched", "jobs_per_s")
    fb = _get(res, "floor", "sql_batched", "jobs_per_s")
    out: dict[str, Any] = {"floor_unbatched_jobs_per_s": fu, "floor_batched_jobs_per_s": fb}
    for layer in ("engine", "api"):
        for kind in ("unbatched", "batched"):
            v = _get(res, "floor", f"{layer}_{kind}", "jobs_per_s")
            out[f"{layer}_{kind}_vs_floor_{kind}"] = _ratio(v, fu if kind == "unbatched" else fb)
    for run in _get(res, "drain", "by_concurrency") or []:
        c = run["concurrency"]
        out[f"drain_c{c}_vs_floor_unbatched"] = _ratio(run["jobs_per_s"], fu)
        out[f"drain_c{c}_vs_floor_batched"] = _ratio(run["jobs_per_s"], fb)
    best = _get(res, "drain", "best", "jobs_per_s")
    out["drain_best_vs_floor_unbatched"] = _ratio(best, fu)
    out["drain_best_vs_floor_batched"] = _ratio(best, fb)
    dp = _get(res, "drain_processes", "jobs_per_s")
    if dp:
        out["drain_processes_vs_floor_unbatched"] = _ratio(dp, fu)
        out["drain_processes_vs_floor_batched"] = _ratio(dp, fb)
    return out


def targets(engine: str, res: dict[str, Any], rat: dict[str, Any]) -> list[dict[str, Any]]:
    values = {
        "drain_vs_floor": rat.get("drain_best_vs_floor_unbatched"),
        "drain_vs_floor_batched": rat.get("drain_best_vs_floor_batched"),
        "claim_worst_best": _get(res, "claim_depth", "worst_best_claim_ratio"),
        "drain_processes": _get(res, "drain_processes", "jobs_per_s"),
        "latency_in_p50": _get(res, "latency", "in_process", "p50_ms"),
        "latency_cross_p50": _get(res, "latency", "cross_process", "p50_ms"),
        "claim_depth_ratio": _get(res, "claim_depth", "claim_ratio"),
        "claim_depth_ratio_analyzed": _get(res, "claim_depth", "analyzed_claim_ratio"),
        "rss_mb": _get(res, "rss", "rss_mb"),
        "light_vs_saturated": _get(res, "light_load", "light_vs_saturated_cpu"),
        "churn_ratio": _get(res, "churn", "churned_vs_fresh"),
    }
    depths = [r["depth"] for r in _get(res, "claim_depth", "by_depth") or []]
    out = []
    for key, label, op, limit in TARGETS.get(engine, []):
        if key == "churn_ratio" and "churn" in res:
            fresh_state = _get(res, "churn", "churned", "state_before_drain", "autovacuum")
            if fresh_state == "off":
                limit = 0.5  # >= 0.8 with autovacuum at its defaults, >= 0.5 with it off
            label = (f"drain after serving {res['churn']['history_jobs']:,} jobs / fresh table"
                     + (f" (autovacuum {fresh_state})" if fresh_state else ""))
        if key in ("claim_depth_ratio", "claim_depth_ratio_analyzed") and depths:
            label = f"claim cost at {depths[-1]:,} / at {depths[0]:,} pending" + (
                " (after ANALYZE)" if key.endswith("analyzed") else "")
        v = values.get(key)
        met = None if v is None else {">=": v >= limit, "<=": v <= limit, "<": v < limit}[op]
        out.append({"key": key, "target": f"{label} {op} {limit:g}", "value": v, "met": met})
    return out


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        text = f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.2f}"
    else:
        text = f"{v:,}" if isinstance(v, int) else str(v)
    return f"{text}{unit}"


Row = tuple[str, str, str, str, str, str]


def table_rows(engine: str, res: dict[str, Any], rat: dict[str, Any]) -> list[Row]:  # noqa: C901 - a report script, one branch per row kind
    """(scenario, measurement, value, CPU us/job, vs floor, verified) rows for one engine."""
    rows: list[Row] = []

    def cpu(r: dict[str, Any]) -> str:
        return _fmt(r.get("cpu_us_per_job"))

    for name, r in res.items():
        if "error" in r:
            rows.append((name, "did not complete", r["error"][:80], "", "", "FAILED"))
    res = {k: v for k, v in res.items() if "error" not in v}

    def ok(r: Any) -> str:
        v = _get(r, "verified", "ok") if isinstance(r, dict) else None
        return "-" if v is None else ("yes" if v else "FAILED")

    if "enqueue_one" in res:
        r = res["enqueue_one"]
        rows.append(("1 enqueue", f"one by one, {r['jobs']:,} jobs", _fmt(r["jobs_per_s"], " jobs/s"), cpu(r), "",
                     ok(r)))
    if "enqueue_many" in res:
        r = res["enqueue_many"]
        rows.append(("2 enqueue_many", f"batches of {r['batch']}", _fmt(r["rows_per_s"], " rows/s"), cpu(r), "",
                     ok(r)))
    if "drain" in res:
        for r in res["drain"]["by_concurrency"]:
            c = r["concurrency"]
            rows.append(("3 drain", f"worker, concurrency {c}", _fmt(r["jobs_per_s"], " jobs/s"), cpu(r),
                         f"{_fmt(rat.get(f'drain_c{c}_vs_floor_unbatched'))} / "
                         f"{_fmt(rat.get(f'drain_c{c}_vs_floor_batched'))}", ok(r)))
    if "drain_processes" in res:
        r = res["drain_processes"]
        rows.append(("3 drain", f"{r['processes']} processes x concurrency {r['concurrency_per_process']}",
                     _fmt(r["jobs_per_s"], " jobs/s"), "",
                     f"{_fmt(rat.get('drain_processes_vs_floor_unbatched'))} / "
                     f"{_fmt(rat.get('drain_processes_vs_floor_batched'))}", ok(r)))
    if "latency" in res:
        for where in ("in_process", "cross_process"):
            r = res["latency"][where]
            rows.append(("4 latency", f"enqueue->start, {where.replace('_', ' ')} ({r.get('wake')})",
                         f"p50 {_fmt(r.get('p50_ms'))} / p99 {_fmt(r.get('p99_ms'))} ms", "", "", ok(r)))
    if "claim_depth" in res:
        cd = res["claim_depth"]
        for r in cd["by_depth"]:
            label = " (as filled)" if "analyzed" in r else ""
            rows.append(("5 claim at depth", f"{r['depth']:,} pending{label}: claim / claim+complete",
                         f"{_fmt(r['claim_us'])} / {_fmt(r['claim_complete_us'])} us", cpu(r), "", ok(r)))
            if "analyzed" in r:
                a = r["analyzed"]
                rows.append(("5 claim at depth", f"{r['depth']:,} pending (after ANALYZE)",
                             f"{_fmt(a['claim_us'])} / {_fmt(a['claim_complete_us'])} us", cpu(a), "", ok(r)))
        rows.append(("5 claim at depth", "ratio deepest / shallowest: claim (CPU)", _fmt(cd["claim_ratio"]),
                     _fmt(cd.get("cpu_ratio")), "", ok(cd)))
        if "analyzed_claim_ratio" in cd:
            rows.append(("5 claim at depth", "same ratio after ANALYZE", _fmt(cd["analyzed_claim_ratio"]), "", "",
                         ok(cd)))
            rows.append(("5 claim at depth", "worst / best, every depth, with and without stats",
                         _fmt(cd["worst_best_claim_ratio"]), "", "", ok(cd)))
    if "floor" in res:
        f = res["floor"]
        for layer, label in (("sql", "bare SQL (raw driver)"), ("engine", "engine session methods"),
                             ("api", "claim_many + complete_many")):
            for kind in ("unbatched", "batched"):
                r = f.get(f"{layer}_{kind}")
                if r is None:
                    continue
                b = 1 if kind == "unbatched" else f["batch"]
                vs = "1.00" if layer == "sql" else _fmt(rat.get(f"{layer}_{kind}_vs_floor_{kind}"))
                rows.append(("6 floor", f"{label}, batch {b}", _fmt(r["jobs_per_s"], " jobs/s"), cpu(r), vs, ok(r)))
    if "light_load" in res:
        ll = res["light_load"]
        for phase in ("light", "saturated"):
            r = ll.get(phase) or {}
            pace = f"{r.get('offered_rate'):g} jobs/s offered" if r.get("offered_rate") else "flat out"
            parts = [f"enqueuer {_fmt(r.get('enqueuer_cpu_us_per_job'))}",
                     f"workers {_fmt(r.get('workers_cpu_us_per_job'))}"]
            if "server_cpu_us_per_job" in r:
                parts.append(f"server {_fmt(r.get('server_cpu_us_per_job'))}")
            if r.get("commits_per_job") is not None:
                parts.append(f"{_fmt(r['commits_per_job'])} commits/job (database xact_commit, "
                             f"read {r.get('commits_settle_s', '?')} s after the phase; "
                             f"{_fmt(r.get('late_commits_per_job'))} of them counted after 1.2 s)")
            rows.append(("8 light load", f"{ll['processes']} workers, {pace}: {', '.join(parts)}",
                         _fmt(r.get("jobs_per_s"), " jobs/s"), _fmt(r.get("cpu_us_per_job")), "", ok(ll)))
        rows.append(("8 light load", "CPU per job, light / saturated", _fmt(ll.get("light_vs_saturated_cpu")), "",
                     "", ok(ll)))
    if "churn" in res:
        ch = res["churn"]
        for label in ("fresh", "churned", "fresh_after"):
            r = ch.get(label)
            if r is None:  # a run from before the second fresh drain
                continue
            st = r.get("state_before_drain") or {}
            what = {"fresh": "fresh table", "fresh_after": "fresh table again, after the churned one"}.get(
                label, f"after serving {ch['history_jobs']:,} jobs")
            if st:
                what += (f" ({st.get('live_tuples'):,} live / {st.get('dead_tuples'):,} dead tuples, "
                         f"{_fmt(st.get('table_mb'))} MB, autovacuum {st.get('autovacuum')})")
            rows.append(("9 churn", f"drain {ch['jobs']:,}, {what}", _fmt(r["jobs_per_s"], " jobs/s"), cpu(r), "",
                         ok(r)))
        rows.append(("9 churn", "ratio churned / mean of the fresh drains", _fmt(ch.get("churned_vs_fresh")), "",
                     "", ok(ch)))
    if "rss" in res:
        r = res["rss"]
        rows.append(("7 memory", f"worker RSS, concurrency {r['concurrency']} (peak)",
                     f"{_fmt(r['rss_mb'])} MB ({_fmt(r['peak_rss_mb'])} MB)", "", "", ok(r)))
    return rows


HEADERS = ("scenario", "measurement", "value", "CPU us/job", "vs floor (1 / batched)", "verified")


def render_table(report: dict[str, Any]) -> str:
    """The whole report as a plain-text table (also what ``docs/performance.md`` quotes)."""
    lines = []
    for engine, data in report["engines"].items():
        rows = table_rows(engine, data["scenarios"], data["ratios"])
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(HEADERS)]
        lines.append(f"== {engine} ({', '.join(f'{k} {v}' for k, v in data['versions'].items())})")
        lines.append("  ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)))
        lines.append("  ".join("-" * w for w in widths))
        for r in rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
        lines.append("targets:")
        for t in data["targets"]:
            mark = {True: "met", False: "NOT MET", None: "not measured"}[t["met"]]
            lines.append(f"  [{mark}] {t['target']}: {_fmt(t['value'])}")
        lines.append("")
    return "\n".join(lines)


def print_table(report: dict[str, Any]) -> None:
    """A rich table when rich is installed, else the plain one."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(render_table(report))
        return
    console = Console(width=max(Console().width, 150))
    for engine, data in report["engines"].items():
        t = Table(title=f"tenure on {engine} ({', '.join(f'{k} {v}' for k, v in data['versions'].items())})")
        for h in HEADERS:
            t.add_column(h)
        for r in table_rows(engine, data["scenarios"], data["ratios"]):
            t.add_row(*r)
        console.print(t)
        for tg in data["targets"]:
            mark = {True: "[green]met[/]", False: "[red]NOT MET[/]", None: "not measured"}[tg["met"]]
            console.print(f"  {mark}  {tg['target']}: {_fmt(tg['value'])}")


def plot(report: dict[str, Any], path: str) -> str | None:
    """Throughput vs concurrency (one line per engine, its floors dashed). Answers None, or why
    no plot was written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): no plot written"
    fig, ax = plt.subplots(figsize=(8, 5))
    colors = {"sqlite": "tab:blue", "postgres": "tab:orange"}
    drew = False
    for engine, data in report["engines"].items():
        res = data["scenarios"]
        runs = _get(res, "drain", "by_concurrency") or []
        color = colors.get(engine)
        if runs:
            xs = [r["concurrency"] for r in runs]
            ax.plot(xs, [r["jobs_per_s"] for r in runs], marker="o", color=color, label=f"{engine}: worker drain")
            drew = True
        for key, style, label in (("floor_unbatched_jobs_per_s", "--", "bare SQL, batch 1"),
                                  ("floor_batched_jobs_per_s", ":", "bare SQL, batched")):
            v = data["ratios"].get(key)
            if v:
                ax.axhline(v, linestyle=style, color=color, alpha=0.7, label=f"{engine}: {label}")
        dp = res.get("drain_processes")
        if dp:
            ax.scatter([dp["concurrency_per_process"]], [dp["jobs_per_s"]], marker="*", s=150, color=color,
                       label=f"{engine}: {dp['processes']} worker processes (x = per-process concurrency)")
    if not drew:
        plt.close(fig)
        return "no drain results to plot"
    ax.set_xscale("log", base=2)
    ax.set_xlabel("worker concurrency (slots)")
    ax.set_ylabel("jobs/s (no-op jobs, settled)")
    m = report["machine"]
    ax.set_title(f"tenure throughput vs concurrency ({m.get('cores')} cores, {m.get('python')})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
