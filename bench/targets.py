"""Where a benchmark runs: a fresh, empty store per measurement, a raw driver connection configured
exactly like the engine's, the engine's own claim and fenced-completion statements (imported, never
copied) for the bare-SQL floor, and the exactly-once verification read straight from the table.
"""

from __future__ import annotations

import inspect
import itertools
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

#: The bench's own verification query (not an engine statement): one row per state with the
#: row count, distinct ids, the attempts / lease_generation range, and the generations spent by no
#: attempt (leases given back after a lost claim, see :func:`verify_store`).
VERIFY_SQL = (
    "SELECT state, count(*), count(DISTINCT id), min(attempts), max(attempts), "
    "min(lease_generation), max(lease_generation), sum(lease_generation - attempts) "
    "FROM tenure_jobs GROUP BY state"
)

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/tenure_bench"
#: The schema each PostgreSQL measurement gets afresh (dropped and recreated).
SCHEMA = "tenure_bench_run"
#: Databases the bench refuses to touch (they belong to the test suites).
FORBIDDEN_PG_DATABASES = frozenset({"test", "postgres", "template0", "template1"})


def commit_probe(conn: Any, n: int = 100) -> dict[str, float]:
    """p50/p90 of one autocommitted single-row INSERT on a scratch table: what one durable commit
    costs on this disk with this engine's settings (PostgreSQL fsyncs its WAL at every commit)."""
    conn.execute("CREATE TABLE IF NOT EXISTS bench_commit_probe (n INTEGER)")
    times = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            conn.execute("INSERT INTO bench_commit_probe (n) VALUES (1)")
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        conn.execute("DROP TABLE bench_commit_probe")
    times.sort()
    return {"commit_p50_ms": round(times[len(times) // 2], 3), "commit_p90_ms": round(times[int(len(times) * 0.9)], 3)}


@dataclass
class Verification:
    """The outcome of one exactly-once check; ``ok`` is False as soon as any check fails."""

    ok: bool = True
    checks: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def check(self, name: str, observed: Any, expected: Any) -> None:
        self.checks[name] = observed
        if observed != expected:
            self.ok = False
            self.failures.append(f"{name}: observed {observed!r}, expected {expected!r}")

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": self.checks, "failures": self.failures}


def verify_store(raw: Any, *, done: int = 0, pending: int = 0, handled_ids: list[str] | None = None,
                 enqueued_ids: Iterable[str] | None = None, released: int = 0) -> Verification:
    """Every job done exactly once: ``done`` rows in state done, each claimed exactly once
    (attempts = lease_generation = 1), ``pending`` rows never claimed (attempts = 0), and no row
    in any other state (none stuck leased, none failed). With ``handled_ids`` (the ids the handler
    saw, in order), each must appear once and they must be the done rows' ids.

    ``released``: leases the worker gave back after a claim whose answer was lost (its
    ``claims_released`` stat; a connection broke mid-claim). Each such job ran once, with its
    attempt given back, but its lease generation stays spent (the fence never reuses one), so with
    ``released`` > 0 the done rows' generations may exceed 1, by at least ``released`` in all
    (more when a release's own answer was lost); attempts must still be exactly 1."""
    ver = Verification()
    rows = {r[0]: r[1:] for r in raw.execute(VERIFY_SQL).fetchall()}
    states = {s: int(r[0]) for s, r in rows.items()}
    expected_states = {s: n for s, n in (("done", done), ("pending", pending)) if n}
    ver.check("rows_per_state", states, expected_states)
    for state, attempts in (("done", 1), ("pending", 0)):
        if state in rows:
            n, distinct, amin, amax, gmin, gmax, excess = rows[state]
            ver.check(f"{state}_distinct_ids", int(distinct), int(n))
            ver.check(f"{state}_attempts_range", [int(amin), int(amax)], [attempts, attempts])
            if state == "done" and released:
                ver.check("done_generation_min", int(gmin), attempts)
                ver.check("done_generations_spent_by_released_claims", int(excess) >= released, True)
                ver.checks["released_claims"] = released
            else:
                ver.check(f"{state}_generation_range", [int(gmin), int(gmax)], [attempts, attempts])
    if handled_ids is not None:
        ver.check("handler_calls", len(handled_ids), done)
        ver.check("handler_distinct_ids", len(set(handled_ids)), done)
        if enqueued_ids is not None:
            ver.check("handled_ids_are_enqueued_ids", set(handled_ids) == set(enqueued_ids), True)
    return ver


class Target:
    """One engine's plumbing for the bench."""

    engine: str

    def fresh_url(self, label: str) -> str:
        """The URL of a new, empty store (its tables are created by the first ``store.jobs``)."""
        raise NotImplementedError

    def discard(self, url: str) -> None:
        """Forget a store made by :meth:`fresh_url` (delete its file or schema)."""

    def analyze(self, url: str) -> None:
        """Refresh the planner's statistics (PostgreSQL only; SQLite's claim names its index)."""

    def raw(self, url: str) -> Any:
        """A raw driver connection configured like the engine's own (autocommit)."""
        raise NotImplementedError

    @contextmanager
    def connect(self, url: str) -> Iterator[Any]:
        """:meth:`raw`, closed at the end of the block."""
        conn = self.raw(url)
        try:
            yield conn
        finally:
            conn.close()

    def floor_statements(self, kinds: list[str]) -> FloorStatements:
        raise NotImplementedError

    def versions(self) -> dict[str, Any]:
        """Driver and server versions and the durability settings the engine runs with."""
        raise NotImplementedError

    def claim_plan(self, url: str, kinds: list[str]) -> list[str]:
        """The claim statement's plan as the database reports it (text lines)."""
        raise NotImplementedError

    def close(self) -> None:
        pass


@dataclass
class FloorStatements:
    """The engine's claim and fenced-completion statements and how to bind them."""

    claim_sql: Any  # (limit) -> the claim statement for that batch size
    complete_sql: str
    claim_params: Any  # (owner, lease_ms, now, limit) -> params
    complete_params: Any  # (rows, now) -> params; rows are claim rows
    now: Any  # () -> the ``now`` parameter the engine would pass (None: the database clock)
    description: str
    #: A statement the engine runs before each claim (SQLite: is any lease expired? With none, the
    #: claim is the one statement above), bound with ``(now,)``; None when the claim is all of it.
    probe_sql: str | None = None


class SQLiteTarget(Target):
    engine = "sqlite"

    def __init__(self, workdir: str | None = None) -> None:
        self._own_dir = workdir is None
        self.dir = workdir or tempfile.mkdtemp(prefix="tenure-bench-")
        os.makedirs(self.dir, exist_ok=True)
        self._n = itertools.count()

    def fresh_url(self, label: str) -> str:
        path = os.path.join(self.dir, f"{label}-{os.getpid()}-{next(self._n)}.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        return f"sqlite:///{path}"

    @staticmethod
    def path(url: str) -> str:
        return url[len("sqlite:///"):]

    def discard(self, url: str) -> None:
        path = self.path(url)
        for suffix in ("", "-wal", "-shm"):
            try:
                os.remove(path + suffix)
            except FileNotFoundError:
                pass

    def raw(self, url: str) -> sqlite3.Connection:
        from tenure.engine.sqlite.engine import SQLiteEngine

        # The engine's own connection setup (WAL, synchronous, cache, busy timeout).
        return SQLiteEngine(url)._connect()

    def floor_statements(self, kinds: list[str]) -> FloorStatements:
        import json

        from tenure.engine.rows import TOKEN_INDEX
        from tenure.engine.sqlite import queries as Q
        from tenure.engine.sqlite.session import _claim_params, _claim_sql

        # What the engine runs for a worker over every queue when only 'default' exists.
        def claim_sql(limit: int) -> str:
            return _claim_sql(1, True, False)

        def claim_params(owner: str, lease_ms: int, now: int, limit: int) -> dict[str, Any]:
            return _claim_params(kinds, ["default"], owner, lease_ms, now, limit)

        def complete_params(rows: list[tuple], now: int) -> dict[str, Any]:
            return {"items": json.dumps([[r[0], r[TOKEN_INDEX], None] for r in rows]), "now": now}

        return FloorStatements(claim_sql, Q.COMPLETE, claim_params, complete_params,
                               lambda: time.time_ns() // 1_000_000,
                               "queries.ANY_EXPIRED + tenure.engine.sqlite.session._claim_sql(1 queue, by kind) "
                               "+ queries.COMPLETE", probe_sql=Q.ANY_EXPIRED)

    def versions(self) -> dict[str, Any]:
        url = self.fresh_url("versions")
        try:
            with self.connect(url) as conn:
                mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
                sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(
                    conn.execute("PRAGMA synchronous").fetchone()[0])
                probe = commit_probe(conn)
            from tenure.engine.sqlite.engine import SQLiteEngine

            durable = SQLiteEngine(url, durable=True)._connect()  # synchronous=FULL: fsync per commit
            try:
                full = commit_probe(durable)
            finally:
                durable.close()
        finally:
            self.discard(url)
        return {"sqlite": sqlite3.sqlite_version, "journal_mode": mode, "synchronous": sync, **probe,
                "durable_commit_p50_ms": full["commit_p50_ms"], "durable_commit_p90_ms": full["commit_p90_ms"]}

    def claim_plan(self, url: str, kinds: list[str]) -> list[str]:
        st = self.floor_statements(kinds)
        with self.connect(url) as conn:
            rows = conn.execute("EXPLAIN QUERY PLAN " + st.claim_sql(1),
                                st.claim_params("plan", 30_000, st.now(), 1)).fetchall()
        depth: dict[int, int] = {0: -1}
        lines = []
        for node, parent, _, detail in rows:
            depth[node] = depth.get(parent, -1) + 1
            lines.append("  " * depth[node] + detail)
        return lines

    def close(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


class PostgresTarget(Target):
    engine = "postgres"

    def __init__(self, url: str = DEFAULT_PG_URL) -> None:
        parts = urlsplit(url)
        dbname = parts.path.lstrip("/")
        if not dbname or dbname in FORBIDDEN_PG_DATABASES:
            raise SystemExit(f"refusing to benchmark in database {dbname!r}: use a database of the "
                             f"bench's own, e.g. {DEFAULT_PG_URL}")
        self.url = url
        self._ensure_database(parts, dbname)
        self._lock = self._claim_database(url, dbname)

    @staticmethod
    def _ensure_database(parts: Any, dbname: str) -> None:
        import psycopg
        from psycopg import sql

        admin = urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, parts.fragment))
        with psycopg.connect(admin, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone() is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))

    @staticmethod
    def _claim_database(url: str, dbname: str) -> Any:
        """This run's hold on the database: a session advisory lock, kept until :meth:`close` (or
        the process ends). Every run uses the one schema :data:`SCHEMA` and drops it afresh for
        each measurement, so two runs at once on one database would drop, fill and drain each
        other's tables (one run's worker claiming the other's jobs, its verification reading the
        other's rows); a second run is refused instead."""
        import psycopg

        conn = psycopg.connect(url, autocommit=True)
        got = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (f"tenure bench: {SCHEMA}",)).fetchone()
        if not got or not got[0]:
            conn.close()
            raise SystemExit(f"another bench run is using database {dbname!r} (schema {SCHEMA}); runs at the "
                             "same time would drop and drain each other's tables: give each its own "
                             "database (--pg-url or $TENURE_BENCH_PG_URL)")
        return conn

    def close(self) -> None:
        """Release the database for another run (see :meth:`_claim_database`)."""
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.close()

    def fresh_url(self, label: str) -> str:
        """A brand-new schema (:data:`SCHEMA`): new tables with no planner statistics and no
        dead rows left by an earlier run, so every measurement starts from the same state
        (TRUNCATE would keep the previous run's pg_statistic rows, and with them its plans)."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(SCHEMA)))
        parts = urlsplit(self.url)
        query = f"{parts.query}&schema={SCHEMA}" if parts.query else f"schema={SCHEMA}"
        return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))

    def discard(self, url: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))

    def analyze(self, url: str) -> None:
        """``ANALYZE tenure_jobs``: what autovacuum does on a default server after enough changes."""
        with self.connect(url) as conn:
            conn.execute("ANALYZE tenure_jobs")

    def raw(self, url: str):
        import psycopg

        from tenure.engine.postgres.engine import PostgresEngine

        eng = PostgresEngine(url)
        return psycopg.connect(eng.conninfo, autocommit=True, prepare_threshold=0)

    def floor_statements(self, kinds: list[str]) -> FloorStatements:
        from tenure.engine.postgres import queries as Q
        from tenure.engine.postgres.session import _claim_params, _claim_sql
        from tenure.engine.rows import TOKEN_INDEX

        takes_limit = "limit" in inspect.signature(_claim_sql).parameters

        def claim_sql(limit: int) -> str:
            # The engine writes the LIMIT into the statement (one prepared plan per batch size).
            return _claim_sql(kinds, None, limit=limit) if takes_limit else _claim_sql(kinds, None)

        def claim_params(owner: str, lease_ms: int, now: Any, limit: int) -> dict[str, Any]:
            return _claim_params(kinds, None, owner, lease_ms, now, limit)

        def complete_params(rows: list[tuple], now: Any) -> dict[str, Any]:
            return {"now": now, "ids": [r[0] for r in rows], "tokens": [r[TOKEN_INDEX] for r in rows],
                    "results": [None] * len(rows)}

        return FloorStatements(claim_sql, Q.COMPLETE, claim_params, complete_params, lambda: None,
                               "tenure.engine.postgres.session._claim_sql(kinds, any queue) + queries.COMPLETE")

    def versions(self) -> dict[str, Any]:
        import psycopg

        out: dict[str, Any] = {"psycopg": psycopg.__version__}
        url = self.fresh_url("versions")
        with self.connect(url) as conn:
            out["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
            for name in ("synchronous_commit", "fsync", "shared_buffers", "autovacuum", "jit"):
                out[name] = conn.execute(f"SHOW {name}").fetchone()[0]
            out.update(commit_probe(conn))
        self.discard(url)
        return out

    def claim_plan(self, url: str, kinds: list[str]) -> list[str]:
        """``EXPLAIN (ANALYZE, BUFFERS)`` of one real claim, rolled back (nothing is leased)."""
        import psycopg

        st = self.floor_statements(kinds)
        with self.connect(url) as conn:
            cur = psycopg.ClientCursor(conn)
            with conn.transaction(force_rollback=True):
                cur.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + st.claim_sql(1),
                            st.claim_params("plan", 30_000, st.now(), 1))
                return [r[0] for r in cur.fetchall()]


def make_target(engine: str, *, pg_url: str | None = None, workdir: str | None = None) -> Target:
    if engine == "sqlite":
        return SQLiteTarget(workdir)
    if engine == "postgres":
        return PostgresTarget(pg_url or os.environ.get("TENURE_BENCH_PG_URL") or DEFAULT_PG_URL)
    raise SystemExit(f"unknown engine {engine!r}: use sqlite or postgres")
