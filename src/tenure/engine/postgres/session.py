"""The PostgreSQL session: every Session method of engine/base.py on one pooled connection, each
dialect statement from queries.py; the engine (engine.py) hands sessions out."""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from ...rate_window import Rate
from ..base import Session
from ..common import SharedMethods, SharedStatements
from ..limited import QueueLimits, claim_queue
from ..rows import (
    DEFAULT_MAX_ATTEMPTS,
    HISTORY_KEEP,
    CheckpointRow,
    DependencyRow,
    Edge,
    Inserted,
    JobRow,
    NewJob,
    PlainRow,
    Settle,
    SettledAndClaimed,
    dependency_row,
    job_row,
    job_rows,
    new_job_params,
)
from . import admin_queries as AQ
from . import dependency_queries as DQ
from . import maintenance as M
from . import queries as Q
from . import queues as QU
from .conn import _atomic, _pipelined
from .insights import PostgresInsightsMixin
from .maintenance import PostgresMaintenanceMixin
from .plain_copy import copy_plain
from .queues import PostgresQueuesMixin
from .signals import PostgresSignalsMixin


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

    def fair_groups(self, queue: str, now: int) -> list[tuple[str, int]]:
        return [(r[0], r[1]) for r in self._conn.execute(Q.FAIR_GROUPS, {"queue": queue, "now": now})]

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

log = logging.getLogger("tenure.engine.postgres")

#: Rows per INSERT statement of a bulk enqueue (bounded parameter size; one transaction overall).
#: From this many rows on, an insert streams them with COPY into a staging table and moves them
#: with one INSERT ... SELECT (Q.INSERT_STAGED); below it, one INSERT_MANY statement costs fewer
#: round trips (measured: docs/performance.md).
COPY_MIN_ROWS = 64
#: Reusable cursors of a pooled connection (see :func:`_cursor`): the claim and settle path's
#: pipeline holds three answers at once; the first also serves the statements sent alone.
REUSED_CURSORS = 3


class PostgresSession(PostgresQueuesMixin, PostgresSignalsMixin, PostgresMaintenanceMixin, PostgresInsightsMixin, SharedMethods, Session):
    dialect = "postgres"
    __slots__ = ("_conn",)
    _shared_sql = SharedStatements(
        schedule_delete=M.SCHEDULE_DELETE, schedule_due=M.SCHEDULE_DUE, schedule_pause=M.SCHEDULE_PAUSE,
        schedule_resume=M.SCHEDULE_RESUME, schedule_advance=M.SCHEDULE_ADVANCE,
        leader_release=M.LEADER_RELEASE, worker_list=M.WORKER_LIST, queue_list=QU.QUEUE_LIST,
        redrive_select=QU.REDRIVE_SELECT, cancel_flagged=Q.CANCEL_FLAGGED)

    def __init__(self, conn: psycopg.Connection) -> None:
        self._conn = conn

    # -- clock --------------------------------------------------------------------------------
    def now_ms(self) -> int:
        return self._conn.execute(Q.NOW_MS).fetchone()[0]

    # -- jobs ----------------------------------------------------------------------------------
    def job_insert(self, jobs: Sequence[NewJob], now: int | None) -> list[Inserted]:
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
            return [Inserted(j.id, True) for j in jobs]
        # Some were not written: an existing id answers itself; a uniqueness-policy duplicate
        # answers the job that holds the key.
        answered: set[str] = set()
        refused = [j for j in jobs if j.id not in inserted]
        existing = {r[0] for r in conn.execute(Q.EXISTING_IDS, {"ids": [j.id for j in refused]})}
        out: list[Inserted] = []
        for j in jobs:
            if j.id in inserted and j.id not in answered:
                answered.add(j.id)
                out.append(Inserted(j.id, True))
            elif j.id in existing or j.id in inserted:
                out.append(Inserted(j.id, False))
            else:
                row = conn.execute(Q.FIND_SINGLETON, {"queue": j.queue, "singleton_key": j.singleton_key,
                                                      "singleton_on": j.singleton_on}).fetchone()
                out.append(Inserted(row[0] if row else j.id, False))
        return out

    resolves_queue_defaults = True
    copies_jobs = True

    def job_copy(self, jobs: Iterable[NewJob], now: int) -> list[str]:
        conn = self._conn
        with conn.transaction():  # its own, or a savepoint in the caller's: all or nothing
            return _copy_fresh(conn, jobs, now)

    def job_insert_plain(self, chunks: Iterable[Sequence[PlainRow]], templates: dict[str, NewJob],
                         now: int) -> bool:
        with self._conn.transaction():  # its own, or a savepoint in the caller's: all or nothing
            copy_plain(self._conn, chunks, templates, now)
        return True

    def job_insert_resolved(self, job: NewJob, retention_ms: int | None, now: int | None) -> str | None:
        params = new_job_params(job, now)
        params["retention_ms"] = retention_ms
        params["default_max_attempts"] = DEFAULT_MAX_ATTEMPTS
        # The first of a pooled connection's reusable cursors (_cursor), as a lone settlement's;
        # an adopted connection gets a cursor of its own. Its one row is read here, in full.
        row = _cursor(self._conn, 0).execute(Q.INSERT_RESOLVED, params).fetchone()
        return None if row is None else row[0]

    def job_get(self, job_id: str) -> JobRow | None:
        return job_row(_cursor(self._conn, 0).execute(Q.GET, {"id": job_id}).fetchone())

    def job_claim(self, *, kinds, queues, owner, lease_ms, now, limit, instance=None) -> list[JobRow]:
        return self._claim(kinds, queues, owner, lease_ms, now, limit, None, instance).claimed

    def job_complete_and_claim(self, items, now, *, kinds, queues, owner, lease_ms, limit, instance=None):
        return self._claim(kinds, queues, owner, lease_ms, now, limit, items, instance)

    def _claim(self, kinds, queues, owner, lease_ms, now, limit, settle: Sequence[Settle] | None,
               instance: str | None = None) -> SettledAndClaimed:
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
        # On tenure's own connection (autocommit, no transaction of the caller's), the claim is
        # prepared at its first use and planned once per connection (Q.GENERIC_PLAN): by default
        # psycopg prepares it at the 6th use and the server plans 5 more custom plans before it
        # settles on the generic plan it then keeps, ~10 plannings of ~1 ms (several on a
        # loaded host) per pooled connection, the slowest claims of a fresh worker.
        ours = conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE
        with _atomic(conn) if expect_limits else nullcontext():
            with _pipelined(conn):
                if settle:
                    done_cur = _cursor(conn, 0).execute(Q.COMPLETE, _complete_params(settle, now))
                limits_cur = _cursor(conn, 1).execute(Q.QUEUE_LIMITS)
                if speculate:
                    if ours:
                        conn.execute(Q.GENERIC_PLAN)  # no answer to read: a cursor of its own
                    main_cur = _cursor(conn, 2).execute(
                        _claim_sql(kinds, queues, limit=limit, copies=queues is not None),
                        _claim_params(kinds, queues, owner, lease_ms, now, limit, instance),
                        prepare=True if ours else None)
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
        # A queue that can hold a job back on another's lease (Session.limit_held): a concurrency
        # or group limit, a singleton/stately policy (lim[3]), or a limited queue with none of
        # the limits that wake by the clock (rate, group rate, fairness): strict_fifo.
        self.limit_held = len(rows) < limit and any(
            lim[1] is not None or lim[2] is not None or lim[3] or (lim[4] is None and lim[6] is None and lim[8] is None)
            for lim in limits)
        if spent:
            self._reap(spent, now)
        if len(rows) > 1:
            rows.sort(key=_claim_order)
        return SettledAndClaimed(done, rows)

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
        for name, conc, group_limit, _serial, rate, rate_ms, grate, grate_ms, fairness, weights in limits:
            if len(rows) >= limit:
                break
            lim = QueueLimits(name, conc, group_limit, None if rate is None else Rate(rate, rate_ms),
                              None if grate is None else Rate(grate, grate_ms), fairness,
                              None if weights is None else json.loads(weights))
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
        return job_row(self._conn.execute(Q.RENEW, {"id": job_id, "token": token, "lease_ms": lease_ms,
                                                    "now": now}).fetchone())

    def job_lock(self, job_id: str, token: str, now: int | None) -> bool:
        return self._conn.execute(Q.LOCK, {"id": job_id, "token": token, "now": now}).fetchone() is not None

    def job_complete(self, items: Sequence[Settle], now: int | None) -> set[str]:
        if not items:
            return set()
        return {r[0] for r in _cursor(self._conn, 0).execute(Q.COMPLETE, _complete_params(items, now)).fetchall()}

    def job_fail(self, items: Sequence[Settle], now: int | None) -> list[JobRow]:
        if not items:
            return []
        return job_rows(self._conn.execute(Q.FAIL, {
            "now": now, "ids": [it.job_id for it in items], "tokens": [it.token for it in items],
            "errors": [it.error for it in items], "delays": [int(it.delay_ms) for it in items],
            "deads": [bool(it.dead) for it in items], "jitters": [float(it.jitter) for it in items],
            "entries": [it.entry for it in items], "fixed": [bool(it.fixed_delay) for it in items],
            "keep": HISTORY_KEEP,
        }))

    def job_snooze(self, job_id: str, token: str, delay_ms: int, now: int | None) -> JobRow | None:
        return job_row(self._conn.execute(Q.SNOOZE, {"id": job_id, "token": token, "delay_ms": delay_ms,
                                                     "now": now}).fetchone())

    def job_cancel(self, job_id, token, now) -> JobRow | None:
        if token is None:
            return job_row(self._conn.execute(Q.CANCEL_QUEUED, {"id": job_id, "now": now}).fetchone())
        return job_row(self._conn.execute(Q.CANCEL_LEASED, {"id": job_id, "token": token, "now": now}).fetchone())

    def job_release(self, job_id: str, token: str, now: int | None) -> JobRow | None:
        return job_row(self._conn.execute(Q.RELEASE, {"id": job_id, "token": token, "now": now}).fetchone())

    def job_request_cancel(self, job_id: str, now: int | None) -> JobRow | None:
        return job_row(self._conn.execute(Q.REQUEST_CANCEL, {"id": job_id, "now": now}).fetchone())

    def job_cancel_abandoned(self, now: int | None) -> list[JobRow]:
        return job_rows(self._conn.execute(Q.CANCEL_ABANDONED, {"now": now}))

    def job_requeue(self, job_id, now) -> JobRow | None:
        return job_row(self._conn.execute(Q.REQUEUE, {"id": job_id, "now": now}).fetchone())

    def job_counts(self) -> dict[str, int]:
        return dict(self._conn.execute(AQ.COUNTS).fetchall())

    def job_page(self, *, state, kind, queue, after, limit, tag=None, descending=False) -> list[JobRow]:
        params = {"state": state, "kind": kind, "queue": queue, "tag": tag, "after": after, "limit": limit}
        return job_rows(self._conn.execute(_page_sql(params, descending), params))

    def job_progress(self, job_id, token, fraction, note, attempt, now) -> bool:
        cur = self._conn.execute(Q.PROGRESS, {"id": job_id, "token": token, "fraction": fraction, "note": note,
                                              "attempt": attempt, "now": now})
        return cur.rowcount == 1

    def job_match(self, *, filters, eligible, after, limit, now) -> list[str]:
        params = {**filters, "after": after, "limit": limit, "now": now}
        used = "".join(text for name, text in AQ.MATCH_FILTERS.items() if params.get(name) is not None)
        sql = AQ.MATCH.format(filters=used + AQ.MATCH_ELIGIBLE[eligible])
        return [r[0] for r in self._conn.execute(sql, params)]

    def job_delete(self, job_ids, now) -> list[str]:
        return [r[0] for r in self._conn.execute(AQ.DELETE_JOBS, {"ids": list(job_ids), "now": now})]

    def job_sweep(self, settled_before: int, limit: int) -> int:
        return self._conn.execute(AQ.SWEEP, {"before": settled_before, "limit": limit}).fetchone()[0]

    # -- dependencies ------------------------------------------------------------------------
    def job_states(self, job_ids: Sequence[str]) -> dict[str, str]:
        if not job_ids:
            return {}
        return dict(self._conn.execute(DQ.JOB_STATES, {"ids": list(job_ids)}).fetchall())

    def dependency_mark_parents(self, job_ids: Sequence[str]) -> dict[str, str]:
        if not job_ids:
            return {}
        # In id order, so two enqueues marking shared parents never wait on each other in a cycle.
        return dict(self._conn.execute(DQ.MARK_PARENTS, {"ids": sorted(job_ids)}).fetchall())

    def dependency_add(self, edges: Sequence[Edge], waiting: dict[str, int],
                       cancelled: Sequence[tuple[str, str]], now: int | None) -> None:
        conn = self._conn
        if edges:
            conn.execute(DQ.ADD_DEPENDENCIES, {
                "jobs": [e.job_id for e in edges], "parents": [e.parent_id for e in edges],
                "positions": [e.position for e in edges], "policies": [e.policy for e in edges],
                "released": [int(e.released) for e in edges]})
        counted = [(jid, n) for jid, n in waiting.items() if n]
        if counted:
            conn.execute(DQ.SET_WAITING, {"ids": [c[0] for c in counted], "counts": [c[1] for c in counted]})
        for jid, error in cancelled:
            conn.execute(DQ.CANCEL_DEPENDENT, {"id": jid, "error": error, "now": now})

    def dependency_list(self, job_id: str, parents: bool) -> list[DependencyRow]:
        return [dependency_row(r) for r in self._conn.execute(DQ.PARENTS_OF if parents else DQ.DEPENDENTS_OF,
                                                              {"id": job_id})]

    # -- checkpoints ---------------------------------------------------------------------------
    def checkpoint_save(self, run_id, node_id, value, generation, token, now) -> bool:
        cur = self._conn.execute(Q.CHECKPOINT_SAVE, {"run_id": run_id, "node_id": node_id, "value": value,
                                                     "generation": generation, "token": token, "now": now})
        return cur.rowcount == 1

    def checkpoint_list(self, run_id: str, max_generation: int) -> list[CheckpointRow]:
        return [CheckpointRow(*r) for r in self._conn.execute(Q.CHECKPOINT_LIST, {
            "run_id": run_id, "max_generation": max_generation})]

    # -- application SQL -------------------------------------------------------------------
    def execute(self, sql: str, params: Any = None) -> Any:
        return self._conn.execute(sql, params)

    @property
    def connection(self) -> psycopg.Connection:
        return self._conn


def _cursor(conn: psycopg.Connection, n: int) -> psycopg.Cursor:
    """The ``n``-th of a pooled connection's reusable cursors (engine._stamp_new), or a new one
    on a connection tenure did not open. A statement on it must be read to the end before the next
    statement on the same ``n`` is sent (in a pipeline: one statement per cursor). The hot
    statements outside a pipeline (a root enqueue's INSERT, a lone settlement, ``get``) use
    cursor 0."""
    cursors = getattr(conn, "_tenure_cursors", None)
    return conn.cursor() if cursors is None else cursors[n]


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
    return (-row.priority, row.run_at, row.created_at, row.id)


_CLAIM_CACHE: dict[tuple, str] = {}


def _split_spent(raw: list[Any], spent: list[str]) -> list[JobRow]:
    """The claimed rows of a CLAIM answer, as records; the ids of the spent expired leases it met
    (flag NULL) go to ``spent``."""
    rows = job_rows(raw)
    if all(r.reclaimed is not None for r in rows):
        return rows
    spent.extend(r.id for r in rows if r.reclaimed is None)
    return [r for r in rows if r.reclaimed is not None]


def _reclaimed(rows: list[JobRow]) -> bool:
    return len(rows) == 1 and bool(rows[0].reclaimed)


def _claim_sql(kinds, queues, *, limited: bool = False, group_filter: bool = False, limit: int = 1,
               revive: bool = True, copies: bool = True, group_rate: bool = False, one_group: bool = False) -> str:
    """The claim statement for this shape of call (cached: the text depends only on the shape and
    the limit, a small set in practice: a worker claims up to its free slots). It skips paused
    queues, and limited ones too unless ``limited`` (the claim of one limited queue, made under
    its advisory lock). ``revive``: it may lease one expired lease again (alone). ``copies``: it
    may take dead letters (the caller named the queues; docs/queues.md, "Dead letters"). A limited
    claim enforces strict_fifo; ``group_rate`` skips groups whose rate window is closed;
    ``one_group`` takes only ``%(only_group)s``'s jobs."""
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
        _CLAIM_CACHE[key] = sql = _squeezed(sql)
    return sql


def _squeezed(sql: str) -> str:
    """``sql`` with each run of whitespace outside its string literals made one space: psycopg
    converts a statement's ``%(name)s`` placeholders once and caches the result only for a text
    of at most 4096 characters; the worker's claim was 4321 (its indentation), so every claim
    re-parsed it (~0.1 ms of client CPU before it was sent)."""
    parts = re.split(r"('(?:[^']|'')*')", sql)
    return "".join(part if i % 2 else re.sub(r"\s+", " ", part) for i, part in enumerate(parts)).strip()


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
    key = (*(params[name] is not None for name in AQ.PAGE_FILTERS), descending)
    sql = _PAGE_CACHE.get(key)
    if sql is None:
        filters = "".join(AQ.PAGE_AFTER_DESC if descending and name == "after" else text
                          for name, text in AQ.PAGE_FILTERS.items() if params[name] is not None)
        sql = _PAGE_CACHE[key] = AQ.PAGE.format(filters=filters, direction="DESC" if descending else "")
    return sql
