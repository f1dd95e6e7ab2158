"""Peer comparison: how fast one worker process drains N queued no-op jobs, for tenure and for
other Python job queues, measured on this machine in the same run.

    python -m bench.peers [--jobs 20000] [--repeat 3] [--peers tenure,pgqueuer,huey,procrastinate]
                          [--measure drain,enqueue1,latency,bulk] [--json PATH]

Every system is measured the same way. Its store is made afresh and N no-op jobs are queued
(untimed; PostgreSQL tables are then ANALYZEd, as autovacuum would have by the time a real queue
is that deep). ONE worker process is started and gets ready (imports, connections). The clock
starts when this process tells it to go and stops when this process, polling the system's own
store from outside, first sees all N jobs recorded as done there: tenure's rows in state
``done``; pgqueuer's ``successful`` rows in ``pgqueuer_log``; huey's result rows in ``kv``;
procrastinate's ``succeeded`` rows. The poll sleeps half the time the observed rate says is
left (at least 2 ms, at most 250 ms), so it costs a few queries per run and the end is seen
within a few ms. Then the worker is stopped gracefully and each run is verified: N jobs done
in the store, nothing left queued or failed, and the worker's handler ran exactly N times on N
distinct jobs (for tenure: :func:`bench.targets.verify_store`, every row claimed exactly once).
The worker process's CPU time (all threads, from ``/proc``) over the timed span is reported too;
the database server's is not. Repetitions run round-robin over the systems; the median is
reported.

Beside each drain, every system's one-by-one enqueue and its enqueue-to-start latency across
processes are measured the same way for all (``--measure``; see ``bench/peers_calls.py``), and
tenure's ratios to pgqueuer are printed for those targets too. ``--measure bulk`` (without
``drain``) times each system's fill alone: the same fill as a drain's (tenure: ``enqueue_many``
in batches of 10 000; pgqueuer: ``Queries.enqueue`` in chunks of 10 000; N jobs, commits
included), verified as N jobs queued in the store, and no drain after it.

The systems (their settings are in the table and the JSON):

* tenure, SQLite and PostgreSQL: ``python -m bench.child drain`` (one worker at ``tenure worker``'s
  default concurrency for the engine: 64 on SQLite, 256 on PostgreSQL), over stores filled by
  :class:`bench.scenarios.Prepared`. On SQLite also with ``durable=true`` (synchronous=FULL), the
  durability huey runs with by default.
* pgqueuer (PostgreSQL): one ``QueueManager`` with a bulk dequeue batch over an asyncpg pool.
* huey (SQLite): ``SqliteHuey`` with its consumer's thread workers.
* procrastinate (PostgreSQL, psycopg 3): one worker with concurrent async jobs.

The peers are installed, at pinned versions, into their own virtualenv (``bench/.peers-venv``,
made on first use with ``python -m venv`` and pip from PyPI) and run from there, so the
project's environment never sees them; their small drivers are in ``bench/peer_drivers/``.
PostgreSQL: the ``tenure_peers`` database (created if missing; never ``test`` or
``tenure_bench``), one schema per system, dropped and made afresh for every run.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import tenure
from tenure.cli.worker import default_concurrency

from . import machine
from .peer_process import stderr_tail, worker_process
from .peers_calls import measure_enqueue_one, measure_latency, summarize_calls
from .scenarios import Prepared
from .targets import PostgresTarget, SQLiteTarget, Target, verify_store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
DRIVERS = os.path.join(BENCH, "peer_drivers")
DEFAULT_VENV = os.path.join(BENCH, ".peers-venv")
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/tenure_peers"
#: Databases this bench never touches: the test suites' and the main suite's.
FORBIDDEN_DATABASES = frozenset({"test", "tenure_bench", "postgres", "template0", "template1"})

#: What goes into the peers' virtualenv (PyPI, pinned).
PINS = (
    "pgqueuer==1.6.0",
    "asyncpg==0.32.0",
    "uvloop==0.23.0",
    "huey==3.5.4",
    "procrastinate==3.10.0",
    "psycopg[binary]==3.3.9",
    "psycopg-pool==3.3.3",
)
ALL_PEERS = ("tenure", "pgqueuer", "huey", "procrastinate")
#: What is measured of each system: its drain (above), its one-by-one enqueue and its latency
#: (bench/peers_calls.py).
MEASURES = ("drain", "enqueue1", "latency", "bulk")
#: The measures run when --measure is not given (``bulk`` alone fills and verifies without a
#: drain; with ``drain`` every drain's fill already reports the bulk rate).
DEFAULT_MEASURES = ("drain", "enqueue1", "latency")
#: tenure's drains run at ``tenure worker``'s default concurrency for each engine (None) unless
#: --tenure-concurrency says otherwise (then a run at the defaults is added on PostgreSQL, for the
#: target).
TENURE_CONCURRENCY: int | None = None

POLL_MIN_S = 0.002
POLL_MAX_S = 0.25
#: How long a worker may take to import, connect and say it is ready.
READY_TIMEOUT_S = 120.0


# -- the peers' virtualenv ------------------------------------------------------------------------


def venv_python(venv: str) -> str:
    return os.path.join(venv, "bin", "python")


def ensure_venv(venv: str, log: Any = print) -> None:
    """Make ``venv`` (if missing) and install :data:`PINS` into it (unless it already has them:
    the installed pin list is kept in ``venv/.pins``)."""
    marker = os.path.join(venv, ".pins")
    wanted = "\n".join(PINS) + "\n"
    if os.path.exists(marker) and open(marker).read() == wanted and os.path.exists(venv_python(venv)):
        return
    if not os.path.exists(venv_python(venv)):
        log(f"creating the peers' virtualenv {venv}")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    log(f"installing {' '.join(PINS)}")
    subprocess.run([venv_python(venv), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PINS],
                   check=True)
    with open(marker, "w") as f:
        f.write(wanted)


# -- helpers --------------------------------------------------------------------------------------


def proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid``, every thread (Linux ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


# -- the systems ----------------------------------------------------------------------------------


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


# -- one measurement ------------------------------------------------------------------------------


def wait_done(system: System, n: int, t0: float, timeout: float) -> tuple[int, float | None, int]:
    """Poll the store until it shows ``n`` done jobs; answers (done, seconds or None on timeout,
    polls). The end time is taken just before the query that first sees all ``n``."""
    polls = 0
    while True:
        at = time.perf_counter()
        done = system.done()
        polls += 1
        elapsed = at - t0
        if done >= n:
            return done, elapsed, polls
        if elapsed > timeout:
            return done, None, polls
        rate = done / elapsed if done and elapsed > 0 else 0.0
        pause = (n - done) / rate / 2 if rate else 0.05
        time.sleep(min(POLL_MAX_S, max(POLL_MIN_S, pause)))


def measure(system: System, n: int) -> dict[str, Any]:
    """One drain of ``n`` queued jobs by one worker process; see the module docstring."""
    fill = system.prepare(n)
    timeout = max(120.0, n / 50)
    argv, env = system.command()
    with worker_process(system, argv, env, ROOT) as (proc, stderr):
        assert proc.stdin is not None and proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
        line = proc.stdout.readline() if ready else "(no answer in time)"
        if line.strip() != "ready":
            proc.kill()
            proc.wait(timeout=30)
            raise RuntimeError(f"{system.label} worker did not start: {line!r} {stderr_tail(stderr)}")
        cpu0 = proc_cpu_seconds(proc.pid)
        t0 = time.perf_counter()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        done, secs, polls = wait_done(system, n, t0, timeout)
        cpu1 = proc_cpu_seconds(proc.pid)
        stdout, _ = proc.communicate("stop\n", timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{system.label} worker exited {proc.returncode}: {stderr_tail(stderr)}")
        report = system.report(stdout)
        ver = system.verify(n, report)
    if secs is None:
        ver["ok"] = False
        ver["failures"].append(f"timed out after {timeout:.0f} s with {done} of {n} done")
    cpu = (cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else None
    out: dict[str, Any] = {
        "jobs": n, "seconds": round(secs, 4) if secs else None,
        "jobs_per_s": round(n / secs, 1) if secs else 0.0,
        "worker_cpu_us_per_job": round(cpu / n * 1e6, 1) if cpu is not None else None,
        "polls": polls, "fill": fill, "verified": ver}
    if "jobs_per_s" in report:  # tenure's worker times itself too (worker.start to its last settlement)
        out["worker_own_jobs_per_s"] = round(report["jobs_per_s"], 1)
    return out


def measure_bulk(system: System, n: int) -> dict[str, Any]:
    """One fill of ``n`` jobs (the system's bulk enqueue, timed by the fill itself, see
    :meth:`System.prepare`) with no drain after it; verified: ``n`` jobs queued in the store."""
    try:
        fill = system.prepare(n)
        queued = system.queued()
    finally:
        system.discard()
    ver: dict[str, Any] = {"ok": True, "failures": [], "checks": {}}
    check(ver, "queued_after_fill", queued, n)
    return {"fill": fill, "verified": ver}


def summarize(system: System, runs: list[dict[str, Any]], calls: dict[str, Any] | None = None,
              fills: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    rates = [r["jobs_per_s"] for r in runs]
    median = statistics.median(rates) if rates else None
    calls = calls or summarize_calls([], [])
    cpus = [r["worker_cpu_us_per_job"] for r in runs if r["worker_cpu_us_per_job"] is not None]
    failures = [f for r in runs for f in r["verified"]["failures"]]
    fills = fills or []
    failures_bulk = [f for r in fills for f in r["verified"]["failures"]]
    bulk = [r["fill"]["enqueued"] / r["fill"]["enqueue_seconds"] for r in [*runs, *fills]
            if (r.get("fill") or {}).get("enqueue_seconds")]
    return {
        "system": system.label, "engine": system.engine, "settings": system.settings(),
        "jobs_per_s": None if median is None else round(median, 1), "jobs_per_s_all": rates,
        "bulk_enqueue_rows_per_s": round(statistics.median(bulk), 1) if bulk else None,
        "cli_defaults": getattr(system, "cli_defaults", False),
        "bulk_enqueue_rows_per_s_all": [round(b, 1) for b in bulk],
        "seconds_all": [r["seconds"] for r in runs],
        "worker_cpu_us_per_job": round(statistics.median(cpus), 1) if cpus else None,
        "verified": {"ok": not failures and not failures_bulk and not calls["calls_failures"]
                     and (bool(runs) or bool(fills) or bool(calls.get("measured"))),
                     "done_per_run": [r["verified"].get("done") for r in runs],
                     "failures": failures + failures_bulk + calls["calls_failures"]},
        "runs": runs,
        **{k: v for k, v in calls.items() if k != "calls_failures"},
    }


# -- the table ------------------------------------------------------------------------------------


def render(out: dict[str, Any]) -> str:
    n = out["config"]["jobs"]
    head = ("system", "engine", "jobs/s", "runs (jobs/s)", "CPU us/job", "bulk enqueue rows/s", "1-by-1 enq/s",
            "CPU us/enq", "latency p50/p99 ms", "verified", "settings")
    rows = [head]

    def num(x: Any, fmt: str = "{:,.0f}") -> str:
        return "-" if x is None else fmt.format(x)

    for r in out["results"]:
        done = r["verified"]["done_per_run"]
        ok = "ok" if r["verified"]["ok"] else "FAILED"
        lat = ("-" if r.get("latency_p50_ms") is None
               else f"{r['latency_p50_ms']:.2f} / {r['latency_p99_ms']:.2f}")
        drained = f"{min(done, default=0) if None not in done else '?'}/{n}" if done else "-"
        rows.append((r["system"], r["engine"], num(r["jobs_per_s"]),
                     " ".join(f"{x:,.0f}" for x in r["jobs_per_s_all"]) or "-",
                     num(r["worker_cpu_us_per_job"]), num(r.get("bulk_enqueue_rows_per_s") or None),
                     num(r.get("enqueue_one_per_s")), num(r.get("enqueue_one_cpu_us")), lat,
                     f"{drained} {ok}", r["settings"]))
    for name, err in out.get("errors", {}).items():
        rows.append((name, "-", "-", "-", "-", "-", "-", "-", "-", "ERROR", err[:200]))
    rows_text = _table(rows, head)
    return rows_text + "\n" + "\n".join(ratio_lines(out))


#: targets against pgqueuer, measured in the same run: (what, tenure system label,
#: the result field, at least this many times pgqueuer's).
RATIO_TARGETS = (
    ("drain, tenure worker's default settings", "tenure (defaults)", "jobs_per_s", 1.5),
    ("drain, best settings", "tenure", "jobs_per_s", 1.5),
    ("bulk enqueue", "tenure", "bulk_enqueue_rows_per_s", 2.0),
    ("enqueue one by one", "tenure", "enqueue_one_per_s", 1.2),
)


def ratio_lines(out: dict[str, Any]) -> list[str]:
    """tenure (PostgreSQL) against pgqueuer in this run, each ratio with its target."""
    pg = {r["system"]: r for r in out["results"] if r["engine"] == "postgres"}
    for r in out["results"]:  # the run at tenure worker's defaults, whatever its label
        if r["engine"] == "postgres" and r.get("cli_defaults"):
            pg.setdefault("tenure (defaults)", r)
    base = pg.get("pgqueuer")
    if base is None:
        return []
    lines = ["ratios to pgqueuer (PostgreSQL, this run):"]
    for what, label, field_name, want in RATIO_TARGETS:
        row = pg.get(label) or {}
        mine, theirs = row.get(field_name), base.get(field_name)
        if not mine or not theirs:
            lines.append(f"  [not measured] {what} >= {want}x")
            continue
        ratio = mine / theirs
        verdict = "met" if ratio >= want else "NOT MET"
        lines.append(f"  [{verdict}] {what} ({row['system']}): {mine:,.0f} / {theirs:,.0f} = {ratio:.2f}x "
                     f"(target >= {want}x)")
    mine, theirs = (pg.get("tenure") or {}), base
    if mine.get("latency_p50_ms") is not None and theirs.get("latency_p50_ms") is not None:
        p50, p99, their50 = mine["latency_p50_ms"], mine["latency_p99_ms"], theirs["latency_p50_ms"]
        lines.append(f"  [{'met' if p50 < their50 else 'NOT MET'}] latency p50 below pgqueuer's: "
                     f"{p50:.2f} vs {their50:.2f} ms")
        lines.append(f"  [{'met' if p99 <= 2 * p50 else 'NOT MET'}] latency p99 <= 2x p50 (tenure): "
                     f"{p99:.2f} / {p50:.2f} = {p99 / p50:.2f}x")
    else:
        lines.append("  [not measured] latency p50 below pgqueuer's, p99 <= 2x p50")
    return lines


def _table(rows: list[tuple], head: tuple) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head) - 1)]
    lines = []
    for i, row in enumerate(rows):
        cells = [str(c).rjust(w) if 2 <= j <= 8 else str(c).ljust(w) for j, (c, w) in enumerate(zip(row, widths, strict=False))]
        lines.append("  ".join([*cells, str(row[-1])]))
        if i == 0:
            lines.append("  ".join(["-" * w for w in widths] + ["-" * 8]))
    return "\n".join(lines)


# -- main -----------------------------------------------------------------------------------------


@dataclass
class Options:
    jobs: int = 20_000
    repeat: int = 1
    peers: list[str] = field(default_factory=lambda: list(ALL_PEERS))
    engines: list[str] = field(default_factory=lambda: ["sqlite", "postgres"])
    pg_url: str = DEFAULT_PG_URL
    venv: str = DEFAULT_VENV
    tenure_concurrency: int | None = TENURE_CONCURRENCY
    pgqueuer_batch_size: int = 100
    pgqueuer_pool: int = 10
    huey_workers: int = 8
    procrastinate_concurrency: int = 64
    procrastinate_pool: int = 10
    measure: list[str] = field(default_factory=lambda: list(DEFAULT_MEASURES))
    enqueue_jobs: int = 2_000
    latency_jobs: int = 200
    latency_gap_ms: float = 20.0


def parser() -> argparse.ArgumentParser:
    d = Options()
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=d.jobs, help=f"jobs queued and drained per run ({d.jobs})")
    p.add_argument("--repeat", type=int, default=d.repeat, help="runs of each system; the median is reported")
    p.add_argument("--engines", default="sqlite,postgres",
                   help="only the systems on these engines (default sqlite,postgres)")
    p.add_argument("--peers", default=",".join(ALL_PEERS),
                   help=f"comma-separated subset of {','.join(ALL_PEERS)} (default all)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON here")
    p.add_argument("--pg-url", default=os.environ.get("TENURE_PEERS_PG_URL", d.pg_url),
                   help=f"PostgreSQL database for every PostgreSQL system (default {d.pg_url})")
    p.add_argument("--venv", default=d.venv, help="the peers' virtualenv (made and filled if missing)")
    p.add_argument("--tenure-concurrency", type=int, default=d.tenure_concurrency,
                   help="tenure's worker slots (default: tenure worker's default for each engine)")
    p.add_argument("--pgqueuer-batch-size", type=int, default=d.pgqueuer_batch_size)
    p.add_argument("--pgqueuer-pool", type=int, default=d.pgqueuer_pool, help="asyncpg pool size")
    p.add_argument("--huey-workers", type=int, default=d.huey_workers, help="consumer thread workers")
    p.add_argument("--procrastinate-concurrency", type=int, default=d.procrastinate_concurrency)
    p.add_argument("--procrastinate-pool", type=int, default=d.procrastinate_pool, help="psycopg pool size")
    p.add_argument("--measure", default=",".join(DEFAULT_MEASURES),
                   help=f"comma-separated subset of {','.join(MEASURES)} (default {','.join(DEFAULT_MEASURES)}; "
                        "bulk: each system's fill alone, no drain)")
    p.add_argument("--enqueue-jobs", type=int, default=d.enqueue_jobs,
                   help=f"jobs enqueued one call each per run ({d.enqueue_jobs})")
    p.add_argument("--latency-jobs", type=int, default=d.latency_jobs,
                   help=f"latency samples per run ({d.latency_jobs})")
    p.add_argument("--latency-gap-ms", type=float, default=d.latency_gap_ms,
                   help=f"ms between the latency run's enqueues, every system alike ({d.latency_gap_ms})")
    return p


def options_from(args: argparse.Namespace) -> Options:
    peers = [x.strip() for x in args.peers.split(",") if x.strip()]
    bad = [x for x in peers if x not in ALL_PEERS]
    if bad or not peers:
        raise SystemExit(f"unknown peers {bad or args.peers!r}; choose from {', '.join(ALL_PEERS)}")
    engines = [x.strip() for x in args.engines.split(",") if x.strip()]
    if not engines or any(e not in ("sqlite", "postgres") for e in engines):
        raise SystemExit(f"--engines takes sqlite, postgres or both, got {args.engines!r}")
    if args.jobs < 1 or args.repeat < 1:
        raise SystemExit("--jobs and --repeat must be at least 1")
    measure = [x.strip() for x in args.measure.split(",") if x.strip()]
    if not measure or any(m not in MEASURES for m in measure):
        raise SystemExit(f"--measure takes a subset of {','.join(MEASURES)}, got {args.measure!r}")
    if args.enqueue_jobs < 2 or args.latency_jobs < 1 or args.latency_gap_ms < 0:
        raise SystemExit("--enqueue-jobs must be at least 2, --latency-jobs at least 1, --latency-gap-ms >= 0")
    dbname = urlsplit(args.pg_url).path.lstrip("/")
    if not dbname or dbname in FORBIDDEN_DATABASES:
        raise SystemExit(f"refusing to use database {dbname!r}: use one of this bench's own, e.g. {DEFAULT_PG_URL}")
    return Options(jobs=args.jobs, repeat=args.repeat, peers=peers, engines=engines, pg_url=args.pg_url,
                   venv=os.path.abspath(args.venv), tenure_concurrency=args.tenure_concurrency,
                   pgqueuer_batch_size=args.pgqueuer_batch_size, pgqueuer_pool=args.pgqueuer_pool,
                   huey_workers=args.huey_workers, procrastinate_concurrency=args.procrastinate_concurrency,
                   procrastinate_pool=args.procrastinate_pool, measure=measure, enqueue_jobs=args.enqueue_jobs,
                   latency_jobs=args.latency_jobs, latency_gap_ms=args.latency_gap_ms)


def build_systems(opt: Options, workdir: str) -> tuple[list[System], list[Target]]:
    """The systems to measure, in table order, and the tenure targets behind them (whose
    ``versions()`` describe the engines: SQLite's settings, the PostgreSQL server's)."""
    needs_pg = "postgres" in opt.engines and any(p in opt.peers for p in ("tenure", "pgqueuer", "procrastinate"))
    pg_target = PostgresTarget(opt.pg_url) if needs_pg else None  # creates the database if missing
    python = venv_python(opt.venv)
    systems: list[System] = []
    targets: list[Target] = [pg_target] if pg_target is not None else []
    if "tenure" in opt.peers:
        sq = SQLiteTarget(os.path.join(workdir, "tenure"))
        targets.insert(0, sq)
        sq_conc = opt.tenure_concurrency or default_concurrency("sqlite")
        systems.append(Tenure(sq, sq_conc))
        systems.append(Tenure(sq, sq_conc, durable=True))
        if pg_target is not None:
            pg_default = default_concurrency("postgres")
            systems.append(Tenure(pg_target, opt.tenure_concurrency or pg_default))
            if opt.tenure_concurrency not in (None, pg_default):  # else that run is the defaults' run
                systems.append(Tenure(pg_target, pg_default, defaults=True))
    if "huey" in opt.peers:
        systems.append(Huey(workdir, python, opt.huey_workers))
    if "pgqueuer" in opt.peers:
        systems.append(PgQueuer(opt.pg_url, python, opt.pgqueuer_batch_size, opt.pgqueuer_pool))
    if "procrastinate" in opt.peers:
        systems.append(Procrastinate(opt.pg_url, python, opt.procrastinate_concurrency, opt.procrastinate_pool))
    systems = [s for s in systems if s.engine in opt.engines]
    return systems, targets


def versions(systems: list[System], targets: list[Target]) -> dict[str, Any]:
    out: dict[str, Any] = {"python": sys.version.split()[0]}
    for s in systems:
        out.update(getattr(s, "versions", {}) or {})
    for t in targets:
        try:
            out[f"tenure_{t.engine}"] = t.versions()
        except Exception as exc:  # noqa: BLE001 - the numbers are still worth keeping
            out[f"tenure_{t.engine}"] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    opt = options_from(args)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if any(p != "tenure" for p in opt.peers):
        ensure_venv(opt.venv, log)
    out: dict[str, Any] = {
        "machine": machine.describe(),
        "command": "python -m bench.peers " + " ".join(sys.argv[1:] if argv is None else argv),
        "config": {"jobs": opt.jobs, "repeat": opt.repeat, "peers": opt.peers, "pins": list(PINS),
                   "measure": opt.measure, "enqueue_jobs": opt.enqueue_jobs, "latency_jobs": opt.latency_jobs,
                   "latency_gap_ms": opt.latency_gap_ms,
                   "pg_url": opt.pg_url, "poll_s": [POLL_MIN_S, POLL_MAX_S]},
        "results": [], "errors": {}}
    t_start = time.perf_counter()
    workdir = tempfile.mkdtemp(prefix="tenure-peers-")
    systems, targets = build_systems(opt, workdir)
    runs: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(systems))}
    calls_e: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(systems))}
    calls_l: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(systems))}
    fills: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(systems))}
    try:
        for rep in range(opt.repeat):  # round-robin: slow drift on the host hits every system alike
            # ... and each round starts one system later, so none always runs right after another's
            # disk writes (a SQLite fill's writeback delays the next PostgreSQL fsyncs).
            shift = rep % len(systems)
            for i, system in [*enumerate(systems)][shift:] + [*enumerate(systems)][:shift]:
                if system.label + "/" + system.engine in out["errors"]:
                    continue
                log(f"[{rep + 1}/{opt.repeat}] {system.label} on {system.engine} ...")
                try:
                    if "drain" in opt.measure:
                        r = measure(system, opt.jobs)
                        runs[i].append(r)
                        log(f"    {r['jobs_per_s']:,.0f} jobs/s ({r['seconds']} s), "
                            f"{'verified' if r['verified']['ok'] else 'VERIFICATION FAILED: ' + str(r['verified']['failures'])}")
                    if "bulk" in opt.measure and "drain" not in opt.measure:
                        b = measure_bulk(system, opt.jobs)
                        fills[i].append(b)
                        secs = b["fill"].get("enqueue_seconds")
                        rate = f"{opt.jobs / secs:,.0f} rows/s" if secs else "not timed (a copied store)"
                        log(f"    bulk: {rate}, {'verified' if b['verified']['ok'] else b['verified']['failures']}")
                    if system.calls and "enqueue1" in opt.measure:
                        e = measure_enqueue_one(system, opt.enqueue_jobs, ROOT)
                        calls_e[i].append(e)
                        log(f"    one by one: {e['jobs_per_s']:,.0f} enqueues/s, {e['cpu_us_per_enqueue']:,.0f} us CPU "
                            f"each, {'verified' if e['verified']['ok'] else e['verified']['failures']}")
                    if system.calls and "latency" in opt.measure:
                        la = measure_latency(system, opt.latency_jobs, opt.latency_gap_ms, ROOT)
                        calls_l[i].append(la)
                        log(f"    latency: p50 {la['p50_ms']} / p99 {la['p99_ms']} ms, "
                            f"{'verified' if la['verified']['ok'] else la['verified']['failures']}")
                except Exception as exc:  # noqa: BLE001 - reported, and the other systems go on
                    out["errors"][system.label + "/" + system.engine] = f"{type(exc).__name__}: {exc}"
                    log(f"    failed: {type(exc).__name__}: {exc!s:.2000}")
                    continue
        out["results"] = [summarize(s, runs[i], summarize_calls(calls_e[i], calls_l[i]), fills[i])
                          for i, s in enumerate(systems) if runs[i] or calls_e[i] or calls_l[i] or fills[i]]
        out["versions"] = versions(systems, targets)
    finally:
        for s in systems:
            s.close()
        for t in targets:
            t.close()
        shutil.rmtree(workdir, ignore_errors=True)
    out["machine"]["loadavg_at_end"] = machine.loadavg()
    out["wall_seconds"] = round(time.perf_counter() - t_start, 1)
    ok = not out["errors"] and all(r["verified"]["ok"] for r in out["results"])
    out["verified"] = ok

    print(render(out))
    m = out["machine"]
    v = out["versions"]
    peers_v = ", ".join(f"{k} {v[k]}" for k in ("pgqueuer", "asyncpg", "uvloop", "huey", "procrastinate", "psycopg")
                        if k in v)
    pg = v.get("tenure_postgres", {})
    print(f"\n{opt.jobs} no-op jobs per run, median of {opt.repeat}; one worker process each; clock: go -> all "
          f"{opt.jobs} done in the store (polled). Python {v['python']}"
          + (f"; PostgreSQL {pg.get('postgresql')} (synchronous_commit={pg.get('synchronous_commit')})" if pg else "")
          + (f"; {peers_v}" if peers_v else ""))
    print(f"machine: {m['cores']} cores ({m['cpu']}), load {m['loadavg_at_start']} -> {m['loadavg_at_end']}; "
          f"wall {out['wall_seconds']} s; verification: {'passed' if ok else 'FAILED'}")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)
        print(f"wrote {args.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
