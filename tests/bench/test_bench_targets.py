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
