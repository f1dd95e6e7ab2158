"""SQLite queries for schedules, leadership, the worker registry and maintenance sweeps.

Every statement is named here (the PostgreSQL twin, ``engine/postgres/maintenance.py``, has the
same names). The semantics — what fires when, who leads, what is swept — live above the engine
boundary in :mod:`tenure.schedules` and :mod:`tenure.maintenance`. Times are epoch ms; a ``now``
of None means the wall clock. Rows cross the boundary as :class:`~tenure.engine.rows.ScheduleRow`
and :class:`~tenure.engine.rows.WorkerRow` records.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from ..rows import SCHEDULE_COLUMNS, WORKER_COLUMNS, LeaderRow, Reaped, RetentionMark, ScheduleRow

SCHEDULE_COLS = ", ".join(SCHEDULE_COLUMNS)
WORKER_COLS = ", ".join(WORKER_COLUMNS)
SETTLED = "('done', 'dead', 'cancelled')"

# -- schedules ------------------------------------------------------------------------------------

# Upsert by (name, key). A row that would not change is left alone (no write at all, so ten
# workers declaring the same schedule at start cost ten reads). Changing the expression or the
# zone re-plans next_fire_at from now; last_fire_at always survives.
SCHEDULE_UPSERT = f"""
INSERT INTO tenure_schedules (name, key, cron, tz, kind, payload, queue, options, catch_up,
  last_fire_at, next_fire_at, created_at, updated_at)
VALUES (:name, :key, :cron, :tz, :kind, :payload, :queue, :options, :catch_up, NULL, :next_fire_at,
  :now, :now)
ON CONFLICT (name, key) DO UPDATE SET
  next_fire_at = CASE WHEN tenure_schedules.cron = excluded.cron AND tenure_schedules.tz = excluded.tz
                      THEN tenure_schedules.next_fire_at ELSE excluded.next_fire_at END,
  cron = excluded.cron, tz = excluded.tz, kind = excluded.kind, payload = excluded.payload,
  queue = excluded.queue, options = excluded.options, catch_up = excluded.catch_up,
  updated_at = excluded.updated_at
WHERE NOT (tenure_schedules.cron = excluded.cron AND tenure_schedules.tz = excluded.tz
  AND tenure_schedules.kind = excluded.kind AND tenure_schedules.payload IS excluded.payload
  AND tenure_schedules.queue IS excluded.queue AND tenure_schedules.options IS excluded.options
  AND tenure_schedules.catch_up = excluded.catch_up)
RETURNING {SCHEDULE_COLS}
"""
SCHEDULE_GET = f"SELECT {SCHEDULE_COLS} FROM tenure_schedules WHERE name = :name AND key = :key"
SCHEDULE_LIST = f"""
SELECT {SCHEDULE_COLS} FROM tenure_schedules WHERE (:name IS NULL OR name = :name) ORDER BY name, key
"""
SCHEDULE_DELETE = "DELETE FROM tenure_schedules WHERE name = :name AND key = :key"
SCHEDULE_DUE = f"""
SELECT {SCHEDULE_COLS} FROM tenure_schedules INDEXED BY tenure_schedules_due
WHERE next_fire_at <= :now AND paused_at IS NULL ORDER BY next_fire_at, name, key LIMIT :limit
"""
# The compare-and-set that makes a fire happen once: only the caller that still sees the
# boundary it planned from (and the same expression) moves the schedule on.
SCHEDULE_ADVANCE = """
UPDATE tenure_schedules SET last_fire_at = :last_fire_at, next_fire_at = :next_fire_at, updated_at = :now
WHERE name = :name AND key = :key AND next_fire_at = :expected AND cron = :cron AND tz = :tz
"""

# Pause keeps the first pause time (pausing twice changes nothing); resume plans the next boundary
# from now, so the boundaries that passed while paused are never fired.
SCHEDULE_PAUSE = f"""
UPDATE tenure_schedules SET paused_at = COALESCE(paused_at, :now), updated_at = :now
WHERE name = :name AND key = :key RETURNING {SCHEDULE_COLS}
"""
SCHEDULE_RESUME = f"""
UPDATE tenure_schedules SET paused_at = NULL, updated_at = :now,
  next_fire_at = CASE WHEN paused_at IS NULL THEN next_fire_at ELSE :next_fire_at END
WHERE name = :name AND key = :key RETURNING {SCHEDULE_COLS}
"""

# -- leadership -----------------------------------------------------------------------------------

# One leased row per role: taken when free or expired, renewed by its holder, refused otherwise.
LEADER_ACQUIRE = """
INSERT INTO tenure_leader (name, owner, expires_at) VALUES (:name, :owner, :now + :ttl_ms)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE tenure_leader.expires_at <= :now OR tenure_leader.owner = excluded.owner
RETURNING owner, expires_at
"""
LEADER_RELEASE = "DELETE FROM tenure_leader WHERE name = :name AND owner = :owner"
LEADER_GET = "SELECT owner, expires_at FROM tenure_leader WHERE name = :name"

# -- worker registry ------------------------------------------------------------------------------

WORKER_HEARTBEAT = f"""
INSERT INTO tenure_workers ({WORKER_COLS}, instance)
VALUES (:id, :host, :pid, :queues, :kinds, :concurrency, :started_at, :now, :in_flight, :stats, :instance)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
  kinds = excluded.kinds, concurrency = excluded.concurrency, heartbeat_at = excluded.heartbeat_at,
  in_flight = excluded.in_flight, stats = excluded.stats, instance = excluded.instance
"""
WORKER_REMOVE = "DELETE FROM tenure_workers WHERE id IN (SELECT value FROM json_each(:ids))"
WORKER_LIST = f"SELECT {WORKER_COLS} FROM tenure_workers ORDER BY id"
WORKER_DEAD = """
SELECT id, instance FROM tenure_workers
WHERE heartbeat_at < :dead_before AND id NOT IN (SELECT value FROM json_each(:keep))
ORDER BY heartbeat_at LIMIT :limit
"""
# A dead worker's live leases end now: the fence refuses the vanished attempt and the next claim
# recovers the job (spec §5), instead of waiting out a long lease. Leases are matched by the
# worker INSTANCE the silent row recorded (lease_instance, migration 0009), never by the owner
# string: two processes may share an owner (spec 3.7), and a live one's attempts must never
# end because a namesake went silent. A lease without an instance ends by expiry only.
RELEASE_LEASES_OF = """
UPDATE tenure_jobs SET lease_until = :now, updated_at = :now
WHERE state = 'leased' AND lease_until > :now
  AND lease_instance IN (SELECT value FROM json_each(:instances))
"""

# A worker's claims whose answer it never saw: see the PostgreSQL statement of the same name.
RELEASE_LOST_CLAIMS = """
UPDATE tenure_jobs SET state = 'pending', attempts = max(attempts - 1, 0), lease_until = NULL,
  lease_owner = NULL, lease_token = NULL, lease_instance = NULL, updated_at = :now
WHERE state = 'leased' AND lease_instance = :instance AND id NOT IN (SELECT value FROM json_each(:keep))
RETURNING id
"""

# -- sweeps ---------------------------------------------------------------------------------------

# Queued jobs past their queue's retention (keep_until) become dead, oldest first.
EXPIRE_QUEUED = """
UPDATE tenure_jobs SET state = 'dead', last_error = :error, lease_until = NULL, lease_owner = NULL,
  lease_token = NULL, updated_at = :now
WHERE id IN (SELECT id FROM tenure_jobs INDEXED BY tenure_jobs_keep_until
             WHERE keep_until IS NOT NULL AND state IN ('pending', 'failed') AND keep_until <= :now
             ORDER BY keep_until LIMIT :limit)
RETURNING id
"""
# Settled jobs past their horizon: the default one (no delete_after of their own) through the
# settled index in updated_at order, their own through the delete_at expression index.
# ``:from`` is the walk's mark (tenure.engine.rows.RetentionMark): SQLite removes a deleted
# row's index entries at once, so here it only keeps the walk the same as on PostgreSQL.
DUE_DEFAULT = f"""
SELECT id, updated_at FROM tenure_jobs INDEXED BY tenure_jobs_settled
WHERE state IN {SETTLED} AND updated_at <= :horizon AND updated_at >= :from AND delete_after_ms IS NULL
ORDER BY updated_at LIMIT :limit
"""
DUE_CUSTOM = f"""
SELECT id, updated_at + delete_after_ms FROM tenure_jobs INDEXED BY tenure_jobs_delete_at
WHERE state IN {SETTLED} AND delete_after_ms IS NOT NULL AND updated_at + delete_after_ms <= :now
  AND updated_at + delete_after_ms >= :from
ORDER BY updated_at + delete_after_ms, id LIMIT :limit
"""
#: Below every key: a walk without a mark starts at the index's first entry.
NO_MARK = -(2**63)
DELETE_CHECKPOINTS = "DELETE FROM tenure_checkpoints WHERE run_id IN (SELECT value FROM json_each(:ids))"
DELETE_JOBS = "DELETE FROM tenure_jobs WHERE id IN (SELECT value FROM json_each(:ids))"


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _begin(conn: sqlite3.Connection) -> bool:
    """Open a write transaction unless the caller has one; True when this call opened it."""
    if conn.in_transaction:
        return False
    conn.execute("BEGIN IMMEDIATE")
    return True


def _end(conn: sqlite3.Connection, opened: bool, ok: bool) -> None:
    if not opened or not conn.in_transaction:
        return
    conn.execute("COMMIT" if ok else "ROLLBACK")


class SQLiteMaintenanceMixin:
    """Schedule, leader and maintenance methods of the SQLite session (see tenure.maintenance)."""

    _conn: sqlite3.Connection

    # -- schedules ------------------------------------------------------------------------------
    def schedule_upsert(self, row: dict[str, Any], now: int | None) -> ScheduleRow | None:
        """Insert or change one schedule; answers the row, or None when nothing changed."""
        now = _wall_ms() if now is None else now
        return _schedule(self._conn.execute(SCHEDULE_UPSERT, {**row, "now": now}).fetchone())

    def schedule_get(self, name: str, key: str) -> ScheduleRow | None:
        return _schedule(self._conn.execute(SCHEDULE_GET, {"name": name, "key": key}).fetchone())

    def schedule_list(self, name: str | None) -> list[ScheduleRow]:
        return [ScheduleRow(*r) for r in self._conn.execute(SCHEDULE_LIST, {"name": name})]

    # -- leadership -----------------------------------------------------------------------------
    def leader_acquire(self, name: str, owner: str, ttl_ms: int, now: int | None) -> int | None:
        """Take or renew the lease on role ``name``; answers its expiry, or None when another
        owner holds an unexpired lease."""
        now = _wall_ms() if now is None else now
        row = self._conn.execute(LEADER_ACQUIRE, {"name": name, "owner": owner, "ttl_ms": ttl_ms,
                                                  "now": now}).fetchone()
        return None if row is None else row[1]

    def leader_get(self, name: str) -> LeaderRow | None:
        row = self._conn.execute(LEADER_GET, {"name": name}).fetchone()
        return None if row is None else LeaderRow(*row)

    # -- worker registry ------------------------------------------------------------------------
    def worker_heartbeat(self, rows: Sequence[dict[str, Any]], now: int | None) -> None:
        now = _wall_ms() if now is None else now
        if rows:
            self._conn.executemany(WORKER_HEARTBEAT, [
                {"instance": None, **r, "now": now,
                 "started_at": now if r.get("started_at") is None else r["started_at"]}
                for r in rows])

    def worker_remove(self, ids: Sequence[str]) -> int:
        return self._conn.execute(WORKER_REMOVE, {"ids": json.dumps(list(ids))}).rowcount

    def worker_reap(self, dead_before: int, keep: Sequence[str], now: int | None,
                    limit: int) -> Reaped:
        """End the live leases of up to ``limit`` workers silent since ``dead_before`` (except
        ``keep``) and delete their rows, in one transaction."""
        now = _wall_ms() if now is None else now
        conn = self._conn
        opened = _begin(conn)
        ok = False
        try:
            dead = conn.execute(WORKER_DEAD, {"dead_before": dead_before, "keep": json.dumps(list(keep)),
                                              "limit": limit}).fetchall()
            ids = [r[0] for r in dead]
            instances = [r[1] for r in dead if r[1] is not None]
            leases = 0
            if instances:
                leases = conn.execute(RELEASE_LEASES_OF, {"instances": json.dumps(instances),
                                                          "now": now}).rowcount
            if ids:
                conn.execute(WORKER_REMOVE, {"ids": json.dumps(ids)})
            ok = True
            return Reaped(leases, len(ids))
        finally:
            _end(conn, opened, ok)

    def job_release_lost(self, instance: str, keep: Sequence[str], now: int | None) -> list[str]:
        """Give back the leases stamped with ``instance`` except those of the jobs in ``keep`` (the
        ones its worker holds): pending again, one attempt fewer. Answers the ids released."""
        now = _wall_ms() if now is None else now
        return [r[0] for r in self._conn.execute(RELEASE_LOST_CLAIMS, {"instance": instance,
                                                                        "keep": json.dumps(list(keep)),
                                                                        "now": now})]

    # -- sweeps ---------------------------------------------------------------------------------

    def job_expire_queued(self, now: int | None, error: str, limit: int) -> int:
        """Queued (pending/failed) jobs with ``keep_until <= now`` -> dead with ``error``."""
        now = _wall_ms() if now is None else now
        return len(self._conn.execute(EXPIRE_QUEUED, {"now": now, "error": error, "limit": limit}).fetchall())

    def jobs_table_stats(self) -> None:
        """SQLite reuses deleted pages from its freelist and its statements name their indexes:
        there is nothing for a vacuum or an analyze to do."""
        return None

    def jobs_vacuum(self, cancel: Any = None, *, analyze_only: bool = False) -> bool:
        return False

    def job_delete_settled(self, now: int | None, default_after_ms: int | None, limit: int,
                           mark: RetentionMark | None = None) -> int:
        """Delete up to ``limit`` settled jobs past their deletion horizon (``updated_at +
        delete_after_ms``, else ``+ default_after_ms``; None: only jobs with their own), with their
        checkpoints, in one transaction; answers how many. ``mark``: see the base class."""
        now = _wall_ms() if now is None else now
        mark = RetentionMark() if mark is None else mark
        conn = self._conn
        opened = _begin(conn)
        ok = False
        try:
            due = conn.execute(DUE_CUSTOM, {"now": now, "limit": limit, "from": _from(mark.custom)}).fetchall()
            if due:
                mark.custom = max(_from(mark.custom), max(r[1] for r in due))
            ids = [r[0] for r in due]
            if default_after_ms is not None and len(ids) < limit:
                due = conn.execute(DUE_DEFAULT, {"horizon": now - default_after_ms, "limit": limit - len(ids),
                                                 "from": _from(mark.default)}).fetchall()
                if due:
                    mark.default = max(_from(mark.default), max(r[1] for r in due))
                ids += [r[0] for r in due]
            if ids:
                payload = json.dumps(ids)
                conn.execute(DELETE_CHECKPOINTS, {"ids": payload})
                conn.execute(DELETE_JOBS, {"ids": payload})
            ok = True
            return len(ids)
        finally:
            _end(conn, opened, ok)


def _from(key: int | None) -> int:
    return NO_MARK if key is None else key


def _schedule(r: Any) -> ScheduleRow | None:
    return None if r is None else ScheduleRow(*r)
