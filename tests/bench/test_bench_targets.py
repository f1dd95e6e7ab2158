"""The bench's plumbing on both engines: the bare-SQL floor is the engine's own claim and fenced
completion (it settles every job it claims), and two PostgreSQL runs never share one database's
bench schema (they would drop and drain each other's tables)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from bench.scenarios import LAYERS, Prepared
from bench.targets import FORBIDDEN_PG_DATABASES, PostgresTarget, SQLiteTarget, Target, verify_store

from tests.conftest import PG_URL, require_pg

N = 40


def _pg_url() -> str:
    require_pg()
    dbname = urlsplit(PG_URL).path.lstrip("/")
    if dbname in FORBIDDEN_PG_DATABASES:
        pytest.skip(f"the bench refuses database {dbname!r}: point $TENURE_TEST_PG_URL at a private one")
    return PG_URL


@pytest.fixture(params=["sqlite", "postgres"])
def target(request, tmp_path: Path):
    t: Target = (
        SQLiteTarget(str(tmp_path / "bench")) if request.param == "sqlite" else PostgresTarget(_pg_url())
    )
    try:
        yield t
    finally:
        t.close()


@pytest.mark.parametrize("batch", [1, 7])
def test_bare_sql_floor_settles_every_job_it_claims(target: Target, batch: int) -> None:
    prepared = Prepared(target, analyze=False)
    url, _ids = prepared.store("floor-test", N)
    try:
        done, _secs, _cpu = LAYERS["sql"](target, url, batch, 60.0)
        with target.connect(url) as raw:
            ver = verify_store(raw, done=N)
    finally:
        target.discard(url)
        prepared.close()
    assert done == N
    assert ver.ok, ver.failures


def test_a_second_postgres_run_on_the_same_database_is_refused() -> None:
    url = _pg_url()
    first = PostgresTarget(url)
    try:
        with pytest.raises(SystemExit, match="another bench run is using database"):
            PostgresTarget(url)
    finally:
        first.close()
    PostgresTarget(url).close()  # free again once the first run is over


def test_a_lease_given_back_after_a_lost_claim_verifies_only_when_reported(target: Target) -> None:
    """A worker whose claim's answer was lost gives the lease back (pending again, the attempt
    given back, the generation spent): the job then runs once, at attempt 1, generation 2. That is
    exactly-once when the worker reported the release, and a failure when it did not."""
    import tenure

    url = target.fresh_url("released")
    try:
        with tenure.connect(url) as store:
            jobs = store.jobs
            ids = [jobs.enqueue("noop", {"i": i}) for i in range(3)]
            jobs.claim_many("noop", owner="w", limit=1, instance="lost-answer")  # the answer "was lost"
            assert len(jobs.release_lost_claims("lost-answer")) == 1
            handled = []
            while claims := jobs.claim_many("noop", owner="w", limit=10):
                handled += [c.job.id for c in claims]
                assert jobs.complete_many([(c.lease, None) for c in claims]) == [None] * len(claims)
        with target.connect(url) as raw:
            reported = verify_store(raw, done=3, handled_ids=handled, enqueued_ids=ids, released=1)
            unreported = verify_store(raw, done=3, handled_ids=handled, enqueued_ids=ids)
            twice = verify_store(raw, done=3, handled_ids=handled + handled[:1], enqueued_ids=ids, released=1)
    finally:
        target.discard(url)
    assert reported.ok, reported.failures
    assert reported.checks["done_attempts_range"] == [1, 1]
    assert not unreported.ok and any("done_generation_range" in f for f in unreported.failures)
    assert not twice.ok and any("handler_calls" in f for f in twice.failures)


def test_peers_ratio_lines_judge_each_target_against_pgqueuer() -> None:
    from bench.peer_report import ratio_lines

    def result(system: str, jobs: float, bulk: float | None, defaults: bool = False) -> dict:
        return {"system": system, "engine": "postgres", "jobs_per_s": jobs, "bulk_enqueue_rows_per_s": bulk,
                "cli_defaults": defaults}

    out = {"results": [result("tenure", 9_000, 90_000, defaults=True), result("pgqueuer", 5_000, 40_000),
                       {**result("tenure", 30_000, None), "engine": "sqlite"}]}
    lines = ratio_lines(out)
    assert lines[1] == ("  [met] drain, tenure worker's default settings (tenure): 9,000 / 5,000 = 1.80x "
                        "(target >= 1.5x)")
    assert lines[2].startswith("  [met] drain, best settings (tenure): 9,000 / 5,000 = 1.80x")
    assert lines[3].startswith("  [met] bulk enqueue (tenure): 90,000 / 40,000 = 2.25x")
    out["results"][0]["bulk_enqueue_rows_per_s"] = 70_000
    out["results"][0]["cli_defaults"] = False
    lines = ratio_lines(out)
    assert lines[1].startswith("  [not measured] drain, tenure worker's default settings")
    assert lines[3].startswith("  [NOT MET] bulk enqueue (tenure): 70,000 / 40,000 = 1.75x")
    assert ratio_lines({"results": [result("tenure", 1, 1)]}) == []  # no pgqueuer in the run


def test_peers_ratio_lines_judge_one_by_one_and_latency() -> None:
    from bench.peer_report import ratio_lines

    def result(system: str, enq: float, p50: float, p99: float) -> dict:
        return {"system": system, "engine": "postgres", "jobs_per_s": None, "bulk_enqueue_rows_per_s": None,
                "enqueue_one_per_s": enq, "latency_p50_ms": p50, "latency_p99_ms": p99}

    lines = ratio_lines({"results": [result("tenure", 1_300, 2.0, 3.9), result("pgqueuer", 1_000, 2.5, 3.0)]})
    assert "  [met] enqueue one by one (tenure): 1,300 / 1,000 = 1.30x (target >= 1.2x)" in lines
    assert "  [met] latency p50 below pgqueuer's: 2.00 vs 2.50 ms" in lines
    assert "  [met] latency p99 <= 2x p50 (tenure): 3.90 / 2.00 = 1.95x" in lines
    lines = ratio_lines({"results": [result("tenure", 1_100, 2.6, 5.3), result("pgqueuer", 1_000, 2.5, 3.0)]})
    assert "  [NOT MET] enqueue one by one (tenure): 1,100 / 1,000 = 1.10x (target >= 1.2x)" in lines
    assert "  [NOT MET] latency p50 below pgqueuer's: 2.60 vs 2.50 ms" in lines
    assert "  [NOT MET] latency p99 <= 2x p50 (tenure): 5.30 / 2.60 = 2.04x" in lines
