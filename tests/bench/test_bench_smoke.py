"""Smoke test of the benchmark suite: ``python -m bench --quick --engine sqlite``.

It runs the real suite in a subprocess on SQLite and checks that the JSON report has every
scenario, that every scenario verified its run in the store (every job done exactly once, none
duplicated, none left leased), and that the numbers the docs quote are there. It asserts no
speed: the timings of a shared machine are evidence, not a pass/fail gate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.scenarios import ALL_SCENARIOS
from bench.targets import SQLiteTarget, verify_store

import tenure

ROOT = Path(__file__).resolve().parents[2]


def test_quick_sqlite_run_reports_every_scenario_verified(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--engine", "sqlite", "--plain", "--json", str(out),
         "--workdir", str(tmp_path / "db")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())

    sqlite = report["engines"]["sqlite"]
    expected = set(ALL_SCENARIOS) - {"drain_processes"}  # the multi-process drain is PostgreSQL's
    assert set(sqlite["scenarios"]) == expected
    for name, result in sqlite["scenarios"].items():
        assert result["verified"]["ok"] is True, (name, result["verified"])
    assert report["verified"] is True

    # The exactly-once checks really ran against the store (not just a flag).
    drain = sqlite["scenarios"]["drain"]["by_concurrency"]
    assert [r["concurrency"] for r in drain] == report["config"]["concurrency"]
    for run in drain:
        checks = run["verified"]["checks"]
        assert checks["rows_per_state"] == {"done": run["jobs"]}
        assert checks["done_attempts_range"] == [1, 1]
        assert checks["handler_distinct_ids"] == run["jobs"]
        assert run["jobs_per_s"] > 0
    lat = sqlite["scenarios"]["latency"]
    for where in ("in_process", "cross_process"):
        assert lat[where]["samples"] == report["config"]["latency_samples"]
        assert 0 < lat[where]["p50_ms"] <= lat[where]["p99_ms"]
    depth = sqlite["scenarios"]["claim_depth"]
    assert [r["depth"] for r in depth["by_depth"]] == report["config"]["depths"]
    assert any("tenure_jobs_claim" in line for line in depth["by_depth"][-1]["plan"])
    floor = sqlite["scenarios"]["floor"]
    for key in ("sql_unbatched", "sql_batched", "engine_unbatched", "engine_batched", "api_unbatched",
                "api_batched"):
        assert floor[key]["jobs_per_s"] > 0, key
    assert sqlite["ratios"]["drain_best_vs_floor_unbatched"] > 0
    assert sqlite["scenarios"]["rss"]["rss_mb"] > 0
    light = sqlite["scenarios"]["light_load"]
    for phase in ("light", "saturated"):
        assert light[phase]["jobs"] > 0 and light[phase]["cpu_us_per_job"] > 0, phase
    assert light["verified"]["checks"]["rows_per_state"] == {"done": light["light"]["jobs"] + light["saturated"]["jobs"]}
    assert light["light_vs_saturated_cpu"] > 0
    churn = sqlite["scenarios"]["churn"]
    assert churn["churned"]["verified"]["checks"]["rows_per_state"] == {"done": churn["history_jobs"] + churn["jobs"]}
    assert churn["churned_vs_fresh"] > 0
    assert report["machine"]["cores"] >= 1 and report["machine"]["python"]
    assert "floor" in proc.stdout and "exactly-once verification: passed" in proc.stdout

    # And the checker can fail: a job left leased, or run twice, is reported, not passed.
    target = SQLiteTarget(str(tmp_path / "neg"))
    url = target.fresh_url("neg")
    with tenure.connect(url) as store:
        ids = [store.jobs.enqueue("noop", {"i": i}) for i in range(3)]
        for _ in range(2):
            claim = store.jobs.claim("noop", owner="t")
            store.jobs.complete(claim.lease)
        store.jobs.claim("noop", owner="t")  # stuck leased
    with target.connect(url) as raw:
        stuck = verify_store(raw, done=3, handled_ids=ids, enqueued_ids=ids)
        twice = verify_store(raw, done=2, handled_ids=[ids[0], ids[0]], enqueued_ids=ids)
    assert not stuck.ok and any("rows_per_state" in f for f in stuck.failures)
    assert not twice.ok and any("handler_distinct_ids" in f for f in twice.failures)


def test_peers_harness_runs_tenure_on_sqlite_and_verifies_in_the_store(tmp_path: Path) -> None:
    """``python -m bench.peers`` measured with tenure alone (no peer virtualenv, no network): the
    harness starts the worker process, polls the store, and verifies every run there."""
    out = tmp_path / "peers.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, "-m", "bench.peers", "--peers", "tenure", "--engines", "sqlite", "--jobs", "300",
         "--repeat", "2", "--json", str(out), "--venv", str(tmp_path / "no-venv"),
         "--enqueue-jobs", "100", "--latency-jobs", "10", "--latency-gap-ms", "5"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not (tmp_path / "no-venv").exists()  # tenure alone never builds the peers' virtualenv
    report = json.loads(out.read_text())
    assert [(r["system"], r["engine"]) for r in report["results"]] == [("tenure", "sqlite"),
                                                                         ("tenure (durable)", "sqlite")]
    for result in report["results"]:
        assert result["verified"]["ok"] is True
        assert result["verified"]["done_per_run"] == [300, 300]
        for run in result["runs"]:
            assert run["verified"]["checks"]["rows_per_state"] == {"done": 300}
            assert run["verified"]["checks"]["handler_distinct_ids"] == 300
            assert run["jobs_per_s"] > 0
    assert report["verified"] is True
    # One by one and latency: measured for tenure at its drain settings, verified in the store.
    plain, durable = report["results"]
    assert plain["enqueue_one_per_s"] > 0 and len(plain["enqueue_one_all"]) == 2
    assert 0 < plain["latency_p50_ms"] <= plain["latency_p99_ms"] and len(plain["latency_all"]) == 2
    assert plain["latency_cpu_us_per_job"] >= 0  # the worker process's CPU over the run, per job
    assert durable["enqueue_one_per_s"] is None and durable["latency_p50_ms"] is None


def test_peers_bulk_measure_fills_and_verifies_without_a_drain(tmp_path: Path) -> None:
    """``--measure bulk``: each system's fill alone, verified as N jobs queued in its store."""
    out = tmp_path / "peers.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, "-m", "bench.peers", "--peers", "tenure", "--engines", "sqlite", "--jobs", "300",
         "--repeat", "2", "--measure", "bulk", "--json", str(out), "--venv", str(tmp_path / "no-venv")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["verified"] is True and report["results"]
    for result in report["results"]:
        assert result["runs"] == [] and result["verified"]["ok"] is True
