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


def test_scale_bench_with_generated_history_runs_verified() -> None:
    require_pg()
    from bench.scale import Generation, run

    out = run(PG_URL, [200, 1_000], rounds=1, ops=5, retention=300, exact_overview=False, keep=False,
              log=lambda msg: None, history=2_500, gen=Generation(generate=True, chunk=1_000, log=lambda msg: None))
    assert out["ok"] and out["verified"][1_000]["checks"]["rows_per_state"]["done"] == 2_500 + 25
    deep = out["fills"][-1]
    assert deep["history"] == 2_500 and deep["wal_mb"] >= 0 and deep["indexes_mb"] >= 0
    assert out["retention"]["deleted"] == 300


def test_generated_rows_are_the_rows_the_api_writes() -> None:
    """Every column of a generated row is what ``enqueue_many`` (pending) or a claim and a
    completion (done) wrote, but the id, the payload, the times and the lease token; ids are
    UUIDv7 increasing with the creation time, and the claim order is the creation order."""
    require_pg()
    from bench.scale import Generation, _fill, _raw

    schema = "scale_generated_probe"
    try:
        _fill(PG_URL, schema, 40, 30, Generation(generate=True, chunk=7, log=lambda msg: None))
        with _raw(PG_URL, schema) as conn:
            cur = conn.execute("SELECT * FROM tenure_jobs ORDER BY id")
            names = [d.name for d in cur.description]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        varying = {"id", "payload", "run_at", "created_at", "updated_at", "lease_token"}
        by_state: dict[str, list[dict[str, object]]] = {}
        for r in rows:
            by_state.setdefault(str(r["state"]), []).append(r)
        assert {s: len(v) for s, v in by_state.items()} == {"done": 30, "pending": 40}
        for group in by_state.values():
            same = [{k: v for k, v in r.items() if k not in varying} for r in group]
            assert all(s == same[0] for s in same)
            for r in group:
                assert r["id"][14] == "7" and r["id"][19] in "89ab" and len(r["id"]) == 36
                assert abs(int(r["id"][:8] + r["id"][9:13], 16) - r["created_at"]) < 60_000  # the API: its own clock
                assert r["payload"].startswith('{"i":') and r["run_at"] == r["created_at"] <= r["updated_at"]
                assert r["state"] == "pending" or len(r["lease_token"]) == 32
        assert [r["created_at"] for r in rows] == sorted(r["created_at"] for r in rows)
    finally:
        with _raw(PG_URL, "public") as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
