"""Smoke test of ``python -m bench.scale`` at toy depths on PostgreSQL: it runs every step (fills,
alternating rounds, plans, the retention step), verifies the store, and drops its schemas. It
asserts no speed."""

from __future__ import annotations

import psycopg

from tests.conftest import PG_URL, require_pg


def test_scale_bench_runs_every_step_verified_and_cleans_up() -> None:
    require_pg()
    from bench.scale import run

    out = run(PG_URL, [200, 1_000], rounds=2, ops=5, retention=300, exact_overview=True, keep=False,
              log=lambda msg: None)
    assert out["ok"] and set(out["verified"]) == {200, 1_000}
    assert set(out["medians"][1_000]) == {"claim_us", "settle_us", "enqueue_us", "cpu_us", "overview_ms"}
    assert set(out["ratios"]) == set(out["medians"][200])
    assert out["plans"][1_000]["buffers"].startswith("Buffers:")
    assert out["retention"]["deleted"] == 300 and "exact_overview_ms_deepest" in out
    with psycopg.connect(PG_URL) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'scale\\_%'").fetchone()[0]
    assert left == 0
