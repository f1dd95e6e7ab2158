"""Migration 0005 on a database that already has 0001-0004 and a schedule row written in 0003's
shape: the row survives under key '' with catch_up 'latest', fires, and the indexes exist."""

from __future__ import annotations

import sqlite3

import tenure
from tenure.engine.migrate import load_migrations, split_statements

from .conftest import PG_URL

ROW = ("legacy", "0 * * * *", "UTC", "k", '{"a":1}', None, None, None, 1_699_999_200_000,
       1_699_999_000_000, 1_699_999_000_000)
INSERT = ("INSERT INTO tenure_schedules (name, cron, tz, kind, payload, queue, options, last_fire_at, "
          "next_fire_at, created_at, updated_at) VALUES ({})")


def _check(store, clock):
    [s] = store.schedules.list()
    assert (s.name, s.key, s.catch_up, s.payload, s.next_fire_at) == ("legacy", "", "latest", {"a": 1},
                                                                       1_699_999_200_000)
    clock.set(1_699_999_200_000)
    assert store.schedules.fire_due() == 1
    assert store.jobs.get("cron:legacy:1699999200000").payload == {"a": 1}


def test_sqlite_upgrade_keeps_schedule_rows(tmp_path, clock):
    path = tmp_path / "v4.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE tenure_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                 "applied_at INTEGER NOT NULL)")
    for mig in load_migrations("tenure.engine.sqlite"):
        if mig.version < 5:
            for stmt in split_statements(mig.sql):
                conn.execute(stmt)
            conn.execute("INSERT INTO tenure_migrations VALUES (?, ?, 0)", (mig.version, mig.name))
    conn.execute(INSERT.format(", ".join("?" * len(ROW))), ROW)
    conn.close()
    store = tenure.connect(f"sqlite:///{path}", clock=clock)
    try:
        _check(store, clock)
        with store._session() as s:
            names = {r[0] for r in s.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"tenure_schedules_due", "tenure_jobs_keep_until", "tenure_jobs_delete_at"} <= names
    finally:
        store.close()


def test_postgres_upgrade_keeps_schedule_rows(clock):
    from tests.conftest import require_pg

    require_pg()
    import psycopg

    schema = "tenure_maint_v4"
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={schema}") as conn:
            conn.execute("CREATE TABLE tenure_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                         "applied_at BIGINT NOT NULL)")
            for mig in load_migrations("tenure.engine.postgres"):
                if mig.version < 5:
                    for stmt in split_statements(mig.sql):
                        conn.execute(stmt)
                    conn.execute("INSERT INTO tenure_migrations VALUES (%s, %s, 0)", (mig.version, mig.name))
            conn.execute(INSERT.format(", ".join(["%s"] * len(ROW))), ROW)
        store = tenure.connect(f"{PG_URL}?schema={schema}", clock=clock)
        try:
            _check(store, clock)
            with store._session() as s:
                pk = s.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                               "WHERE conname = 'tenure_schedules_pkey' AND connamespace = %s::regnamespace",
                               (schema,)).fetchone()[0]
            assert pk == "PRIMARY KEY (name, key)"
        finally:
            store.close()
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
