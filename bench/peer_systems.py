"""The systems ``python -m bench.peers`` measures, seen from the parent process: for tenure and for
each peer, how its store is made and filled, how its worker process is started (the peers' through
their drivers in ``bench/peer_drivers/``, under the peers' virtualenv), how its done and queued
jobs are counted from outside, and how a run is verified in its store."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import tenure
from tenure.cli.worker import default_concurrency

from .scenarios import Prepared
from .targets import Target, verify_store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVERS = os.path.join(ROOT, "bench", "peer_drivers")


def pg_connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True)


def reset_schema(url: str, schema: str, create: bool) -> None:
    from psycopg import sql

    with pg_connect(url) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        if create:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))


def analyze_schema(url: str, schema: str) -> None:
    """ANALYZE every table of ``schema`` (tenure's fill gets the same, see ``Prepared``)."""
    from psycopg import sql

    with pg_connect(url) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                             (schema,)).fetchall()]
        for t in tables:
            conn.execute(sql.SQL("ANALYZE {}.{}").format(sql.Identifier(schema), sql.Identifier(t)))


def with_search_path(url: str, schema: str) -> str:
    parts = urlsplit(url)
    opt = "options=" + quote(f"-c search_path={schema}")
    query = f"{parts.query}&{opt}" if parts.query else opt
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def run_driver(argv: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> dict[str, Any]:
    """Run a driver to completion; answers the JSON of its last stdout line."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check(ver: dict[str, Any], name: str, observed: Any, expected: Any) -> None:
    ver["checks"][name] = observed
    if observed != expected:
        ver["ok"] = False
        ver["failures"].append(f"{name}: observed {observed!r}, expected {expected!r}")


def new_verification() -> dict[str, Any]:
    return {"ok": True, "checks": {}, "failures": []}


class System:
    """One queue on one engine: how to fill its store, start its worker, poll and verify it."""

    name: str
    engine: str

    def settings(self) -> str:
        raise NotImplementedError

    def prepare(self, n: int) -> dict[str, Any]:
        """A fresh store with ``n`` queued no-op jobs (untimed); answers what the fill reported."""
        raise NotImplementedError

    def command(self) -> tuple[list[str], dict[str, str] | None]:
        """The worker process (argv, environment) for the store :meth:`prepare` made."""
        raise NotImplementedError

    def done(self) -> int:
        """Jobs recorded as done in the system's own store right now."""
        raise NotImplementedError

    def report(self, stdout: str) -> dict[str, Any]:
        """The worker's own report after it stopped (its last stdout line, by default)."""
        lines = stdout.strip().splitlines()
        return json.loads(lines[-1]) if lines else {}

    def verify(self, n: int, report: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    #: Measured one by one and for latency too (bench/peers_calls.py).
    calls = True

    def prepare_empty(self) -> None:
        """A fresh store with no job (for bench/peers_calls.py)."""
        self.prepare(0)

    def calls_argv(self, cmd: str, *args: str) -> tuple[list[str], dict[str, str] | None]:
        """The process (argv, environment) of a ``peers_calls`` command on the prepared store."""
        raise NotImplementedError

    def lwork_args(self) -> tuple[str, ...]:
        """The latency worker's settings: the drain's."""
        raise NotImplementedError

    def queued(self) -> int:
        """Jobs waiting in the system's own store right now."""
        raise NotImplementedError

    def discard(self) -> None:
        """Close the poll connection and drop the store."""

    def close(self) -> None:
        """After the last run."""

    @property
    def label(self) -> str:
        return self.name


def _check_handler(ver: dict[str, Any], n: int, report: dict[str, Any]) -> None:
    check(ver, "handler_calls", report.get("handled"), n)
    check(ver, "handler_distinct_jobs", report.get("distinct"), n)


class Tenure(System):
    name = "tenure"

    def __init__(self, target: Target, concurrency: int, durable: bool = False, defaults: bool = False) -> None:
        self.target = target
        self.engine = target.engine
        self.concurrency = concurrency
        self.durable = durable
        #: the drain runs at ``tenure worker``'s default settings (its default --concurrency)
        self.cli_defaults = concurrency == default_concurrency(target.engine)
        self.defaults = defaults
        self.prepared = Prepared(target, analyze=True)
        self.calls = not durable and not defaults
        self.url = ""
        self.ids: list[str] = []
        self.poll: Any = None
        fd, self.out = tempfile.mkstemp(prefix="tenure-peers-", suffix=".json")
        os.close(fd)

    @property
    def label(self) -> str:
        if self.defaults:
            return "tenure (defaults)"
        return "tenure (durable)" if self.durable else "tenure"

    def settings(self) -> str:
        conc = f"concurrency={self.concurrency}" + (" (tenure worker's default)" if self.cli_defaults else "")
        if self.engine == "sqlite":
            sync = "FULL" if self.durable else "NORMAL"
            return f"{conc}; WAL, synchronous={sync}"
        return f"{conc}; psycopg 3"

    def prepare(self, n: int) -> dict[str, Any]:
        open(self.out, "w").close()  # the worker writes its report here; never read a stale one
        t0 = time.perf_counter()
        self.url, self.ids = self.prepared.store("peers-drain", n)
        secs = time.perf_counter() - t0
        self.poll = self.target.raw(self.url)
        out = {"enqueued": n, "fill_seconds": round(secs, 3)}
        if self.prepared.last_enqueue_seconds is not None:  # PostgreSQL: filled afresh each run
            out["enqueue_seconds"] = round(self.prepared.last_enqueue_seconds, 4)
        return out

    def command(self) -> tuple[list[str], dict[str, str] | None]:
        url = self.url + ("?durable=true" if self.durable else "")
        return [sys.executable, "-m", "bench.child", "drain", url, str(len(self.ids)), str(self.concurrency),
                self.out], None

    def done(self) -> int:
        return int(self.poll.execute("SELECT count(*) FROM tenure_jobs WHERE state = 'done'").fetchone()[0])

    def prepare_empty(self) -> None:
        open(self.out, "w").close()
        self.url, self.ids = self.target.fresh_url("peers-calls"), []
        with tenure.connect(self.url) as st:
            st.jobs.counts()  # the schema is made (migrated) before the clock starts
        self.poll = self.target.raw(self.url)

    def calls_argv(self, cmd: str, *args: str) -> tuple[list[str], dict[str, str] | None]:
        return [sys.executable, "-m", "bench.peer_tenure", cmd, self.url, *args], None

    def lwork_args(self) -> tuple[str, ...]:
        return (str(self.concurrency),)

    def queued(self) -> int:
        return int(self.poll.execute("SELECT count(*) FROM tenure_jobs WHERE state = 'pending'").fetchone()[0])

    def report(self, stdout: str) -> dict[str, Any]:
        with open(self.out) as f:
            return json.load(f)

    def verify(self, n: int, report: dict[str, Any]) -> dict[str, Any]:
        ver = verify_store(self.poll, done=n, handled_ids=report.get("ids", []), enqueued_ids=self.ids)
        ver.check("worker_reported_drained", report.get("ok"), True)
        out = ver.as_dict()
        out["done"] = ver.checks.get("rows_per_state", {}).get("done", 0)
        return out

    def discard(self) -> None:
        if self.poll is not None:
            self.poll.close()
            self.poll = None
        if self.url:
            self.target.discard(self.url)
            self.url = ""

    def close(self) -> None:
        self.prepared.close()
        if os.path.exists(self.out):
            os.remove(self.out)


class _PgPeer(System):
    """A peer on PostgreSQL, in its own schema of the peers' database."""

    engine = "postgres"
    schema: str
    driver: str

    def __init__(self, pg_url: str, python: str) -> None:
        self.pg_url = pg_url
        self.python = python
        self.poll: Any = None
        self.versions: dict[str, Any] = {}

    def driver_argv(self, *args: str) -> list[str]:
        return [self.python, os.path.join(DRIVERS, self.driver), *args]

    def env(self) -> dict[str, str] | None:
        return None

    def fill(self, n: int) -> dict[str, Any]:
        raise NotImplementedError

    def prepare(self, n: int) -> dict[str, Any]:
        reset_schema(self.pg_url, self.schema, create=self.create_schema)
        info = self.fill(n)
        analyze_schema(self.pg_url, self.schema)
        self.versions = info.pop("versions", {})
        self.poll = pg_connect(self.pg_url)
        return info

    create_schema = True

    def discard(self) -> None:
        if self.poll is not None:
            self.poll.close()
            self.poll = None
        reset_schema(self.pg_url, self.schema, create=False)


class PgQueuer(_PgPeer):
    name = "pgqueuer"
    schema = "peers_pgqueuer"
    driver = "pgqueuer_driver.py"
    create_schema = False  # pgqueuer's install creates PGQUEUER_SCHEMA itself

    def __init__(self, pg_url: str, python: str, batch_size: int, pool_size: int) -> None:
        super().__init__(pg_url, python)
        self.batch_size = batch_size
        self.pool_size = pool_size

    def settings(self) -> str:
        return (f"QueueManager.run(batch_size={self.batch_size}), no task cap; asyncpg pool {self.pool_size}; "
                f"uvloop; durability=durable")

    def env(self) -> dict[str, str] | None:
        return {**os.environ, "PGQUEUER_SCHEMA": self.schema}

    def fill(self, n: int) -> dict[str, Any]:
        return run_driver(self.driver_argv("setup", self.pg_url, str(n)), env=self.env())

    def command(self) -> tuple[list[str], dict[str, str] | None]:
        return self.driver_argv("work", self.pg_url, str(self.batch_size), str(self.pool_size)), self.env()

    def done(self) -> int:
        return int(self.poll.execute(f"SELECT count(*) FROM {self.schema}.pgqueuer_log "
                                     "WHERE status = 'successful'").fetchone()[0])

    def calls_argv(self, cmd: str, *args: str) -> tuple[list[str], dict[str, str] | None]:
        return self.driver_argv(cmd, self.pg_url, *args), self.env()

    def lwork_args(self) -> tuple[str, ...]:
        return (str(self.batch_size), str(self.pool_size))

    def queued(self) -> int:
        return int(self.poll.execute(f"SELECT count(*) FROM {self.schema}.pgqueuer "
                                     "WHERE status = 'queued'").fetchone()[0])

    def verify(self, n: int, report: dict[str, Any]) -> dict[str, Any]:
        ver = new_verification()
        ok_rows, ok_ids = self.poll.execute(
            f"SELECT count(*), count(DISTINCT job_id) FROM {self.schema}.pgqueuer_log "
            "WHERE status = 'successful'").fetchone()
        picked = self.poll.execute(f"SELECT count(*) FROM {self.schema}.pgqueuer_log "
                                   "WHERE status = 'picked'").fetchone()[0]
        bad = self.poll.execute(f"SELECT count(*) FROM {self.schema}.pgqueuer_log "
                                "WHERE status NOT IN ('queued', 'picked', 'successful')").fetchone()[0]
        left = self.poll.execute(f"SELECT count(*) FROM {self.schema}.pgqueuer").fetchone()[0]
        check(ver, "successful_log_rows", ok_rows, n)
        check(ver, "successful_distinct_jobs", ok_ids, n)
        check(ver, "picked_log_rows", picked, n)  # each job dequeued once
        check(ver, "other_final_log_rows", bad, 0)
        check(ver, "rows_left_in_queue", left, 0)
        _check_handler(ver, n, report)
        ver["done"] = ok_ids
        return ver


class Procrastinate(_PgPeer):
    name = "procrastinate"
    schema = "peers_procrastinate"
    driver = "procrastinate_driver.py"

    def __init__(self, pg_url: str, python: str, concurrency: int, pool_size: int) -> None:
        super().__init__(pg_url, python)
        self.concurrency = concurrency
        self.pool_size = pool_size
        self.conninfo = with_search_path(pg_url, self.schema)

    def settings(self) -> str:
        return (f"run_worker_async(concurrency={self.concurrency}), async task, listen_notify; "
                f"psycopg pool {self.pool_size}")

    def fill(self, n: int) -> dict[str, Any]:
        return run_driver(self.driver_argv("setup", self.conninfo, str(n)))

    def command(self) -> tuple[list[str], dict[str, str] | None]:
        return self.driver_argv("work", self.conninfo, str(self.concurrency), str(self.pool_size)), None

    def done(self) -> int:
        return int(self.poll.execute(f"SELECT count(*) FROM {self.schema}.procrastinate_jobs "
                                     "WHERE status = 'succeeded'").fetchone()[0])

    def calls_argv(self, cmd: str, *args: str) -> tuple[list[str], dict[str, str] | None]:
        return self.driver_argv(cmd, self.conninfo, *args), None

    def lwork_args(self) -> tuple[str, ...]:
        return (str(self.concurrency), str(self.pool_size))

    def queued(self) -> int:
        return int(self.poll.execute(f"SELECT count(*) FROM {self.schema}.procrastinate_jobs "
                                     "WHERE status = 'todo'").fetchone()[0])

    def verify(self, n: int, report: dict[str, Any]) -> dict[str, Any]:
        ver = new_verification()
        states = dict(self.poll.execute(f"SELECT status::text, count(*) FROM {self.schema}.procrastinate_jobs "
                                        "GROUP BY status").fetchall())
        distinct = self.poll.execute(f"SELECT count(DISTINCT args) FROM {self.schema}.procrastinate_jobs "
                                     "WHERE status = 'succeeded'").fetchone()[0]
        check(ver, "rows_per_status", states, {"succeeded": n})
        check(ver, "succeeded_distinct_jobs", distinct, n)
        _check_handler(ver, n, report)
        ver["done"] = states.get("succeeded", 0)
        return ver


class Huey(System):
    name = "huey"
    engine = "sqlite"
    driver = "huey_driver.py"

    def __init__(self, workdir: str, python: str, workers: int) -> None:
        self.path = os.path.join(workdir, "huey.db")
        self.python = python
        self.workers = workers
        self.poll: sqlite3.Connection | None = None
        self.versions: dict[str, Any] = {}

    def settings(self) -> str:
        return (f"consumer -w {self.workers} -k thread; SqliteHuey defaults (WAL, synchronous=FULL), "
                "store_none=True (the result row is the done record)")

    def _remove(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.remove(self.path + suffix)
            except FileNotFoundError:
                pass

    def prepare(self, n: int) -> dict[str, Any]:
        self._remove()
        info = run_driver([self.python, os.path.join(DRIVERS, self.driver), "setup", self.path, str(n)])
        self.versions = info.pop("versions", {})
        self.poll = sqlite3.connect(self.path, isolation_level=None)
        return info

    def command(self) -> tuple[list[str], dict[str, str] | None]:
        return [self.python, os.path.join(DRIVERS, self.driver), "work", self.path, str(self.workers)], None

    def done(self) -> int:
        assert self.poll is not None
        return int(self.poll.execute("SELECT count(*) FROM kv").fetchone()[0])

    def calls_argv(self, cmd: str, *args: str) -> tuple[list[str], dict[str, str] | None]:
        return [self.python, os.path.join(DRIVERS, self.driver), cmd, self.path, *args], None

    def lwork_args(self) -> tuple[str, ...]:
        return (str(self.workers),)

    def queued(self) -> int:
        assert self.poll is not None
        return int(self.poll.execute("SELECT count(*) FROM task").fetchone()[0])

    def verify(self, n: int, report: dict[str, Any]) -> dict[str, Any]:
        assert self.poll is not None
        ver = new_verification()
        results = self.poll.execute("SELECT count(*), count(DISTINCT key) FROM kv").fetchone()
        left = self.poll.execute("SELECT count(*) FROM task").fetchone()[0]
        check(ver, "result_rows", results[0], n)
        check(ver, "result_distinct_tasks", results[1], n)
        check(ver, "rows_left_in_queue", left, 0)
        _check_handler(ver, n, report)
        ver["done"] = results[1]
        return ver

    def discard(self) -> None:
        if self.poll is not None:
            self.poll.close()
            self.poll = None
        self._remove()
