"""The vacuum backstop (tenure.table_care): on PostgreSQL the leader vacuums or analyzes
tenure_jobs when autovacuum is off for it or behind, at most once per ``vacuum_interval`` of the
store's clock, observably; on SQLite the duty reads nothing and does nothing."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tenure.table_care import BEHIND_FACTOR, DEFAULTS, TableHealth, health_from, health_of

#: The storage parameters migration 0003 sets on tenure_jobs (test_sweeps checks them).
MIGRATED = ["fillfactor=90", "autovacuum_vacuum_scale_factor=0.02", "autovacuum_analyze_scale_factor=0.05",
            "autovacuum_vacuum_insert_scale_factor=0.05"]


def health(dead=0, live=10_000, inserted=0, modified=0, server_on=False, reloptions=MIGRATED) -> TableHealth:
    return health_from((dead, live, inserted, modified, server_on, {}), reloptions)


# -- when: the rule, without a database -------------------------------------------------------------------


def test_autovacuum_off_gets_autovacuums_own_rule_with_the_tables_settings():
    # vacuum: 50 + 0.02 x 10 000 = 250 dead tuples; inserts: 1000 + 0.05 x 10 000 = 1500;
    # analyze: 50 + 0.05 x 10 000 = 550 changed rows.
    assert health(dead=250).due()[0] is None
    assert health(dead=251).due() == ("vacuum", "251 dead tuples for 10000 live (> 250, autovacuum off)")
    assert health(inserted=1501, modified=1501).due()[0] == "vacuum"
    assert health(inserted=600, modified=600).due()[0] == "analyze"
    assert health(modified=550).due()[0] is None
    # Without the migration's parameters, PostgreSQL's defaults: 50 + 0.2 x 10 000.
    assert health(dead=2050, reloptions=None).due()[0] is None
    assert health(dead=2051, reloptions=None).due()[0] == "vacuum"


def test_with_autovacuum_on_the_backstop_waits_until_it_is_far_behind():
    far = 250 * BEHIND_FACTOR
    assert health(dead=251, server_on=True).due()[0] is None
    assert health(dead=far, server_on=True).due()[0] is None
    assert health(dead=far + 1, server_on=True).due() == (
        "vacuum", f"{far + 1} dead tuples for 10000 live (> {far}, autovacuum {BEHIND_FACTOR}x behind)")
    assert health(modified=600, server_on=True).due()[0] is None
    # The table's own switch turns it off whatever the server says.
    off = [*MIGRATED, "autovacuum_enabled=false"]
    assert health(dead=251, server_on=True, reloptions=off).due()[0] == "vacuum"


def test_an_insert_threshold_of_minus_one_turns_the_insert_rule_off():
    """PostgreSQL's -1 disables insert-triggered vacuums; read as a number it would make every
    check find a vacuum due."""
    off = [*MIGRATED, "autovacuum_vacuum_insert_threshold=-1"]
    assert health(inserted=10**9, reloptions=off).due()[0] is None
    assert health(inserted=10**9, modified=600, reloptions=off).due()[0] == "analyze"  # changed rows still count
    server_off = health_from((0, 10_000, 5_000, 0, False, {"autovacuum_vacuum_insert_threshold": "-1"}), None)
    assert server_off.due()[0] is None


def test_server_settings_apply_where_the_table_sets_none():
    h = health_from((300, 10_000, 0, 0, False, {"autovacuum_vacuum_scale_factor": "0.01",
                                                "autovacuum_vacuum_threshold": "100"}), None)
    assert h.settings["autovacuum_vacuum_scale_factor"] == 0.01 and h.due()[0] == "vacuum"
    assert set(h.settings) == set(DEFAULTS)


def test_a_row_cap_bounds_the_dead_tuple_trigger_of_a_large_table():
    """At 100 000 000 live rows autovacuum's 2 % is 2 000 000 dead tuples: the cap vacuums at
    1 000 000 whatever the fraction, and ten times that with autovacuum on. Below the cap the
    fraction decides, as before."""
    live, cap = 100_000_000, 1_000_000
    big = lambda dead, **kw: health(dead=dead, live=live, **kw)  # noqa: E731
    assert big(1_500_000).due()[0] is None  # no cap: autovacuum's 50 + 2 % = 2 000 050
    assert health_from((1_000_000, live, 0, 0, False, {}), MIGRATED, cap).due()[0] is None
    assert health_from((1_000_001, live, 0, 0, False, {}), MIGRATED, cap).due() == (
        "vacuum", "1000001 dead tuples for 100000000 live (> 1000000, the cap of 1000000 dead tuples, "
        "autovacuum off)")
    on = health_from((10_000_001, live, 0, 0, True, {}), MIGRATED, cap)
    assert on.due()[0] == "vacuum" and "autovacuum 10x behind" in on.due()[1]
    assert health_from((10_000_000, live, 0, 0, True, {}), MIGRATED, cap).due()[0] is None
    # A small table: the fraction is below the cap and alone decides (the message names no cap).
    assert health_from((251, 10_000, 0, 0, False, {}), MIGRATED, cap).due() == (
        "vacuum", "251 dead tuples for 10000 live (> 250, autovacuum off)")
    assert health_from((250, 10_000, 0, 0, False, {}), MIGRATED, cap).due()[0] is None
    # The cap is on dead tuples only: the insert and analyze rules keep their fractions.
    assert health_from((0, live, 1_500_000, 1_500_000, False, {}), MIGRATED, cap).due()[0] is None


def test_the_cap_is_configured_with_the_other_maintenance_settings():
    from tenure.errors import InvalidArgument, InvalidType
    from tenure.maintenance import DEFAULT_VACUUM_MAX_DEAD, MaintenanceConfig

    assert MaintenanceConfig().vacuum_max_dead == DEFAULT_VACUUM_MAX_DEAD == 1_000_000
    assert MaintenanceConfig(vacuum_max_dead=None).vacuum_max_dead is None
    assert MaintenanceConfig(vacuum_max_dead=5).vacuum_max_dead == 5
    with pytest.raises(InvalidArgument, match="vacuum_max_dead must be >= 1"):
        MaintenanceConfig(vacuum_max_dead=0)
    for bad in (True, 1.5, "10"):
        with pytest.raises(InvalidType, match="vacuum_max_dead must be an integer"):
            MaintenanceConfig(vacuum_max_dead=bad)


# -- SQLite: nothing to tend ---------------------------------------------------------------------------


def test_sqlite_the_duty_reads_nothing_and_does_nothing(tmp_path, clock):
    import tenure

    store = tenure.connect(f"sqlite:///{tmp_path}/t.db", clock=clock)
    try:
        store.jobs.enqueue_many([{"kind": "k"} for _ in range(3000)])
        with store._session() as s:
            assert s.jobs_table_stats() is None
        m = store.maintenance
        assert m.vacuum_jobs() is False and m.vacuum_jobs(force=True) is False
        assert m.run_once()["vacuums"] == 0
        assert m.stats()["vacuums"] == 0 and m.stats()["analyzes"] == 0
    finally:
        store.close()


# -- PostgreSQL: the duty against the real statistics ------------------------------------------------------


@pytest.fixture
def raw(pg_store):
    """An autocommit connection to the test database with tenure_jobs' autovacuum switched off
    for the table (so the rule under test is the same whatever the server's setting)."""
    import psycopg

    from .conftest import PG_URL

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute("ALTER TABLE tenure_jobs SET (autovacuum_enabled = false)")
        try:
            yield conn
        finally:
            conn.execute("ALTER TABLE tenure_jobs RESET (autovacuum_enabled)")


def until(store, ok: Callable[[TableHealth], bool]) -> TableHealth:
    """Poll the statistics (they arrive asynchronously) until ``ok``; answers the last reading."""
    deadline = time.monotonic() + 15
    while True:
        with store._session() as s:
            h = health_of(s.jobs_table_stats())
        if ok(h) or time.monotonic() > deadline:
            return h
        time.sleep(0.05)


def dead_rows(store, raw, n: int) -> None:
    """``n`` jobs inserted and deleted on ``raw``, their statistics flushed."""
    with raw.transaction():
        store.jobs.enqueue_many([{"kind": "k"} for _ in range(n)], conn=raw)
    raw.execute("DELETE FROM tenure_jobs")
    raw.execute("SELECT pg_stat_force_next_flush()")
    raw.execute("SELECT 1")


def test_postgres_vacuums_when_dead_tuples_pile_up_at_most_once_per_interval(pg_store, raw, clock, caplog):
    store, m = pg_store, pg_store.maintenance
    m.configure(vacuum_interval=30)
    assert m.vacuum_jobs(force=True) is True  # start from a clean table
    clock.advance(30_000)
    assert m.vacuum_jobs() is False  # nothing due: skipped
    assert m.stats()["vacuums"] == 1

    dead_rows(store, raw, 1500)
    assert until(store, lambda h: h.dead >= 1500).due()[0] == "vacuum"
    with caplog.at_level("INFO", logger="tenure.maintenance"):
        assert m.vacuum_jobs() is True
    assert any("vacuuming tenure_jobs: " in r.getMessage() and "dead tuples" in r.getMessage()
               for r in caplog.records)
    assert until(store, lambda h: h.dead == 0).dead == 0
    assert m.stats()["vacuums"] == 2

    dead_rows(store, raw, 1500)  # due again at once, but the last vacuum was just now
    assert until(store, lambda h: h.dead >= 1500).due()[0] == "vacuum"
    clock.advance(29_999)
    assert m.vacuum_jobs() is False and m.stats()["vacuums"] == 2
    clock.advance(1)
    assert m.vacuum_jobs() is True and m.stats()["vacuums"] == 3


def test_postgres_the_backstop_vacuums_at_the_row_cap_whatever_the_fraction(pg_store, raw, clock, caplog):
    """With the cap configured below autovacuum's own trigger (50 + 2 % of the live rows), the
    backstop vacuums as the dead tuples pass the cap, and says so."""
    store, m = pg_store, pg_store.maintenance
    with raw.transaction():
        store.jobs.enqueue_many([{"kind": "k"} for _ in range(20_000)], conn=raw)  # 50 + 2 %: 450
    raw.execute("SELECT pg_stat_force_next_flush()")  # counted before the vacuum resets the counts
    raw.execute("SELECT 1")
    until(store, lambda h: h.inserted >= 20_000)
    assert m.vacuum_jobs(force=True) is True
    clock.advance(60_000)
    raw.execute("DELETE FROM tenure_jobs WHERE id IN (SELECT id FROM tenure_jobs ORDER BY id LIMIT 300)")
    raw.execute("SELECT pg_stat_force_next_flush()")
    raw.execute("SELECT 1")
    h = until(store, lambda h: h.dead >= 300 and h.live <= 19_700)
    assert h.due()[0] is None, (h, h.due())  # autovacuum's own rule: not yet
    m.configure(vacuum_max_dead=299)
    with caplog.at_level("INFO", logger="tenure.maintenance"):
        assert m.vacuum_jobs() is True
    assert any("the cap of 299 dead tuples, autovacuum off" in r.getMessage() for r in caplog.records)
    assert until(store, lambda h: h.dead == 0).dead == 0


def test_postgres_analyzes_after_a_burst_of_enqueues_and_reports_it(pg_store, raw, clock):
    from tenure.metrics import build_registry, render

    store, m = pg_store, pg_store.maintenance
    assert m.vacuum_jobs(force=True) is True
    clock.advance(60_000)
    with raw.transaction():  # 600 new rows: past the analyze trigger (50 + 5%), short of the vacuum's
        store.jobs.enqueue_many([{"kind": "k"} for _ in range(600)], conn=raw)
    raw.execute("SELECT pg_stat_force_next_flush()")
    raw.execute("SELECT 1")
    assert until(store, lambda h: h.modified >= 600).due()[0] == "analyze"
    counts = m.run_once()
    assert counts["vacuums"] == 0 and counts["analyzes"] == 1
    assert until(store, lambda h: h.modified == 0).modified == 0
    clock.advance(60_000)
    assert m.run_once()["analyzes"] == 0  # analyzed: nothing due any more
    registry, _ = build_registry(store=store)
    text = render(registry)[0].decode()
    assert "tenure_maintenance_vacuums_total 1.0" in text
    assert "tenure_maintenance_analyzes_total 1.0" in text


def test_postgres_the_leaders_loop_runs_the_backstop_as_it_starts(pg_store, raw, clock):
    """A service starting on a table that needs a vacuum runs it in its first pass, not one
    ``vacuum_interval`` later (dead claim-index entries slow every claim until then)."""
    store, m = pg_store, pg_store.maintenance
    dead_rows(store, raw, 1500)
    until(store, lambda h: h.dead >= 1500)
    m.configure(vacuum_interval=3600, expire_interval=3600, delete_interval=3600, reap_interval=3600)
    worker = store.jobs.create_worker({"k": lambda p, ctx: None})
    worker.start()
    try:
        deadline = time.monotonic() + 15
        while m.stats()["vacuums"] == 0 and time.monotonic() < deadline:
            m.wait_for_pass(timeout=1)
    finally:
        worker.stop()
    assert m.stats()["vacuums"] == 1  # the store's clock did not move: once, however many passes


# -- PostgreSQL: no vacuum truncates the table (its ACCESS EXCLUSIVE lock stalls every claim) -------------


def emptied_pages(store, raw, n: int = 3000) -> int:
    """Fill tenure_jobs with ``n`` jobs and delete them all: every page of the table is then
    reclaimable, the case in which a vacuum's last phase would truncate the file (under an ACCESS
    EXCLUSIVE lock). Answers the table's size in pages."""
    dead_rows(store, raw, n)
    return pages(raw)


def pages(raw) -> int:
    return raw.execute("SELECT pg_relation_size('tenure_jobs') / current_setting('block_size')::int").fetchone()[0]


def test_postgres_the_backstops_vacuum_never_truncates_the_table(pg_store, raw):
    """The backstop's own statement says TRUNCATE false: with the table's parameter reset (a
    database whose owner changed it), its vacuum still leaves the empty tail pages in place
    instead of taking the table's ACCESS EXCLUSIVE lock to cut them off; a plain VACUUM, the
    control, does cut them (so the measure can see a truncation)."""
    store, m = pg_store, pg_store.maintenance
    [(options,)] = raw.execute("SELECT reloptions FROM pg_class WHERE oid = 'tenure_jobs'::regclass")
    raw.execute("ALTER TABLE tenure_jobs RESET (vacuum_truncate)")
    try:
        full = emptied_pages(store, raw)
        assert full > 50
        assert m.vacuum_jobs(force=True) is True
        assert pages(raw) == full
        assert until(store, lambda h: h.dead == 0).dead == 0  # vacuumed all the same
        full = emptied_pages(store, raw)
        raw.execute("VACUUM tenure_jobs")
        assert pages(raw) < full
    finally:  # as the migrations left it
        if "vacuum_truncate=false" in options:
            raw.execute("ALTER TABLE tenure_jobs SET (vacuum_truncate = false)")


def test_postgres_no_vacuum_of_the_jobs_table_truncates_it(pg_store, raw):
    """Migration 0021 sets vacuum_truncate = false on tenure_jobs and its TOAST table, so a plain
    VACUUM (what autovacuum runs) leaves the empty tail pages for the next inserts too."""
    store = pg_store
    [(main, toast)] = raw.execute(
        "SELECT c.reloptions, t.reloptions FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid "
        "WHERE c.oid = 'tenure_jobs'::regclass").fetchall()
    assert "vacuum_truncate=false" in main and toast == ["vacuum_truncate=false"]
    full = emptied_pages(store, raw)
    raw.execute("VACUUM tenure_jobs")
    assert pages(raw) == full
    assert until(store, lambda h: h.dead == 0).dead == 0
