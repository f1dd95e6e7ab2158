"""The SQLite session: every Session method of engine/base.py on the store's connection, each
dialect statement from queries.py; the engine (engine.py) hands sessions out under its gate."""

from __future__ import annotations

import functools
import json
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from ...rate_window import Rate
from ..base import Session
from ..common import SharedMethods, SharedStatements
from ..limited import HOLDING_POLICIES, QueueLimits, claim_queue, record_starts
from ..rows import (
    DEFAULT_MAX_ATTEMPTS,
    HISTORY_KEEP,
    NOT_UTF8,
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
from . import dependency_queries as DQ
from . import maintenance as M
from . import queries as Q
from . import queues as QU
from .bulk_insert import insert_many, insert_plain
from .insights import SQLiteInsightsMixin
from .maintenance import SQLiteMaintenanceMixin
from .queues import SQLiteQueuesMixin
from .signals import SQLiteSignalsMixin


class _LimitedSQLite:
    """The statements of :func:`tenure.engine.limited.claim_queue` on SQLite, inside the claim's
    write transaction (SQLite's one writer makes every count in it exact)."""

    def __init__(self, session: SQLiteSession, kinds, owner, lease_ms, now, instance, copies: bool) -> None:
        self._conn = session._conn
        self._kinds, self._owner, self._lease_ms = kinds, owner, lease_ms
        self._now, self._instance, self._copies = now, instance, copies

    def leased_count(self, queue: str, now: int) -> int:
        return self._conn.execute(Q.LEASED_IN_QUEUE, (queue, now)).fetchone()[0]

    def saturated_groups(self, queue: str, now: int, group_limit: int) -> list[str]:
        return [r[0] for r in self._conn.execute(Q.SATURATED_GROUPS, (queue, now, group_limit))]

    def windows(self, queue, keys):
        out = {}
        for scope, key in keys:
            row = self._conn.execute(Q.RATE_WINDOW_GET, (queue, scope, key)).fetchone()
            if row is not None:
                out[(scope, key)] = (row[0], row[1])
        return out

    def save_windows(self, queue, rows) -> None:
        self._conn.executemany(Q.RATE_WINDOW_SAVE, [(queue, *r) for r in rows])

    def fair_groups(self, queue: str, now: int) -> list[tuple[str, int]]:
        return [(r[0], r[1]) for r in self._conn.execute(Q.FAIR_GROUPS, {"queue": queue, "now": now})]

    def next_group_open(self, queue: str, now: int) -> int | None:
        return self._conn.execute(Q.RATE_WINDOW_NEXT_OPEN, (queue, now)).fetchone()[0]

    def claim(self, queue, want, *, full_groups, group, group_rate, revive):
        params = _claim_params(self._kinds, [queue], self._owner, self._lease_ms, self._now, want, self._instance)
        if full_groups is not None:
            params["full_groups"] = json.dumps(full_groups)
        if group is not None:
            params["only_group"] = group
        sql = _claim_sql(1, self._kinds is not None, full_groups is not None, self._copies,
                         limited=True, group_rate=group_rate, one_group=group is not None)
        return job_rows(self._conn.execute(sql, params)), False

def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class SQLiteSession(SQLiteQueuesMixin, SQLiteSignalsMixin, SQLiteMaintenanceMixin, SQLiteInsightsMixin, SharedMethods, Session):
    dialect = "sqlite"
    __slots__ = ("_conn", "_owns_tx", "_holding", "_quiet_changes")
    _shared_sql = SharedStatements(
        schedule_delete=M.SCHEDULE_DELETE, schedule_due=M.SCHEDULE_DUE, schedule_pause=M.SCHEDULE_PAUSE,
        schedule_resume=M.SCHEDULE_RESUME, schedule_advance=M.SCHEDULE_ADVANCE,
        leader_release=M.LEADER_RELEASE, worker_list=M.WORKER_LIST, queue_list=QU.QUEUE_LIST,
        redrive_select=QU.REDRIVE_SELECT, cancel_flagged=Q.CANCEL_FLAGGED)

    def __init__(self, conn: sqlite3.Connection, owns_tx: bool = True) -> None:
        self._conn = conn
        self._owns_tx = owns_tx  # False on an adopted connection: the caller owns the transaction
        self._holding = False  # the last claim tried a queue that can hold a job back (limit_held)
        #: Rows this session changed that can make no job claimable by another worker: the rows a
        #: claim leased, the rows a completion settled and the checkpoints it pruned. The engine
        #: compares them with the connection's total changes (triggers included) to tell its
        #: watchers whether a commit of its own may have (SQLiteEngine.loud_commits).
        self._quiet_changes = 0

    def _atomic(self):
        """A write transaction for a multi-statement operation; a no-op inside an open one or on
        the caller's adopted connection (whose transaction we must never commit)."""
        if not self._owns_tx:
            return nullcontext()
        return _atomic(self._conn)

    # -- clock --------------------------------------------------------------------------------
    def now_ms(self) -> int:
        return _wall_ms()

    # -- jobs ----------------------------------------------------------------------------------
    def job_insert(self, jobs: Sequence[NewJob], now: int | None) -> list[Inserted]:
        now = _wall_ms() if now is None else now
        if len(jobs) == 1:
            return self._insert(jobs, now)
        with self._atomic():
            return self._insert(jobs, now)

    def job_insert_plain(self, chunks: Iterable[Sequence[PlainRow]], templates: dict[str, NewJob],
                         now: int) -> bool:
        with self._atomic():
            return insert_plain(self._conn, chunks, templates, now)

    def _insert(self, jobs: Sequence[NewJob], now: int) -> list[Inserted]:
        conn = self._conn
        out: list[Inserted] = []
        if len(jobs) > 1 and all(j.singleton_key is None for j in jobs):
            return insert_many(conn, jobs, now)
        for j in jobs:
            if conn.execute(Q.INSERT, _insert_params(j, now)).rowcount == 1:
                out.append(Inserted(j.id, True))
                continue
            if conn.execute("SELECT 1 FROM tenure_jobs WHERE id = ?", (j.id,)).fetchone():
                out.append(Inserted(j.id, False))
                continue
            row = conn.execute(Q.FIND_SINGLETON, {"queue": j.queue, "singleton_key": j.singleton_key,
                                                  "singleton_on": j.singleton_on}).fetchone()
            out.append(Inserted(row[0] if row else j.id, False))
        return out

    def job_get(self, job_id: str) -> JobRow | None:
        return self._readable(lambda: job_row(self._conn.execute(Q.GET, (job_id,)).fetchone()))

    # -- text that is not UTF-8 ------------------------------------------------------------------
    # tenure never writes such text (docs/guarantees.md, "Liveness: every outcome settles"), but
    # foreign SQL can, and tenure before that section did (a result with a lone surrogate). The
    # driver refuses to read it, which would fail a listing, or a claim after its UPDATE leased
    # the rows. Every statement that reads job rows back goes through one of these two: on that
    # refusal it is undone and runs again with such text read as NOT_UTF8 + its repaired text,
    # which the semantics layer shows as a tenure.Undecodable value (and a claim settles dead).

    def _readable(self, read):
        """A pure read, read again leniently when a TEXT column is not UTF-8."""
        try:
            return read()
        except sqlite3.OperationalError as exc:
            if not _not_utf8(exc):
                raise
        with _lenient(self._conn):
            return read()

    def _undoable(self, run):
        """A statement batch that writes and reads rows back, undone and run again leniently when
        a TEXT column it reads is not UTF-8: in a transaction of its own (BEGIN IMMEDIATE), or
        under a savepoint inside the caller's."""
        conn = self._conn
        if not conn.in_transaction:
            if not self._owns_tx:
                return run()  # the caller's connection in autocommit: nothing to undo with
            try:
                with _atomic(conn):
                    return run()
            except sqlite3.OperationalError as exc:
                if not _not_utf8(exc):
                    raise
            with _atomic(conn), _lenient(conn):
                return run()
        conn.execute("SAVEPOINT tenure_utf8")
        try:
            try:
                out = run()
            except sqlite3.OperationalError as exc:
                if not _not_utf8(exc):
                    raise
                conn.execute("ROLLBACK TO tenure_utf8")
                with _lenient(conn):
                    out = run()
        except BaseException:
            try:
                conn.execute("ROLLBACK TO tenure_utf8")
                conn.execute("RELEASE tenure_utf8")
            except sqlite3.Error:
                pass  # the transaction itself is gone; the caller rolls back
            raise
        conn.execute("RELEASE tenure_utf8")
        return out

    def job_claim(self, *, kinds, queues, owner, lease_ms, now, limit, instance=None) -> list[JobRow]:
        rows = self._undoable(lambda: self._claim_rows(kinds, queues, owner, lease_ms, now, limit, instance))
        self.limit_held = self._holding and len(rows) < limit
        self._quiet_changes += len(rows)
        return rows

    def _claim_rows(self, kinds, queues, owner, lease_ms, now, limit, instance) -> list[JobRow]:
        now = _wall_ms() if now is None else now
        conn = self._conn
        self.rate_wake_at = None
        self._holding = False
        wanted = None if queues is None else set(queues)
        free: list[str] = []
        limited: list[QueueLimits] = []
        registry = conn.execute(Q.QUEUE_REGISTRY).fetchall()
        # Dead letters are claimed only by a claim that names their queue (docs/queues.md): with
        # no queues named, skip every queue named as a dead-letter queue, and every copy.
        copies = wanted is not None
        letters = set() if copies else {r[4] for r in registry if r[4] is not None}
        for name, paused, conc, group_limit, _, policy, rate, rate_ms, grate, grate_ms, fairness, weights in registry:
            if paused or (wanted is not None and name not in wanted) or name in letters:
                continue
            if conc is not None or group_limit is not None or policy in HOLDING_POLICIES:
                self._holding = True
            if (conc is None and group_limit is None and rate is None and grate is None and fairness is None
                    and policy != "strict_fifo"):
                free.append(name)
            else:
                limited.append(QueueLimits(name, conc, group_limit, None if rate is None else Rate(rate, rate_ms),
                                           None if grate is None else Rate(grate, grate_ms), fairness,
                                           None if weights is None else json.loads(weights)))
        if not free and not limited:
            return []
        # One write transaction: the reclaim, the dead-letter copies of what it settled dead, and
        # the claim (limited queues are counted and leased in it, so no other process can race
        # past a limit: SQLite has one writer). With no expired lease anywhere (one index probe),
        # the claim of free queues is one statement of its own, as it always was.
        expired = conn.execute(Q.ANY_EXPIRED, (now,)).fetchone() is not None
        with self._atomic() if expired or limited else nullcontext():
            if expired:
                revived = self._reclaim(kinds, free + [lim.name for lim in limited], owner, lease_ms, now,
                                        limit, instance, copies)
                if revived is not None:
                    lim = next((x for x in limited if x.name == revived.queue), None)
                    if lim is not None:
                        record_starts(_LimitedSQLite(self, kinds, owner, lease_ms, now, instance, copies),
                                      lim, now, [revived])
                    return [revived]  # an expired lease is run alone (docs/guarantees.md, "Liveness")
            rows = []
            if free:
                rows = job_rows(conn.execute(_claim_sql(len(free), kinds is not None, False, copies),
                                             _claim_params(kinds, free, owner, lease_ms, now, limit, instance)))
                if not limited:
                    return sorted(rows, key=_claim_order) if len(rows) > 1 else rows
            claimer = _LimitedSQLite(self, kinds, owner, lease_ms, now, instance, copies)
            for lim in limited:
                if len(rows) >= limit:
                    break
                got = claim_queue(claimer, lim, now, limit - len(rows), revive=False)
                rows.extend(got.rows)
                if got.wake_at is not None:
                    self.rate_wake_at = min(got.wake_at, self.rate_wake_at or got.wake_at)
            return sorted(rows, key=_claim_order)

    def _reclaim(self, kinds, queues: list[str], owner, lease_ms, now, limit, instance,
                 copies: bool) -> JobRow | None:
        """The expired leases of ``queues`` (RECLAIM): those on their last attempt settled dead and
        copied to their dead-letter queues (in the caller's transaction); answers the one leased
        again, if any."""
        rows = job_rows(self._conn.execute(_reclaim_sql(kinds is not None, copies),
                                           _claim_params(kinds, queues, owner, lease_ms, now, limit, instance)))
        if not rows:
            return None
        dead = [(r.id, str(uuid.uuid4())) for r in rows if r.state == "dead"]
        if dead:
            self.queue_dead_letter(dead, DEFAULT_MAX_ATTEMPTS, now)
        return next((r for r in rows if r.state == "leased"), None)

    def job_renew(self, job_id, token, lease_ms, now) -> JobRow | None:
        now = _wall_ms() if now is None else now
        return job_row(self._conn.execute(Q.RENEW, {"id": job_id, "token": token, "lease_ms": lease_ms,
                                                    "now": now}).fetchone())

    def job_lock(self, job_id: str, token: str, now: int | None) -> bool:
        now = _wall_ms() if now is None else now
        return self._conn.execute(Q.LOCK, {"id": job_id, "token": token, "now": now}).fetchone() is not None

    def job_complete(self, items: Sequence[Settle], now: int | None) -> set[str]:
        now = _wall_ms() if now is None else now
        conn = self._conn
        with self._atomic():
            rows = conn.execute(Q.COMPLETE, {"items": json.dumps(
                [[it.job_id, it.token, it.result] for it in items]), "now": now}).fetchall()
            self._quiet_changes += len(rows)
            if rows:
                self._quiet_changes += conn.execute(Q.PRUNE_CHECKPOINTS, {"settled": json.dumps(rows)}).rowcount
        return {r[0] for r in rows}

    def job_complete_and_claim(self, items, now, *, kinds, queues, owner, lease_ms, limit, instance=None):
        now = _wall_ms() if now is None else now
        with self._atomic():
            done = self.job_complete(items, now) if items else set()
            rows = self.job_claim(kinds=kinds, queues=queues, owner=owner, lease_ms=lease_ms, now=now,
                                  limit=limit, instance=instance) if limit > 0 else []
        return SettledAndClaimed(done, rows)

    def job_fail(self, items: Sequence[Settle], now: int | None) -> list[JobRow]:
        return self._undoable(lambda: self._fail_rows(items, now))

    def _fail_rows(self, items: Sequence[Settle], now: int | None) -> list[JobRow]:
        now = _wall_ms() if now is None else now
        conn = self._conn
        out = []
        with self._atomic():
            for it in items:
                row = conn.execute(Q.FAIL, {"id": it.job_id, "token": it.token, "error": it.error,
                                            "delay_ms": it.delay_ms, "dead": 1 if it.dead else 0, "jitter": it.jitter,
                                            "now": now, "entry": it.entry, "fixed": 1 if it.fixed_delay else 0,
                                            "keep": HISTORY_KEEP}).fetchone()
                if row is not None:
                    out.append(JobRow(*row))
        return out

    def job_snooze(self, job_id: str, token: str, delay_ms: int, now: int | None) -> JobRow | None:
        now = _wall_ms() if now is None else now
        return job_row(self._conn.execute(Q.SNOOZE, {"id": job_id, "token": token, "run_at": now + delay_ms,
                                                     "now": now}).fetchone())

    def job_cancel(self, job_id, token, now) -> JobRow | None:
        now = _wall_ms() if now is None else now
        if token is None:
            return self._undoable(lambda: job_row(self._conn.execute(Q.CANCEL_QUEUED,
                                                                     {"id": job_id, "now": now}).fetchone()))
        return self._undoable(lambda: job_row(self._conn.execute(
            Q.CANCEL_LEASED, {"id": job_id, "token": token, "now": now}).fetchone()))

    def job_release(self, job_id: str, token: str, now: int | None) -> JobRow | None:
        now = _wall_ms() if now is None else now
        return job_row(self._conn.execute(Q.RELEASE, {"id": job_id, "token": token, "now": now}).fetchone())

    def job_request_cancel(self, job_id: str, now: int | None) -> JobRow | None:
        now = _wall_ms() if now is None else now
        return job_row(self._conn.execute(Q.REQUEST_CANCEL, {"id": job_id, "now": now}).fetchone())

    def job_cancel_abandoned(self, now: int | None) -> list[JobRow]:
        now = _wall_ms() if now is None else now
        conn = self._conn
        if conn.execute(Q.CANCEL_FLAGGED + " LIMIT 1").fetchone() is None:
            return []  # the common case: a read, no write transaction
        return job_rows(conn.execute(Q.CANCEL_ABANDONED, {"now": now}))

    def job_requeue(self, job_id, now) -> JobRow | None:
        now = _wall_ms() if now is None else now
        return self._undoable(lambda: job_row(self._conn.execute(Q.REQUEUE, {"id": job_id, "now": now}).fetchone()))

    def job_counts(self) -> dict[str, int]:
        return dict(self._conn.execute(Q.COUNTS).fetchall())

    def job_page(self, *, state, kind, queue, after, limit, tag=None, descending=False) -> list[JobRow]:
        params = {"state": state, "kind": kind, "queue": queue, "tag": tag, "after": after, "limit": limit}
        shape = (*(params[name] is not None for name in Q.PAGE_FILTERS), descending)
        sql = _PAGE_CACHE.get(shape)
        if sql is None:
            filters = "".join(Q.PAGE_AFTER_DESC if descending and name == "after" else text
                              for name, text in Q.PAGE_FILTERS.items() if params[name] is not None)
            sql = _PAGE_CACHE[shape] = Q.PAGE.format(filters=filters, direction="DESC" if descending else "")
        return self._readable(lambda: job_rows(self._conn.execute(sql, params)))

    def job_progress(self, job_id, token, fraction, note, attempt, now) -> bool:
        now = _wall_ms() if now is None else now
        cur = self._conn.execute(Q.PROGRESS, {"id": job_id, "token": token, "fraction": fraction, "note": note,
                                              "attempt": attempt, "now": now})
        return cur.rowcount == 1

    def job_match(self, *, filters, eligible, after, limit, now) -> list[str]:
        params = {**filters, "after": after, "limit": limit, "now": _wall_ms() if now is None else now}
        used = "".join(text for name, text in Q.MATCH_FILTERS.items() if params.get(name) is not None)
        sql = Q.MATCH.format(filters=used + Q.MATCH_ELIGIBLE[eligible])
        return [r[0] for r in self._conn.execute(sql, params)]

    def job_delete(self, job_ids, now) -> list[str]:
        now = _wall_ms() if now is None else now
        with self._atomic():
            ids = [r[0] for r in self._conn.execute(Q.DELETE_JOBS, {"ids": json.dumps(list(job_ids)), "now": now})]
            if ids:
                self._conn.execute(Q.SWEEP_DELETE_CHECKPOINTS, {"ids": json.dumps(ids)})
        return ids

    def job_sweep(self, settled_before: int, limit: int) -> int:
        conn = self._conn
        with self._atomic():
            ids = [r[0] for r in conn.execute(Q.SWEEP_SELECT, {"before": settled_before, "limit": limit})]
            if not ids:
                return 0
            payload = json.dumps(ids)
            conn.execute(Q.SWEEP_DELETE_CHECKPOINTS, {"ids": payload})
            conn.execute(Q.SWEEP_DELETE_JOBS, {"ids": payload})
        return len(ids)

    # -- dependencies ------------------------------------------------------------------------
    def job_states(self, job_ids: Sequence[str]) -> dict[str, str]:
        if not job_ids:
            return {}
        return dict(self._conn.execute(DQ.JOB_STATES, {"ids": json.dumps(list(job_ids))}).fetchall())

    def dependency_mark_parents(self, job_ids: Sequence[str]) -> dict[str, str]:
        if not job_ids:
            return {}
        return dict(self._conn.execute(DQ.MARK_PARENTS, {"ids": json.dumps(list(job_ids))}).fetchall())

    def dependency_add(self, edges: Sequence[Edge], waiting: dict[str, int],
                       cancelled: Sequence[tuple[str, str]], now: int | None) -> None:
        now = _wall_ms() if now is None else now
        conn = self._conn
        conn.executemany(DQ.ADD_DEPENDENCY, [{"job_id": e.job_id, "parent_id": e.parent_id, "position": e.position,
                                             "policy": e.policy, "released": int(e.released)} for e in edges])
        conn.executemany(DQ.SET_WAITING, [{"id": jid, "n": n} for jid, n in waiting.items() if n])
        for jid, error in cancelled:
            conn.execute(DQ.CANCEL_DEPENDENT, {"id": jid, "error": error, "now": now})

    def dependency_list(self, job_id: str, parents: bool) -> list[DependencyRow]:
        sql = DQ.PARENTS_OF if parents else DQ.DEPENDENTS_OF
        return self._readable(lambda: [dependency_row(r) for r in self._conn.execute(sql, (job_id,))])

    def dependency_atomic(self):
        """A write transaction for an enqueue with dependencies, also on an adopted connection in
        autocommit (its rows must appear together); nothing inside the caller's open one, or on an
        adopted connection in the driver's implicit-transaction mode (its first INSERT opens the
        caller's transaction, which the rest joins)."""
        if not self._owns_tx and self._conn.isolation_level is not None:
            return nullcontext()
        return _atomic(self._conn)

    # -- checkpoints ---------------------------------------------------------------------------
    def checkpoint_save(self, run_id, node_id, value, generation, token, now) -> bool:
        now = _wall_ms() if now is None else now
        cur = self._conn.execute(Q.CHECKPOINT_SAVE, {"run_id": run_id, "node_id": node_id, "value": value,
                                                     "generation": generation, "token": token, "now": now})
        return cur.rowcount == 1

    def checkpoint_list(self, run_id: str, max_generation: int) -> list[CheckpointRow]:
        return [CheckpointRow(*r) for r in self._conn.execute(Q.CHECKPOINT_LIST, (run_id, max_generation))]

    # -- application SQL -------------------------------------------------------------------
    def execute(self, sql: str, params: Any = None) -> Any:
        return self._conn.execute(sql, params if params is not None else ())

    @property
    def connection(self) -> sqlite3.Connection:
        return self._conn


_insert_params = new_job_params


def _claim_order(row: JobRow) -> tuple:
    """Claim order (priority DESC, run_at, created_at, id): UPDATE ... RETURNING has none."""
    return (-row.priority, row.run_at, row.created_at, row.id)


_CLAIM_CACHE: dict[tuple[int, bool, bool, bool, bool, bool, bool], str] = {}


_PAGE_CACHE: dict[tuple[bool, ...], str] = {}


def _claim_sql(n_queues: int, by_kind: bool, group_filter: bool, copies: bool = True, *, limited: bool = False,
               group_rate: bool = False, one_group: bool = False) -> str:
    """The claim statement for ``n_queues`` queue heads (cached: it depends only on the shape).
    ``copies``: dead-letter copies may be claimed (the caller named the queues). ``limited``: the
    claim of one limited queue (it enforces strict_fifo; ``group_rate`` skips groups whose rate
    window is closed; ``one_group`` takes only ``:only_group``'s jobs)."""
    key = (n_queues, by_kind, group_filter, copies, limited, group_rate, one_group)
    sql = _CLAIM_CACHE.get(key)
    if sql is None:
        kind = (Q.KIND_FILTER if by_kind else "") + ("" if copies else Q.NO_COPIES)
        group = (Q.GROUP_FILTER if group_filter else "") + (Q.GROUP_RATE_FILTER if group_rate else "") + (
            Q.ONE_GROUP_FILTER if one_group else "")
        serial = Q.SINGLETON_FILTER + (Q.STRICT_FILTER if limited else "")
        index = "tenure_jobs_group_head" if one_group else "tenure_jobs_claim"
        heads = [Q.CLAIM_QUEUE_HEAD.format(i=i, kind_filter=kind, group_filter=group, singleton_filter=serial,
                                           index=index) for i in range(n_queues)]
        sql = Q.CLAIM.format(heads="\n    UNION ALL".join(heads))
        _CLAIM_CACHE[key] = sql
    return sql


@functools.lru_cache(maxsize=4)
def _reclaim_sql(by_kind: bool, copies: bool = True) -> str:
    return Q.RECLAIM.format(kind_filter=(Q.KIND_FILTER if by_kind else "") + ("" if copies else Q.NO_COPIES))


@functools.lru_cache(maxsize=256)
def _json_list(names: tuple[str, ...]) -> str:
    """The JSON array of a claim's kinds or queues: the same few lists on every claim of a worker."""
    return json.dumps(list(names))


def _claim_params(kinds, queues: list[str], owner, lease_ms, now, limit, instance=None) -> dict[str, Any]:
    params: dict[str, Any] = {"owner": owner, "instance": instance, "lease_ms": lease_ms, "now": now,
                              "limit": limit,
                              "queues": _json_list(tuple(queues))}
    if kinds is not None:
        params["kinds"] = _json_list(tuple(kinds))
    for i, name in enumerate(queues):
        params[f"q{i}"] = name
    return params


def _not_utf8(exc: sqlite3.Error) -> bool:
    """The driver refused to read a TEXT value that is not UTF-8."""
    return "could not decode to utf-8" in str(exc).lower()


def _lenient_text(data: bytes) -> str:
    """A TEXT value as str; one that is not UTF-8 as NOT_UTF8 + its text with U+FFFD for each
    bad byte (never valid JSON, so the semantics layer reads it as undecodable)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return NOT_UTF8 + data.decode("utf-8", "replace")


@contextmanager
def _lenient(conn: sqlite3.Connection) -> Iterator[None]:
    """Read TEXT with :func:`_lenient_text` for the block (the gate is held: the connection is
    this session's alone)."""
    old = conn.text_factory
    conn.text_factory = _lenient_text
    try:
        yield
    finally:
        conn.text_factory = old


@contextmanager
def _atomic(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction, or a no-op inside the caller's open one."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
