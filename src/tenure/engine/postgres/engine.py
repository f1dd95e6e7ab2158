"""The PostgreSQL engine: a psycopg 3 connection pool, MVCC instead of a gate, LISTEN/NOTIFY wake-up.

Why it looks the way it does:

* **No gate** (``exclusive_gate = False``). PostgreSQL has many writers; a claim locks its rows
  with ``FOR UPDATE SKIP LOCKED`` so concurrent claimers pass each other, and every settling
  statement carries the fence in its own ``WHERE`` clause.
* **The database's clock.** ``now=None`` means ``clock_timestamp()`` on the server, read once per
  statement, so hosts with skewed clocks agree on who holds a lease.
* **Sessions autocommit**; a multi-statement operation (a limited claim, a chunked bulk insert)
  opens its own transaction, or joins the caller's when there is one.
* **A dead connection never poisons the pool**: a connection idle for more than
  :data:`CHECK_IDLE_AFTER` seconds (and, for a moment after a connection was lost, every
  connection) is checked (one empty round trip) before it is handed out, and one that broke in use
  is discarded by the pool when it comes back.
* **No call waits forever**: a call (and its wait for a connection) made under a deadline
  (:meth:`PostgresEngine.deadline`, set by the worker and the maintenance service from the lease,
  and ``?call_timeout=`` for every root call) is cut by a watchdog that shuts its socket down
  (``deadline.py``); every connection has TCP keepalives and ``tcp_user_timeout``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import select
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql as pgsql
from psycopg.pq import ConnStatus, TransactionStatus
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from ...errors import (
    ForeignConnection,
    InvalidArgument,
    InvalidType,
    InvalidURL,
    OperationWithdrawn,
    ReadOnlyStore,
    SchemaTooNew,
    StorageError,
    StorageFull,
    StoreBusy,
    StoreClosed,
    StoreLimitExceeded,
    StoreUnavailable,
    TenureError,
)
from ...rate_window import Rate
from ...redact import credentials, redact_url, scrub
from ..base import (
    DEFAULT_MAX_ATTEMPTS,
    HISTORY_KEEP,
    RECLAIMED_INDEX,
    Edge,
    Engine,
    JobRow,
    NewJob,
    Session,
    Settle,
    Watcher,
    new_job_params,
)
from ..limited import QueueLimits, claim_queue
from ..migrate import LATEST_VERSION_HINT, load_migrations, split_statements
from ..urls import POSTGRES_SCHEMES
from . import queries as Q
from .deadline import Watchdog, call_deadline
from .deadline import current as deadline_spec
from .insights import PostgresInsightsMixin
from .maintenance import PostgresMaintenanceMixin
from .queues import PostgresQueuesMixin
from .signals import PostgresSignalsMixin

#: A pooled connection idle longer than this is checked before use (after a server restart every
#: idle connection is dead; one returned a moment ago almost never is, and skipping its check
#: saves a round trip on the hot path).
CHECK_IDLE_AFTER = 1.0
#: After a connection is lost, every pooled connection is checked before use for this long (s).
SUSPECT_AFTER_LOSS = 2.0
#: Rows per INSERT statement of a bulk enqueue (bounded parameter size; one transaction overall).
#: From this many rows on, an insert streams them with COPY into a staging table and moves them
#: with one INSERT ... SELECT (Q.INSERT_STAGED); below it, one INSERT_MANY statement costs fewer
#: round trips (measured for issue 26: docs/performance.md).
COPY_MIN_ROWS = 64
#: Options tenure reads from the URL's query string (everything else goes to libpq).
URL_OPTIONS = ("schema", "pool_min", "pool_max", "pool_timeout", "call_timeout")
#: TCP settings of every connection (pooled, LISTEN, migration) unless the URL sets its own: a
#: silently dropped peer is noticed within ~25 s (keepalives) and unacknowledged writes give up
#: after TCP_USER_TIMEOUT_MS. They cannot see a path that still acknowledges packets (a stalled
#: proxy); the client-side deadlines (deadline.py) can.
TCP_SETTINGS = {"keepalives": "1", "keepalives_idle": "10", "keepalives_interval": "5",
                "keepalives_count": "3", "tcp_user_timeout": "30000"}
#: How often a connection wait checks its caller's cancellation (seconds).
CANCEL_POLL = 0.02
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

log = logging.getLogger("tenure.engine.postgres")


class PostgresSession(PostgresQueuesMixin, PostgresSignalsMixin, PostgresMaintenanceMixin, PostgresInsightsMixin, Session):
    dialect = "postgres"
    __slots__ = ("_conn",)

    def __init__(self, conn: psycopg.Connection) -> None:
        self._conn = conn

    # -- clock --------------------------------------------------------------------------------
    def now_ms(self) -> int:
        return self._conn.execute(Q.NOW_MS).fetchone()[0]

    # -- jobs ----------------------------------------------------------------------------------
    def job_insert(self, jobs: Sequence[NewJob], now: int | None) -> list[tuple[str, bool]]:
        if not jobs:
            return []
        conn = self._conn
        if len(jobs) == 1:
            row = conn.execute(Q.INSERT, _insert_params(jobs[0], now)).fetchone()
            inserted = {row[0]} if row else set()
        elif len(jobs) < COPY_MIN_ROWS:
            with _atomic(conn):
                cur = conn.execute(Q.INSERT_MANY, _insert_rows(jobs, now))
                inserted = {r[0] for r in cur.fetchall()}
        else:
            with _atomic(conn):
                inserted = _insert_copied(conn, jobs, now)
        if len(inserted) == len(jobs):
            return [(j.id, True) for j in jobs]
        # Some were not written: an existing id answers itself; a uniqueness-policy duplicate
        # answers the job that holds the key.
        answered: set[str] = set()
        refused = [j for j in jobs if j.id not in inserted]
        existing = {r[0] for r in conn.execute(Q.EXISTING_IDS, {"ids": [j.id for j in refused]})}
        out: list[tuple[str, bool]] = []
        for j in jobs:
            if j.id in inserted and j.id not in answered:
                answered.add(j.id)
                out.append((j.id, True))
            elif j.id in existing or j.id in inserted:
                out.append((j.id, False))
            else:
                row = conn.execute(Q.FIND_SINGLETON, {"queue": j.queue, "singleton_key": j.singleton_key,
                                                      "singleton_on": j.singleton_on}).fetchone()
                out.append((row[0] if row else j.id, False))
        return out

    resolves_queue_defaults = True
    copies_jobs = True

    def job_copy(self, jobs: Iterable[NewJob], now: int) -> list[str]:
        conn = self._conn
        with conn.transaction():  # its own, or a savepoint in the caller's: all or nothing
            return _copy_fresh(conn, jobs, now)

    def job_insert_resolved(self, job: NewJob, retention_ms: int | None, now: int | None) -> str | None:
        params = new_job_params(job, now)
        params["retention_ms"] = retention_ms
        params["default_max_attempts"] = DEFAULT_MAX_ATTEMPTS
        row = self._conn.execute(Q.INSERT_RESOLVED, params).fetchone()
        return None if row is None else row[0]

    def job_get(self, job_id: str) -> JobRow | None:
        return self._conn.execute(Q.GET, {"id": job_id}).fetchone()

    def job_claim(self, *, kinds, queues, owner, lease_ms, now, limit, instance=None) -> list[JobRow]:
        return self._claim(kinds, queues, owner, lease_ms, now, limit, None, instance)[1]

    def job_complete_and_claim(self, items, now, *, kinds, queues, owner, lease_ms, limit, instance=None):
        return self._claim(kinds, queues, owner, lease_ms, now, limit, items, instance)

    def _claim(self, kinds, queues, owner, lease_ms, now, limit, settle: Sequence[Settle] | None,
               instance: str | None = None) -> tuple[set[str], list[JobRow]]:
        """The claim (after the completions ``settle``, when given) in ONE round trip when no
        limited queue is involved: BEGIN, COMPLETE, QUEUE_LIMITS, the claim and COMMIT go out as
        one pipeline. The claim statement skips limited queues in SQL, so it needs no answer from
        QUEUE_LIMITS first. Limited queues are claimed one at a time under their advisory locks
        (:meth:`_claim_limited`), in the same transaction.

        The connection remembers which queues it last saw limited, which only shapes the trip:
        with none of them asked for, the transaction commits in the pipeline; if the fresh
        QUEUE_LIMITS then shows one (a queue limited since), it is claimed in a second
        transaction. When every queue asked for is limited, the speculative claim is left out
        (it would walk their whole backlog only to skip it). What is claimed never depends on
        the hint."""
        conn = self._conn
        self.rate_wake_at = None
        hint: frozenset[str] | None = getattr(conn, "_tenure_limited", None)
        if queues is None:
            expect_limits = bool(hint)
            speculate = limit > 0
        else:
            expect_limits = hint is not None and any(q in hint for q in queues)
            speculate = limit > 0 and (hint is None or any(q not in hint for q in queues))
        done_cur = main_cur = None
        with _atomic(conn) if expect_limits else nullcontext():
            with _pipelined(conn):
                if settle:
                    done_cur = conn.execute(Q.COMPLETE, _complete_params(settle, now))
                limits_cur = conn.execute(Q.QUEUE_LIMITS)
                if speculate:
                    main_cur = conn.execute(_claim_sql(kinds, queues, limit=limit, copies=queues is not None),
                                            _claim_params(kinds, queues, owner, lease_ms, now, limit, instance))
            done = set() if done_cur is None else {r[0] for r in done_cur.fetchall()}
            limits = limits_cur.fetchall()
            conn._tenure_limited = frozenset(lim[0] for lim in limits)
            spent: list[str] = []
            rows: list[JobRow] = [] if main_cur is None else _split_spent(main_cur.fetchall(), spent)
            if queues is not None:
                limits = [lim for lim in limits if lim[0] in queues]
            if limits and len(rows) < limit and expect_limits and not _reclaimed(rows):
                rows.extend(self._claim_limited(limits, kinds, owner, lease_ms, now, limit - len(rows), spent,
                                                instance, revive=not rows, copies=queues is not None))
        if limits and len(rows) < limit and not expect_limits and not _reclaimed(rows):
            # A queue limited since the hint was taken; the first transaction has committed.
            try:
                with _atomic(conn):
                    rows.extend(self._claim_limited(limits, kinds, owner, lease_ms, now, limit - len(rows),
                                                    spent, instance, revive=not rows, copies=queues is not None))
            except Exception:
                if not rows and not done:
                    raise
                # What committed must reach the caller (or its leases would idle until they
                # expire); the limited queues are claimed on the next call.
                log.warning("claiming from limited queues failed; answering the rest", exc_info=True)
        if spent:
            self._reap(spent, now)
        if len(rows) > 1:
            rows.sort(key=_claim_order)
        return done, rows

    def _reap(self, ids: list[str], now: int | None) -> None:
        """Settle the spent expired leases a claim met dead (REAP) and copy them to their
        dead-letter queues, in one transaction of their own (docs/guarantees.md, "Liveness").
        A failure is logged, not raised: what the claim leased must still reach its caller, and
        the next claim meets these rows again."""
        try:
            with _atomic(self._conn):
                dead = [r[0] for r in self._conn.execute(Q.REAP, {"ids": ids, "now": now}).fetchall()]
                if dead:
                    self.queue_dead_letter([(d, str(uuid.uuid4())) for d in dead], DEFAULT_MAX_ATTEMPTS, now)
        except Exception:
            log.warning("settling %d job(s) whose worker was lost failed; the next claim retries",
                        len(ids), exc_info=True)

    def _claim_limited(self, limits, kinds, owner, lease_ms, now, limit, spent: list[str],
                       instance=None, *, revive: bool = True, copies: bool = True) -> list[JobRow]:
        """Claim from limited queues (a concurrency, group or rate limit, fairness, or a policy the
        claim enforces), inside the caller's transaction: every claimer of such a queue takes its
        advisory lock (in name order, so two claimers never wait on each other in a cycle) and
        holds it to the end of the transaction; each statement below then sees every committed
        lease and rate window, so the counts are exact across processes
        (:func:`tenure.engine.limited.claim_queue`). ``revive``: an expired lease may be leased
        again (answered alone); the spent ones met are added to ``spent``. ``copies``: dead
        letters may be claimed (the caller named the queues)."""
        conn = self._conn
        rows: list[JobRow] = []
        for name, conc, group_limit, _serial, rate, rate_ms, grate, grate_ms, fairness in limits:
            if len(rows) >= limit:
                break
            lim = QueueLimits(name, conc, group_limit, None if rate is None else Rate(rate, rate_ms),
                              None if grate is None else Rate(grate, grate_ms), fairness)
            at = now
            if at is None and (rate is not None or grate is not None or fairness is not None):
                # The window arithmetic needs one instant: the database's, read under the lock.
                at = conn.execute(Q.LOCK_QUEUE_NOW, {"name": name}).fetchone()[0]
            else:
                conn.execute(Q.LOCK_QUEUE, {"name": name})
            claimer = _LimitedPostgres(conn, kinds, owner, lease_ms, at, instance, copies, spent)
            got = claim_queue(claimer, lim, at if at is not None else 0, limit - len(rows),
                              revive=revive and not rows)
            rows.extend(got.rows)
            if got.wake_at is not None:
                self.rate_wake_at = min(got.wake_at, self.rate_wake_at or got.wake_at)
            if got.reclaimed:
                return rows  # alone: nothing else was claimed before it, nothing after
        return rows

    def job_renew(self, job_id, token, lease_ms, now) -> JobRow | None:
        return self._conn.execute(Q.RENEW, {"id": job_id, "token": token, "lease_ms": lease_ms,
                                            "now": now}).fetchone()

    def job_lock(self, job_id: str, token: str, now: int | None) -> bool:
        return self._conn.execute(Q.LOCK, {"id": job_id, "token": token, "now": now}).fetchone() is not None

    def job_complete(self, items: Sequence[Settle], now: int | None) -> set[str]:
        if not items:
            return set()
        return {r[0] for r in self._conn.execute(Q.COMPLETE, _complete_params(items, now)).fetchall()}

    def job_fail(self, items: Sequence[Settle], now: int | None) -> list[JobRow]:
        if not items:
            return []
        return self._conn.execute(Q.FAIL, {
            "now": now, "ids": [it.job_id for it in items], "tokens": [it.token for it in items],
            "errors": [it.error for it in items], "delays": [int(it.delay_ms) for it in items],
            "deads": [bool(it.dead) for it in items], "jitters": [float(it.jitter) for it in items],
            "entries": [it.entry for it in items], "fixed": [bool(it.fixed_delay) for it in items],
            "keep": HISTORY_KEEP,
        }).fetchall()

    def job_snooze(self, job_id: str, token: str, delay_ms: int, now: int | None) -> JobRow | None:
        return self._conn.execute(Q.SNOOZE, {"id": job_id, "token": token, "delay_ms": delay_ms,
                                             "now": now}).fetchone()

    def job_cancel(self, job_id, token, now) -> JobRow | None:
        if token is None:
            return self._conn.execute(Q.CANCEL_QUEUED, {"id": job_id, "now": now}).fetchone()
        return self._conn.execute(Q.CANCEL_LEASED, {"id": job_id, "token": token, "now": now}).fetchone()

    def job_release(self, job_id: str, token: str, now: int | None) -> JobRow | None:
        return self._conn.execute(Q.RELEASE, {"id": job_id, "token": token, "now": now}).fetchone()

    def job_request_cancel(self, job_id: str, now: int | None) -> JobRow | None:
        return self._conn.execute(Q.REQUEST_CANCEL, {"id": job_id, "now": now}).fetchone()

    def job_cancel_abandoned(self, now: int | None) -> list[JobRow]:
        return self._conn.execute(Q.CANCEL_ABANDONED, {"now": now}).fetchall()

    def job_cancel_flagged(self) -> list[str]:
        return [r[0] for r in self._conn.execute(Q.CANCEL_FLAGGED)]

    def job_requeue(self, job_id, now) -> JobRow | None:
        return self._conn.execute(Q.REQUEUE, {"id": job_id, "now": now}).fetchone()

    def job_counts(self) -> dict[str, int]:
        return dict(self._conn.execute(Q.COUNTS).fetchall())

    def job_page(self, *, state, kind, queue, after, limit, tag=None, descending=False) -> list[JobRow]:
        params = {"state": state, "kind": kind, "queue": queue, "tag": tag, "after": after, "limit": limit}
        return self._conn.execute(_page_sql(params, descending), params).fetchall()

    def job_progress(self, job_id, token, fraction, note, attempt, now) -> bool:
        cur = self._conn.execute(Q.PROGRESS, {"id": job_id, "token": token, "fraction": fraction, "note": note,
                                              "attempt": attempt, "now": now})
        return cur.rowcount == 1

    def job_match(self, *, filters, eligible, after, limit, now) -> list[str]:
        params = {**filters, "after": after, "limit": limit, "now": now}
        used = "".join(text for name, text in Q.MATCH_FILTERS.items() if params.get(name) is not None)
        sql = Q.MATCH.format(filters=used + Q.MATCH_ELIGIBLE[eligible])
        return [r[0] for r in self._conn.execute(sql, params)]

    def job_delete(self, job_ids, now) -> list[str]:
        return [r[0] for r in self._conn.execute(Q.DELETE_JOBS, {"ids": list(job_ids), "now": now})]

    def job_sweep(self, settled_before: int, limit: int) -> int:
        return self._conn.execute(Q.SWEEP, {"before": settled_before, "limit": limit}).fetchone()[0]

    # -- dependencies ------------------------------------------------------------------------
    def job_states(self, job_ids: Sequence[str]) -> dict[str, str]:
        if not job_ids:
            return {}
        return dict(self._conn.execute(Q.JOB_STATES, {"ids": list(job_ids)}).fetchall())

    def dependency_mark_parents(self, job_ids: Sequence[str]) -> dict[str, str]:
        if not job_ids:
            return {}
        # In id order, so two enqueues marking shared parents never wait on each other in a cycle.
        return dict(self._conn.execute(Q.MARK_PARENTS, {"ids": sorted(job_ids)}).fetchall())

    def dependency_add(self, edges: Sequence[Edge], waiting: dict[str, int],
                       cancelled: Sequence[tuple[str, str]], now: int | None) -> None:
        conn = self._conn
        if edges:
            conn.execute(Q.ADD_DEPENDENCIES, {
                "jobs": [e.job_id for e in edges], "parents": [e.parent_id for e in edges],
                "positions": [e.position for e in edges], "policies": [e.policy for e in edges],
                "released": [int(e.released) for e in edges]})
        counted = [(jid, n) for jid, n in waiting.items() if n]
        if counted:
            conn.execute(Q.SET_WAITING, {"ids": [c[0] for c in counted], "counts": [c[1] for c in counted]})
        for jid, error in cancelled:
            conn.execute(Q.CANCEL_DEPENDENT, {"id": jid, "error": error, "now": now})

    def dependency_list(self, job_id: str, parents: bool) -> list[tuple]:
        return self._conn.execute(Q.PARENTS_OF if parents else Q.DEPENDENTS_OF, {"id": job_id}).fetchall()

    # -- checkpoints ---------------------------------------------------------------------------
    def checkpoint_save(self, run_id, node_id, value, generation, token, now) -> bool:
        cur = self._conn.execute(Q.CHECKPOINT_SAVE, {"run_id": run_id, "node_id": node_id, "value": value,
                                                     "generation": generation, "token": token, "now": now})
        return cur.rowcount == 1

    def checkpoint_list(self, run_id, max_generation):
        return self._conn.execute(Q.CHECKPOINT_LIST, {"run_id": run_id,
                                                      "max_generation": max_generation}).fetchall()

    # -- application SQL -------------------------------------------------------------------
    def execute(self, sql: str, params: Any = None) -> Any:
        return self._conn.execute(sql, params)

    @property
    def connection(self) -> psycopg.Connection:
        return self._conn


def _insert_params(j: NewJob, now: int | None) -> dict[str, Any]:
    return new_job_params(j, now)


def _insert_rows(jobs: Sequence[NewJob], now: int | None) -> dict[str, Any]:
    """INSERT_MANY's parameters: the rows as one JSON array, in INSERT_MANY_COLUMNS order."""
    rows = [[j.id, j.kind, j.payload, j.run_at, j.delay_ms, j.max_attempts, j.queue, j.priority,
             j.timeout_ms, j.singleton_key, j.singleton_on, j.policy, j.group_key, j.dead_letter,
             j.origin_id, j.retry_delay_ms, None if j.retry_backoff is None else int(j.retry_backoff),
             j.retry_delay_max_ms, j.keep_until, j.delete_after_ms, j.last_error, j.headers, j.tags,
             j.meta] for j in jobs]
    return {"now": now, "rows": json.dumps(rows)}


def _copy_fresh(conn: psycopg.Connection, jobs: Iterable[NewJob], ms: int) -> list[str]:
    """COPY ``jobs`` straight into tenure_jobs (Q.COPY_JOBS) as they come from the iterable (see
    ``Session.job_copy``), so the server inserts while the next rows are still being built. The
    columns are the INSERT statement's, computed as it computes them, with ``ms`` as its clock."""
    ids: list[str] = []
    with conn.cursor() as cur, cur.copy(Q.COPY_JOBS) as copy:
        write = copy.write_row
        add = ids.append
        for j in jobs:
            add(j.id)
            write((j.id, j.kind, j.payload, "pending", ms + j.delay_ms if j.run_at is None else j.run_at, 0,
                   j.max_attempts, 0, ms, ms, j.queue, j.priority, j.timeout_ms, j.singleton_key, j.singleton_on,
                   j.policy, j.group_key, j.dead_letter, j.origin_id, j.retry_delay_ms,
                   None if j.retry_backoff is None else int(j.retry_backoff), j.retry_delay_max_ms, j.keep_until,
                   j.delete_after_ms, j.last_error, j.headers, j.tags, j.meta))
    return ids


def _insert_copied(conn: psycopg.Connection, jobs: Sequence[NewJob], now: int | None) -> set[str]:
    """Insert ``jobs`` by COPY into the connection's staging table, then Q.INSERT_STAGED, inside
    the caller's transaction; answers the ids written."""
    conn.execute(Q.STAGE_CREATE)
    with conn.cursor() as cur:
        with cur.copy(Q.STAGE_COPY) as copy:
            write = copy.write_row
            for n, j in enumerate(jobs):
                write((n, j.id, j.kind, j.payload, j.run_at, j.delay_ms, j.max_attempts, j.queue, j.priority,
                       j.timeout_ms, j.singleton_key, j.singleton_on, j.policy, j.group_key, j.dead_letter,
                       j.origin_id, j.retry_delay_ms, None if j.retry_backoff is None else int(j.retry_backoff),
                       j.retry_delay_max_ms, j.keep_until, j.delete_after_ms, j.last_error, j.headers, j.tags,
                       j.meta))
        cur.execute(Q.INSERT_STAGED, {"now": now})
        return {r[0] for r in cur.fetchall()}


def _claim_order(row: JobRow) -> tuple:
    return (-row[15], row[4], row[12], row[0])  # priority DESC, run_at, created_at, id


class _LimitedPostgres:
    """The statements of :func:`tenure.engine.limited.claim_queue` on PostgreSQL, inside the
    claim's transaction and under the queue's advisory lock. ``now`` None: the database's clock
    (only queues without a rate or fairness; the others are claimed at one instant read once)."""

    def __init__(self, conn, kinds, owner, lease_ms, now, instance, copies: bool, spent: list[str]) -> None:
        self._conn, self._kinds, self._owner, self._lease_ms = conn, kinds, owner, lease_ms
        self._now, self._instance, self._copies, self._spent = now, instance, copies, spent

    def leased_count(self, queue: str, now: int) -> int:
        return self._conn.execute(Q.LEASED_IN_QUEUE, {"queue": queue, "now": self._now}).fetchone()[0]

    def saturated_groups(self, queue: str, now: int, group_limit: int) -> list[str]:
        return [r[0] for r in self._conn.execute(
            Q.SATURATED_GROUPS, {"queue": queue, "now": self._now, "group_limit": group_limit})]

    def windows(self, queue, keys):
        out = {}
        for scope, key in keys:
            row = self._conn.execute(Q.RATE_WINDOW_GET, {"queue": queue, "scope": scope, "key": key}).fetchone()
            if row is not None:
                out[(scope, key)] = (row[2], row[3])
        return out

    def save_windows(self, queue, rows) -> None:
        self._conn.execute(Q.RATE_WINDOW_SAVE, {
            "queue": queue, "scopes": [r[0] for r in rows], "keys": [r[1] for r in rows],
            "starts": [r[2] for r in rows], "blocked": [r[3] for r in rows], "turns": [r[4] for r in rows]})

    def fair_groups(self, queue: str, now: int) -> list[str]:
        return [r[0] for r in self._conn.execute(Q.FAIR_GROUPS, {"queue": queue, "now": now})]

    def next_group_open(self, queue: str, now: int) -> int | None:
        return self._conn.execute(Q.RATE_WINDOW_NEXT_OPEN, {"queue": queue, "now": now}).fetchone()[0]

    def claim(self, queue, want, *, full_groups, group, group_rate, revive):
        params = _claim_params(self._kinds, [queue], self._owner, self._lease_ms, self._now, want, self._instance)
        if full_groups is not None:
            params["full_groups"] = full_groups
        if group is not None:
            params["only_group"] = group
        sql = _claim_sql(self._kinds, [queue], limited=True, group_filter=full_groups is not None, limit=want,
                         revive=revive, copies=self._copies, group_rate=group_rate, one_group=group is not None)
        got = _split_spent(self._conn.execute(sql, params).fetchall(), self._spent)
        return got, _reclaimed(got)


_CLAIM_CACHE: dict[tuple, str] = {}


def _split_spent(rows: list[JobRow], spent: list[str]) -> list[JobRow]:
    """The claimed rows of a CLAIM answer; the ids of the spent expired leases it met (flag NULL)
    go to ``spent``."""
    if all(r[RECLAIMED_INDEX] is not None for r in rows):
        return rows
    spent.extend(r[0] for r in rows if r[RECLAIMED_INDEX] is None)
    return [r for r in rows if r[RECLAIMED_INDEX] is not None]


def _reclaimed(rows: list[JobRow]) -> bool:
    return len(rows) == 1 and bool(rows[0][RECLAIMED_INDEX])


def _claim_sql(kinds, queues, *, limited: bool = False, group_filter: bool = False, limit: int = 1,
               revive: bool = True, copies: bool = True, group_rate: bool = False, one_group: bool = False) -> str:
    """The claim statement for this shape of call (cached: the text depends only on the shape and
    the limit, a small set in practice: a worker claims up to its free slots). It skips paused
    queues, and limited ones too unless ``limited`` (the claim of one limited queue, made under
    its advisory lock). ``revive``: it may lease one expired lease again (alone). ``copies``: it
    may take dead letters (the caller named the queues; docs/queues.md, "Dead letters"). A limited
    claim enforces strict_fifo; ``group_rate`` skips groups whose rate window is closed;
    ``one_group`` takes only ``%(only_group)s``'s jobs (issue 25)."""
    one = queues is not None and len(queues) == 1
    key = (kinds is None, queues is None, one, limited, group_filter, limit, revive, copies, group_rate, one_group)
    sql = _CLAIM_CACHE.get(key)
    if sql is None:
        if one:
            queue_filter = Q.ONE_QUEUE_FILTER
        elif queues is None:
            queue_filter = ""
        else:
            queue_filter = Q.QUEUE_FILTER
        if group_filter:
            queue_filter += Q.GROUP_FILTER
        if limited:
            queue_filter += Q.STRICT_FILTER
        if group_rate:
            queue_filter += Q.GROUP_RATE_FILTER
        if one_group:
            queue_filter += Q.ONE_GROUP_FILTER
        if not copies:
            queue_filter += Q.NO_DEAD_LETTERS
        if len(_CLAIM_CACHE) >= 1024:
            _CLAIM_CACHE.clear()
        sql = Q.CLAIM.format(kind_filter="" if kinds is None else Q.KIND_FILTER, queue_filter=queue_filter,
                             skip_queues=Q.SKIP_PAUSED if limited else Q.SKIP_PAUSED_OR_LIMITED,
                             limit=int(limit), revive=1 if revive else 0)
        _CLAIM_CACHE[key] = sql
    return sql


def _claim_params(kinds, queues, owner, lease_ms, now, limit, instance=None) -> dict[str, Any]:
    params: dict[str, Any] = {"owner": owner, "instance": instance, "lease_ms": lease_ms, "now": now,
                              "limit": limit}
    if kinds is not None:
        params["kinds"] = list(kinds)
    if queues is not None:
        if len(queues) == 1:
            params["queue"] = queues[0]
        else:
            params["queues"] = list(queues)
    return params


def _complete_params(items: Sequence[Settle], now: int | None) -> dict[str, Any]:
    return {"now": now, "ids": [it.job_id for it in items], "tokens": [it.token for it in items],
            "results": [it.result for it in items]}


_PAGE_CACHE: dict[tuple, str] = {}


def _page_sql(params: dict[str, Any], descending: bool = False) -> str:
    key = (*(params[name] is not None for name in Q.PAGE_FILTERS), descending)
    sql = _PAGE_CACHE.get(key)
    if sql is None:
        filters = "".join(Q.PAGE_AFTER_DESC if descending and name == "after" else text
                          for name, text in Q.PAGE_FILTERS.items() if params[name] is not None)
        sql = _PAGE_CACHE[key] = Q.PAGE.format(filters=filters, direction="DESC" if descending else "")
    return sql


@contextmanager
def _pipelined(conn: psycopg.Connection) -> Iterator[None]:
    """The block's statements sent as one pipeline (one round trip, answered when the block
    ends: read the cursors after it), in a transaction of their own on an idle autocommit
    connection, else inside the caller's. An error surfaces when the block ends; the statements
    after the failed one are skipped and the transaction rolls back."""
    own = conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE
    with conn.pipeline():
        if own:
            with conn.transaction():
                yield
        else:
            yield


@contextmanager
def _atomic(conn: psycopg.Connection) -> Iterator[None]:
    """A transaction of its own on an autocommit connection, or nothing inside the caller's (an
    explicit one, or the implicit one of a non-autocommit connection the application lent us)."""
    if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        with conn.transaction():
            yield
    else:
        yield


# -- wake-up -------------------------------------------------------------------------------------


class PostgresWatcher(Watcher):
    """``LISTEN tenure_jobs`` on a dedicated connection (never a pooled one: a pooled connection
    would carry the LISTEN to other users, and must not sit blocked).

    ``wait`` polls the connection's socket and a private pipe (so ``close`` from another
    thread ends a wait at once), then drains every pending notification. If the connection is
    lost it reconnects by itself with a capped exponential backoff, and answers True once it is
    back: notifications sent while it was away are lost, so the caller must poll once.
    """

    BACKOFF_MIN = 0.05
    BACKOFF_MAX = 2.0

    def __init__(self, conninfo: str, schema: str | None, connect_kwargs: dict[str, Any],
                 channel: str = Q.CHANNEL) -> None:
        #: The channel listened to: ``tenure_jobs`` (new work), or ``tenure_cancel`` (a cancel
        #: request, whose payload is "<schema> <job id>").
        self._channel = channel
        self._conninfo = conninfo
        self._schema = schema
        self._kwargs = connect_kwargs
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._woken = False  # a notification psycopg received while running a command
        self._backoff = 0.0
        self._next_attempt = 0.0
        #: How many times the watcher re-established its LISTEN connection (a test signal).
        self.reconnects = 0
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        try:
            self._connect()
        except psycopg.Error:
            self._conn = None  # the first wait retries (and answers True when it gets through)

    def _connect(self) -> None:
        conn = psycopg.connect(self._conninfo, autocommit=True, **self._kwargs)
        try:
            conn.add_notify_handler(self._on_notify)
            if self._schema is None:
                # A SELECT without FROM answers exactly one row.
                self._schema = conn.execute(Q.CURRENT_SCHEMA).fetchone()[0]  # type: ignore[index]
            conn.execute(Q.LISTEN if self._channel == Q.CHANNEL else f"LISTEN {self._channel}")
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _on_notify(self, n: psycopg.Notify) -> None:
        if n.channel == self._channel and self._ours(n.payload):
            self._woken = True

    def _ours(self, payload: str) -> bool:
        return payload in ("", self._schema) or payload.startswith(f"{self._schema} ")

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - it is already broken
                pass

    def _drain(self) -> bool:
        """Consume every notification already received; True if one was for this store."""
        conn = self._conn
        assert conn is not None
        pgconn = conn.pgconn
        while (n := pgconn.notifies()) is not None:
            if n.relname.decode() == self._channel and self._ours(n.extra.decode()):
                self._woken = True
        woken, self._woken = self._woken, False
        return woken

    def _reconnect(self, deadline: float) -> bool:
        """One reconnect attempt once the backoff allows (waiting for it at most until
        ``deadline``); True when connected."""
        delay = self._next_attempt - time.monotonic()
        if delay > 0:
            budget = min(delay, deadline - time.monotonic())
            if budget > 0 and _poll([self._rfd], budget):
                return False  # closing
            if time.monotonic() < self._next_attempt:
                return False
        try:
            self._connect()
        except psycopg.Error:
            self._backoff = min(max(self._backoff * 2, self.BACKOFF_MIN), self.BACKOFF_MAX)
            self._next_attempt = time.monotonic() + self._backoff
            return False
        self._backoff = 0.0
        self.reconnects += 1
        return True

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + max(float(timeout), 0.0)
        with self._lock:
            while not self._closed:
                conn = self._conn
                if conn is None or conn.closed or conn.pgconn.status != ConnStatus.OK:
                    self._drop()
                    if self._reconnect(deadline):
                        return True
                    if time.monotonic() >= deadline:
                        return False
                    continue
                if self._drain():
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                try:
                    ready = _poll([conn.pgconn.socket, self._rfd], remaining)
                except (OSError, ValueError, psycopg.OperationalError):
                    self._drop()
                    continue
                if self._rfd in ready:
                    return False  # closing
                if ready:
                    try:
                        conn.pgconn.consume_input()
                    except psycopg.OperationalError:
                        self._drop()  # lost: reconnect on the next turn
                        continue
            return False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            os.write(self._wfd, b"x")
        except OSError:
            pass
        with self._lock:
            self._drop()
            for fd in (self._rfd, self._wfd):
                try:
                    os.close(fd)
                except OSError:
                    pass


def _poll(fds: list[int], timeout: float) -> set[int]:
    """The fds readable (or hung up) within ``timeout`` seconds. poll(), not select(): a process
    with more than 1024 open files still works."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP)
    return {fd for fd, _ in poller.poll(max(math.ceil(timeout * 1000), 0))}


def _stamp_new(conn: psycopg.Connection) -> None:
    """A new pooled connection counts as just used: it is not checked before its first use."""
    conn._tenure_returned = time.monotonic()  # type: ignore[attr-defined]


# -- the engine ----------------------------------------------------------------------------------


class PostgresEngine(Engine):
    dialect = "postgres"
    exclusive_gate = False

    def __init__(self, url: str, *, schema: str | None = None, pool_min: int = 1, pool_max: int = 10,
                 pool_timeout: float = 10.0, connect_timeout: int = 10, prepare_threshold: int | None = 5,
                 application_name: str = "tenure", call_timeout: float | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme.lower() not in POSTGRES_SCHEMES:
            raise InvalidURL(f"not a PostgreSQL URL: {redact_url(url)!r}")
        query = parse_qsl(parts.query, keep_blank_values=True)
        ours = {k: v for k, v in query if k in URL_OPTIONS}
        rest = [(k, v) for k, v in query if k not in URL_OPTIONS]
        # Joined by hand: urlunsplit drops the "//" of an empty authority, and libpq reads
        # "postgresql://?host=/run/postgresql&dbname=app" (every parameter in the query: a socket
        # directory, any password character) but not "postgresql:?...".
        tail = urlunsplit(("", "", parts.path, urlencode(rest, quote_via=quote), parts.fragment))
        self.url = f"postgresql://{parts.netloc}{tail}"
        self._secrets = credentials(url)
        try:
            self.schema = schema if schema is not None else ours.get("schema") or None
            self.pool_min = int(ours.get("pool_min", pool_min))
            self.pool_max = int(ours.get("pool_max", pool_max))
            self.pool_timeout = float(ours.get("pool_timeout", pool_timeout))
            raw = ours.get("call_timeout", call_timeout)
            #: Seconds every root call may take before the client cuts it (None: only the
            #: worker's and maintenance's own deadlines apply); see deadline.py.
            self.call_timeout = None if raw in (None, "") else float(raw)
        except ValueError as exc:
            raise InvalidURL(f"bad pool option in {redact_url(url)!r}: {exc}") from None
        if self.call_timeout is not None and not 0 < self.call_timeout < math.inf:
            raise InvalidURL(f"call_timeout must be a positive number of seconds, got {self.call_timeout!r}")
        if self.schema is not None and not _SCHEMA_NAME.match(self.schema):
            raise InvalidURL(f"schema must be a plain identifier (letters, digits, _), got {self.schema!r}")
        if not 0 <= self.pool_min <= self.pool_max or self.pool_max < 1:
            raise InvalidArgument(f"need 0 <= pool_min <= pool_max and pool_max >= 1, got "
                                  f"{self.pool_min}/{self.pool_max}")
        self.connect_timeout = int(connect_timeout)
        self.prepare_threshold = prepare_threshold
        given = dict(psycopg.conninfo.conninfo_to_dict(self.url))
        extra: dict[str, Any] = {"application_name": application_name,
                                 "connect_timeout": str(max(self.connect_timeout, 2)),
                                 **{k: v for k, v in TCP_SETTINGS.items() if k not in given}}
        if self.schema is not None:
            # search_path at connection start: tenure's tables first, the application's (public)
            # still visible to tx.execute.
            opts = dict(psycopg.conninfo.conninfo_to_dict(self.url)).get("options") or ""
            extra["options"] = f"{opts} -c search_path={self.schema},public".strip()
        try:
            self.conninfo = psycopg.conninfo.make_conninfo(self.url, **extra)
        except psycopg.ProgrammingError as exc:
            raise InvalidURL(f"cannot parse {redact_url(url)!r}: {self._scrub(str(exc))}") from None
        self._pool: ConnectionPool | None = None
        self._verify_until = 0.0
        self._watchdog = Watchdog()
        self._closed = False
        self._lock = threading.Lock()
        self._watchers: weakref.WeakSet[PostgresWatcher] = weakref.WeakSet()
        self._identity: tuple[Any, ...] | None = None  # (database, server start) of the pool
        self._adopted: set[tuple[Any, ...]] = set()  # conn= sessions found on the same database

    def describe(self) -> str:
        text = redact_url(self.url)
        return text if self.schema is None else f"{text} (schema {self.schema})"

    # -- lifecycle ---------------------------------------------------------------------------
    def open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")
        try:
            # A direct connection first: it surfaces the real reason (auth, unknown database, no
            # server) where a pool would only time out.
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                self._migrate(conn)
            pool = ConnectionPool(
                self.conninfo, min_size=self.pool_min, max_size=self.pool_max, open=False,
                kwargs={"autocommit": True, "prepare_threshold": self.prepare_threshold},
                configure=_stamp_new, timeout=self.pool_timeout,
                name="tenure", num_workers=2)
            pool.open(wait=self.pool_min > 0, timeout=max(self.connect_timeout, 2))
        except TenureError:
            raise
        except Exception as exc:
            err = self.classify(exc)
            if isinstance(err, ReadOnlyStore):
                raise ReadOnlyStore(f"cannot create tenure's tables in {self.describe()}: {err.message}") from exc
            if err is exc:
                raise
            raise err from exc
        with self._lock:
            if self._closed:
                pool.close()
                raise StoreClosed("the store is closed")
            self._pool = pool

    def _migrate(self, conn: psycopg.Connection) -> None:
        migrations = load_migrations(__package__)
        latest = migrations[-1].version
        wanted = {m.version for m in migrations}
        # SELECT EXISTS (...) answers exactly one row.
        if conn.execute(Q.MIGRATIONS_TABLE_EXISTS, {"schema": self.schema}).fetchone()[0]:  # type: ignore[index]
            applied = {r[0] for r in conn.execute(Q.APPLIED_VERSIONS)}
            self._refuse_newer(applied, latest)
            if applied >= wanted:
                return
        # Under one advisory lock for the whole transaction: of N processes opening an empty
        # database at once, one migrates and the others then find the work done.
        with conn.transaction():
            conn.execute(Q.MIGRATION_LOCK_TIMEOUT)
            conn.execute(Q.MIGRATION_LOCK)
            if self.schema is not None:
                conn.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(self.schema)))
            conn.execute(Q.MIGRATIONS_TABLE)
            applied = {r[0] for r in conn.execute(Q.APPLIED_VERSIONS)}
            self._refuse_newer(applied, latest)
            for mig in migrations:
                if mig.version in applied:
                    continue
                for stmt in split_statements(mig.sql):
                    conn.execute(stmt)
                conn.execute(Q.RECORD_MIGRATION, {"version": mig.version, "name": mig.name})

    def _refuse_newer(self, applied: set[int], latest: int) -> None:
        if applied and max(applied) > latest:
            raise SchemaTooNew(f"{self.describe()} has tenure schema version {max(applied)}; this tenure "
                               f"knows up to {latest}: {LATEST_VERSION_HINT}")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            watchers = list(self._watchers)
        for w in watchers:
            w.close()
        if pool is not None:
            pool.close(timeout=5.0)
        self._watchdog.close()

    # -- deadlines ---------------------------------------------------------------------------
    def deadline(self, seconds: float | None, group: Any = None) -> AbstractContextManager[None]:
        """Within the block, each call this thread makes must answer within ``seconds`` (capped by
        ``call_timeout``; None: no deadline at all) or is cut by the watchdog and fails with
        ``StoreUnavailable``; :meth:`interrupt` cuts the calls of ``group`` at once."""
        if seconds is not None and self.call_timeout is not None:
            seconds = min(seconds, self.call_timeout)
        return call_deadline(seconds, group)

    def interrupt(self, group: Any) -> int:
        """Cut the calls of ``group`` in flight now (a stopping worker); answers how many."""
        return self._watchdog.interrupt(group, "interrupted: the caller is stopping")

    # -- sessions ----------------------------------------------------------------------------
    def _live(self) -> ConnectionPool:
        pool = self._pool
        if pool is None or self._closed:
            raise StoreClosed("the store is closed")
        return pool

    @contextmanager
    def _connection(self, cancel: threading.Event | None, root: bool = True) -> Iterator[psycopg.Connection]:
        """A pooled connection for one block (committed or rolled back at its end like
        ``pool.connection()``). The wait for one is bounded by ``pool_timeout``; a set ``cancel``
        withdraws it with :class:`OperationWithdrawn` before anything ran. The block is watched
        by the deadline this thread set (:meth:`deadline`), else, for a ``root`` call (not the
        application's own transaction), by ``call_timeout``; a call cut at its deadline raises
        ``StoreUnavailable``."""
        spec = deadline_spec()
        seconds = spec.seconds if spec is not None else (self.call_timeout if root else None)
        pool = self._live()
        dog = self._watchdog
        # One watch for the whole block, from the wait for a connection to its return: the wait,
        # the check of a suspect connection and the call are all cut at the deadline.
        watched = seconds is not None and seconds < math.inf
        with dog.watch(-1, seconds, spec and spec.group) if seconds is not None and watched else nullcontext() as call:
            conn = self._getconn(pool, cancel, call)
            try:
                started = time.monotonic()
                if started < self._verify_until or \
                        started - getattr(conn, "_tenure_returned", started) > CHECK_IDLE_AFTER:
                    conn = self._verified(pool, conn, started + self.pool_timeout, call)
                if call is None:
                    with conn:  # a pooled connection is not closed by this, only committed/rolled back
                        yield conn
                else:
                    dog.rebind(call, conn.pgconn.socket)
                    try:
                        with conn:
                            yield conn
                    except Exception as exc:
                        if not call.fired:
                            raise
                        self._suspect()
                        raise StoreUnavailable(
                            f"no answer from {self.describe()}: {call.reason}; the connection was closed "
                            "(the call may or may not have taken effect)", retriable=True) from exc
            finally:
                if call is not None:
                    dog.rebind(call, -1)  # never cut a socket once it is back in the pool
                # Stamped here, not by a pool ``reset`` callback: with one, psycopg_pool hands every
                # returned connection to its worker thread (a thread hop per claim and per
                # settlement, ~12 us of GIL time per job in a drain, and a claim could wait for it).
                conn._tenure_returned = time.monotonic()  # type: ignore[attr-defined]
                pool.putconn(conn)

    def _getconn(self, pool: ConnectionPool, cancel: threading.Event | None, call: Any) -> psycopg.Connection:
        """A connection from the pool within ``pool_timeout``. A set ``cancel`` withdraws a call
        that has to wait (:class:`OperationWithdrawn`, nothing ran); a watched call (``call``) that
        reaches its deadline, or is interrupted, while waiting fails with ``StoreUnavailable``."""
        if cancel is None and call is None:
            return pool.getconn()
        # Like SQLite's gate: a free connection is taken even when ``cancel`` is set; the
        # cancellation only withdraws a call that would have to WAIT.
        deadline = time.monotonic() + self.pool_timeout
        while True:
            try:
                return pool.getconn(timeout=max(min(CANCEL_POLL, deadline - time.monotonic()), 0.001))
            except PoolTimeout:
                if cancel is not None and cancel.is_set():
                    raise OperationWithdrawn("withdrawn while waiting for a database connection; "
                                             "nothing ran") from None
                if call is not None and call.fired:
                    raise StoreUnavailable(f"no connection to {self.describe()}: {call.reason}; nothing ran",
                                           retriable=True) from None
                if time.monotonic() >= deadline:
                    raise PoolTimeout(f"couldn't get a connection after {self.pool_timeout:.2f} sec") from None

    @contextmanager
    def session(self, cancel: threading.Event | None = None) -> Iterator[PostgresSession]:
        with self._connection(cancel) as conn:
            yield PostgresSession(conn)

    @contextmanager
    def transaction(self, cancel: threading.Event | None = None) -> Iterator[PostgresSession]:
        spec = deadline_spec()
        with self._connection(cancel, root=False) as conn:
            with conn.transaction():
                if spec is not None and spec.seconds < math.inf:
                    # A transaction of several round trips under a deadline (a worker's failures and
                    # their dead letters): the server also ends it if it outlives the deadline or sits
                    # idle (a client that vanished mid-transaction), so its locks never linger.
                    ms = str(max(int(spec.seconds * 1000), 1))
                    conn.execute(Q.LOCAL_TIMEOUTS, {"ms": ms})
                yield PostgresSession(conn)

    def adopt(self, connection: Any) -> PostgresSession:
        if not isinstance(connection, psycopg.Connection):
            raise InvalidType(f"conn= must be a psycopg.Connection on a PostgreSQL store, got "
                              f"{type(connection).__name__}")
        if self.schema is not None:
            # A SELECT without FROM answers exactly one row.
            current = connection.execute(Q.CURRENT_SCHEMA).fetchone()[0]  # type: ignore[index]
            if current != self.schema:
                raise InvalidArgument(
                    f"conn= resolves tables in schema {current!r} but this store's tables are in "
                    f"{self.schema!r}: connect it with options='-c search_path={self.schema},public'")
        self._check_same_database(connection)
        return PostgresSession(connection)

    def _check_same_database(self, connection: psycopg.Connection) -> None:
        """Refuse (:class:`ForeignConnection`) a ``conn=`` on another database or server than the
        store's: its jobs would land where no worker of this store looks. One query per server
        session, remembered by its backend pid."""
        info = connection.info
        key = (info.host, info.port, info.dbname, info.backend_pid)
        if key in self._adopted:
            return
        if self._identity is None:
            with self._connection(None) as own:
                self._identity = tuple(own.execute(Q.DATABASE_IDENTITY).fetchone() or ())
        theirs = tuple(connection.execute(Q.DATABASE_IDENTITY).fetchone() or ())
        if theirs != self._identity:
            raise ForeignConnection(
                f"conn= is connected to database {theirs[0]!r} of another server or database than "
                f"this store ({self.describe()}, database {self._identity[0]!r}): a job enqueued "
                f"through it would never reach this store's workers")
        if len(self._adopted) > 1024:
            self._adopted.clear()
        self._adopted.add(key)

    def watcher(self) -> PostgresWatcher:
        self._live()
        w = PostgresWatcher(self.conninfo, self.schema, {
            # Detect a silently dropped connection (a partition, a killed host) within ~30 s.
            "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3})
        with self._lock:
            if self._closed:
                w.close()
                raise StoreClosed("the store is closed")
            self._watchers.add(w)
        return w

    def cancel_watcher(self) -> PostgresWatcher:
        """``LISTEN tenure_cancel`` (migration 0010's trigger notifies it when a cancel request
        flags a running job), on a dedicated connection like :meth:`watcher`."""
        self._live()
        w = PostgresWatcher(self.conninfo, self.schema, {
            "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3},
            channel=Q.CANCEL_CHANNEL)
        with self._lock:
            if self._closed:
                w.close()
                raise StoreClosed("the store is closed")
            self._watchers.add(w)
        return w

    def reset_for_tests(self) -> None:
        with self.session() as s:
            s.execute(s.execute(Q.TRUNCATE_STATEMENT).fetchone()[0])

    def _verified(self, pool: ConnectionPool, conn: psycopg.Connection, deadline: float,
                  call: Any = None) -> psycopg.Connection:
        """Check a connection (one empty round trip) before use when it sat idle longer than
        :data:`CHECK_IDLE_AFTER` (the server may have dropped it: a restart, an idle timeout), and
        every connection for :data:`SUSPECT_AFTER_LOSS` seconds after one was lost (terminated
        backends, a failover: its siblings are likely dead too, and a retry must get a live one).
        A dead one is discarded and the next taken at once, up to ``pool_max + 1`` of them (the
        pool's own check loop would sleep a second, then two, ... between tries)."""
        for _ in range(self.pool_max + 1):
            now = time.monotonic()
            if now >= self._verify_until and now - getattr(conn, "_tenure_returned", now) <= CHECK_IDLE_AFTER:
                return conn
            try:
                if call is not None:
                    self._watchdog.rebind(call, conn.pgconn.socket)  # the check is cut at the deadline
                ConnectionPool.check_connection(conn)
                return conn
            except Exception:  # noqa: BLE001 - any failure (a cut check too): the connection is not usable
                self._suspect()
                if call is not None:
                    self._watchdog.rebind(call, -1)
                pool.putconn(conn)  # broken: the pool discards it and opens another
                if call is not None and call.fired:
                    raise StoreUnavailable(f"no connection to {self.describe()}: {call.reason}; nothing ran",
                                           retriable=True) from None
                conn = self._getconn(pool, None, call) if call is not None else \
                    pool.getconn(timeout=max(deadline - time.monotonic(), 0.001))
        return conn

    def _suspect(self) -> None:
        """A connection was lost: check every pooled connection before use for a while."""
        self._verify_until = time.monotonic() + SUSPECT_AFTER_LOSS

    # -- errors ------------------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        return scrub(text, self._secrets)

    def classify(self, exc: BaseException) -> BaseException:
        if isinstance(exc, TenureError):
            return exc
        where = self.describe()
        if isinstance(exc, PoolTimeout):
            return StoreUnavailable(
                f"no connection to {where} within {self.pool_timeout:g} s: the server is unreachable "
                f"or all {self.pool_max} pooled connections are busy (raise pool_max or pool_timeout)")
        if isinstance(exc, PoolClosed):
            return StoreClosed("the store is closed")
        if not isinstance(exc, psycopg.Error):
            return exc
        state = exc.sqlstate or ""
        detail = self._scrub(" ".join(str(exc).split())) or type(exc).__name__
        if state.startswith("54"):  # program_limit_exceeded & co: permanent, never "could not reach"
            return StoreLimitExceeded(f"{where} refused a value or statement over one of its limits "
                                      f"(SQLSTATE {state}); nothing was written: {detail}")
        if state == "53100":
            return StorageFull(f"the disk holding {where} is full; nothing was written ({detail})")
        if state in ("55P03", "55006", "57014", "40P01") or state.startswith("40"):
            return StoreBusy(f"{where} stayed locked or busy (SQLSTATE {state}): {detail}")
        if state in ("25006", "42501"):
            return ReadOnlyStore(f"{where} cannot be written (SQLSTATE {state}): {detail}")
        if state.startswith("08") or state.startswith("57P") or state == "53300" or \
                isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            # ``retriable``: the connection broke (or never opened); a call whose repeat is
            # harmless (an enqueue with its minted ids) may retry on a fresh connection.
            self._suspect()
            return StoreUnavailable(f"lost or could not reach {where}: {detail}", retriable=True)
        return StorageError(f"PostgreSQL error on {where} (SQLSTATE {state or 'none'}): {detail}")




