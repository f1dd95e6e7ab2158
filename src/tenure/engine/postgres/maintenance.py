"""PostgreSQL queries for schedules, leadership, the worker registry and maintenance sweeps.

The same statement names as ``engine/sqlite/maintenance.py``; the semantics live above the engine
boundary in :mod:`tenure.schedules` and :mod:`tenure.maintenance`. ``%(now)s`` is an int or NULL
(the database's clock, read once per statement through the ``clock`` CTE). Sweeps lock their
victims ``FOR UPDATE SKIP LOCKED``: they never wait on a claimer, a settlement or another sweeper,
and a row that changes under them is re-checked or skipped, never acted on from a stale read.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from ..rows import SCHEDULE_COLUMNS, WORKER_COLUMNS, LeaderRow, Reaped, RetentionMark, ScheduleRow, TableStats
from .conn import _pipelined
from .queries import CLOCK, NOW

SCHEDULE_COLS = ", ".join(SCHEDULE_COLUMNS)
WORKER_COLS = ", ".join(WORKER_COLUMNS)
SETTLED = "('done', 'dead', 'cancelled')"

# -- schedules ------------------------------------------------------------------------------------

_S = "tenure_schedules"
SCHEDULE_UPSERT = f"""
INSERT INTO tenure_schedules (name, key, cron, tz, kind, payload, queue, options, catch_up,
  last_fire_at, next_fire_at, created_at, updated_at)
VALUES (%(name)s::text, %(key)s::text, %(cron)s::text, %(tz)s::text, %(kind)s::text, %(payload)s::text,
  %(queue)s::text, %(options)s::text, %(catch_up)s::text, NULL, %(next_fire_at)s::bigint,
  %(now)s::bigint, %(now)s::bigint)
ON CONFLICT (name, key) DO UPDATE SET
  next_fire_at = CASE WHEN {_S}.cron = excluded.cron AND {_S}.tz = excluded.tz
                      THEN {_S}.next_fire_at ELSE excluded.next_fire_at END,
  cron = excluded.cron, tz = excluded.tz, kind = excluded.kind, payload = excluded.payload,
  queue = excluded.queue, options = excluded.options, catch_up = excluded.catch_up,
  updated_at = excluded.updated_at
WHERE NOT ({_S}.cron = excluded.cron AND {_S}.tz = excluded.tz AND {_S}.kind = excluded.kind
  AND {_S}.payload IS NOT DISTINCT FROM excluded.payload AND {_S}.queue IS NOT DISTINCT FROM excluded.queue
  AND {_S}.options IS NOT DISTINCT FROM excluded.options AND {_S}.catch_up = excluded.catch_up)
RETURNING {SCHEDULE_COLS}
"""
SCHEDULE_GET = f"""
SELECT {SCHEDULE_COLS} FROM tenure_schedules WHERE name = %(name)s::text AND key = %(key)s::text
"""
SCHEDULE_LIST = f"SELECT {SCHEDULE_COLS} FROM tenure_schedules ORDER BY name, key"
SCHEDULE_LIST_NAMED = f"""
SELECT {SCHEDULE_COLS} FROM tenure_schedules WHERE name = %(name)s::text ORDER BY name, key
"""
SCHEDULE_DELETE = "DELETE FROM tenure_schedules WHERE name = %(name)s::text AND key = %(key)s::text"
SCHEDULE_DUE = f"""
SELECT {SCHEDULE_COLS} FROM tenure_schedules
WHERE next_fire_at <= %(now)s::bigint AND paused_at IS NULL ORDER BY next_fire_at, name, key LIMIT %(limit)s::int
"""
# The compare-and-set that makes a fire happen once. Under READ COMMITTED a racing caller waits
# for the winner's row lock, re-reads the row, no longer matches, and updates nothing.
SCHEDULE_ADVANCE = """
UPDATE tenure_schedules SET last_fire_at = %(last_fire_at)s::bigint, next_fire_at = %(next_fire_at)s::bigint,
  updated_at = %(now)s::bigint
WHERE name = %(name)s::text AND key = %(key)s::text AND next_fire_at = %(expected)s::bigint
  AND cron = %(cron)s::text AND tz = %(tz)s::text
"""

# Pause keeps the first pause time (pausing twice changes nothing); resume plans the next boundary
# from now, so the boundaries that passed while paused are never fired.
SCHEDULE_PAUSE = f"""
UPDATE tenure_schedules SET paused_at = COALESCE(paused_at, %(now)s::bigint), updated_at = %(now)s::bigint
WHERE name = %(name)s::text AND key = %(key)s::text RETURNING {SCHEDULE_COLS}
"""
SCHEDULE_RESUME = f"""
UPDATE tenure_schedules SET paused_at = NULL, updated_at = %(now)s::bigint,
  next_fire_at = CASE WHEN paused_at IS NULL THEN next_fire_at ELSE %(next_fire_at)s::bigint END
WHERE name = %(name)s::text AND key = %(key)s::text RETURNING {SCHEDULE_COLS}
"""

# -- leadership -----------------------------------------------------------------------------------

LEADER_ACQUIRE = f"""
WITH {CLOCK}
INSERT INTO tenure_leader (name, owner, expires_at)
SELECT %(name)s::text, %(owner)s::text, c.ms + %(ttl_ms)s::bigint FROM clock c
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE tenure_leader.expires_at <= {NOW} OR tenure_leader.owner = excluded.owner
RETURNING owner, expires_at
"""
LEADER_RELEASE = "DELETE FROM tenure_leader WHERE name = %(name)s::text AND owner = %(owner)s::text"
LEADER_GET = "SELECT owner, expires_at FROM tenure_leader WHERE name = %(name)s::text"

# -- worker registry ------------------------------------------------------------------------------

WORKER_HEARTBEAT = f"""
WITH {CLOCK}
INSERT INTO tenure_workers ({WORKER_COLS}, instance)
SELECT t.id, t.host, t.pid, t.queues, t.kinds, t.concurrency, coalesce(t.started_at, c.ms), c.ms,
  t.in_flight, t.stats, t.instance
FROM clock c, jsonb_to_recordset(%(rows)s::jsonb) AS t(id text, host text, pid int, queues text,
  kinds text, concurrency int, started_at bigint, in_flight int, stats text, instance text)
ORDER BY t.id
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
  kinds = excluded.kinds, concurrency = excluded.concurrency, heartbeat_at = excluded.heartbeat_at,
  in_flight = excluded.in_flight, stats = excluded.stats, instance = excluded.instance
"""
WORKER_REMOVE = "DELETE FROM tenure_workers WHERE id = ANY(%(ids)s::text[])"
WORKER_LIST = f"SELECT {WORKER_COLS} FROM tenure_workers ORDER BY id"
# A dead worker's live leases end now: the fence refuses the vanished attempt and the next claim
# recovers the job (spec §5), instead of waiting out a long lease. Leases are matched by the
# worker INSTANCE the silent row recorded (lease_instance, migration 0009), never by the owner
# string: two processes may share an owner (spec 3.7), and a live one's attempts must never
# end because a namesake went silent. A lease without an instance ends by expiry only.
WORKER_REAP = f"""
WITH {CLOCK},
dead AS (
  SELECT id, instance FROM tenure_workers
  WHERE heartbeat_at < %(dead_before)s::bigint AND id <> ALL(%(keep)s::text[])
  ORDER BY heartbeat_at LIMIT %(limit)s::int
  FOR UPDATE SKIP LOCKED),
released AS (
  UPDATE tenure_jobs j SET lease_until = {NOW}, updated_at = {NOW}
  WHERE j.state = 'leased' AND j.lease_until > {NOW}
    AND j.lease_instance IN (SELECT instance FROM dead WHERE instance IS NOT NULL)
  RETURNING 1),
removed AS (DELETE FROM tenure_workers w USING dead d WHERE w.id = d.id RETURNING 1)
SELECT (SELECT count(*) FROM released), (SELECT count(*) FROM removed)
"""

# A worker's claims whose answer it never saw (the connection broke mid-claim): every lease stamped
# with its instance that it does not hold in flight goes back to pending, its attempt given back
# (the claim never reached a handler), instead of idling until the lease expires; a lease already
# expired is given back too (the next claim would otherwise count an attempt that never ran). The
# generation keeps its bump, so the lost lease's token can never settle anything.
RELEASE_LOST_CLAIMS = f"""
WITH {CLOCK}
UPDATE tenure_jobs j SET state = 'pending', attempts = greatest(j.attempts - 1, 0), lease_until = NULL,
  lease_owner = NULL, lease_token = NULL, lease_instance = NULL, updated_at = {NOW}
WHERE j.state = 'leased' AND j.lease_instance = %(instance)s::text AND j.id <> ALL(%(keep)s::text[])
RETURNING j.id
"""

# -- sweeps ---------------------------------------------------------------------------------------

EXPIRE_QUEUED = f"""
WITH {CLOCK},
doomed AS (
  SELECT id FROM tenure_jobs
  WHERE keep_until IS NOT NULL AND state IN ('pending', 'failed') AND keep_until <= {NOW}
  ORDER BY keep_until LIMIT %(limit)s::int
  FOR UPDATE SKIP LOCKED),
expired AS (
  UPDATE tenure_jobs j SET state = 'dead', last_error = %(error)s::text, lease_until = NULL,
    lease_owner = NULL, lease_token = NULL, updated_at = {NOW}
  FROM doomed d WHERE j.id = d.id AND j.state IN ('pending', 'failed')
  RETURNING 1)
SELECT count(*) FROM expired
"""
# Settled jobs past their horizon: those with a delete_after of their own through the delete_at
# expression index ((horizon, id), migration 0022), the rest through the settled index ((updated_at,
# id)) against the default horizon. Each starts just past ``(%(from)s, %(from_id)s)``, the walk's
# mark (tenure.engine.rows.RetentionMark): the entries of the rows earlier batches deleted stay in
# the index, dead, until a vacuum, and a descent from the index's first key walked them all again
# (at 100 000 000 rows a drain fell from 30k to 1.7k rows/s); a descent AT the last key walked
# again those tied with it.
_CUSTOM_KEY = "updated_at + delete_after_ms"
_DUE_CUSTOM = f"""
  SELECT id, {_CUSTOM_KEY} AS key FROM tenure_jobs
  WHERE state IN {SETTLED} AND delete_after_ms IS NOT NULL AND {_CUSTOM_KEY} <= {NOW}
    AND ({_CUSTOM_KEY}, id) > (%(from)s::bigint, %(from_id)s::text)
  ORDER BY {_CUSTOM_KEY}, id LIMIT %(limit)s::int
  FOR UPDATE SKIP LOCKED"""
_DUE_DEFAULT = f"""
  SELECT id, updated_at AS key FROM tenure_jobs
  WHERE state IN {SETTLED} AND delete_after_ms IS NULL
    AND updated_at <= {NOW} - %(default_after_ms)s::bigint
    AND (updated_at, id) > (%(from)s::bigint, %(from_id)s::text)
  ORDER BY updated_at, id LIMIT %(limit)s::int
  FOR UPDATE SKIP LOCKED"""
# How many rows went, and the highest key (with its id) among them (NULL: none).
_DELETE = """
checkpoints AS (DELETE FROM tenure_checkpoints WHERE run_id IN (SELECT id FROM doomed)),
jobs AS (DELETE FROM tenure_jobs j USING doomed d WHERE j.id = d.id RETURNING d.key, d.id)
SELECT count(*), max(key), (array_agg(id ORDER BY key DESC, id DESC))[1] FROM jobs
"""
#: Below every key: a walk without a mark starts at the index's first entry.
NO_MARK = -(2**63)
# -- vacuum backstop -------------------------------------------------------------------------------

# What autovacuum would read of the jobs table (tenure.table_care decides): its counters, the
# server's autovacuum settings, and the table's storage parameters that override them.
_AV_SETTINGS = ("autovacuum_vacuum_threshold", "autovacuum_vacuum_scale_factor",
                "autovacuum_vacuum_insert_threshold", "autovacuum_vacuum_insert_scale_factor",
                "autovacuum_analyze_threshold", "autovacuum_analyze_scale_factor")
JOBS_TABLE_STATS = f"""
SELECT coalesce(s.n_dead_tup, 0), coalesce(s.n_live_tup, 0), coalesce(s.n_ins_since_vacuum, 0),
  coalesce(s.n_mod_since_analyze, 0), current_setting('autovacuum') = 'on', c.reloptions,
  {", ".join(f"current_setting('{name}', true)" for name in _AV_SETTINGS)}
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relid = 'tenure_jobs'::regclass
"""
# Plain VACUUM and ANALYZE: they take no lock that blocks reads or writes (only other vacuums and
# DDL wait) -- except a vacuum's last phase, which truncates the empty pages at the end of the
# table under an ACCESS EXCLUSIVE lock (drains were seen stalled on "while truncating
# relation"): TRUNCATE false skips it, as the table's vacuum_truncate = false (migration 0021)
# does for autovacuum; the pages stay free for the next inserts (docs/maintenance.md,
# "Truncation"). INDEX_CLEANUP ON (PostgreSQL 12+; tenure needs 13+): by default a vacuum that
# finds dead items on fewer than 2 % of the table's pages skips the indexes, and on a large table
# that is every vacuum: the claim index's dead head entries stayed, and the claim read ~3 200
# buffers (16 ms) instead of ~55 (1 ms) at 100 000 000 rows (docs/performance.md, "Scale").
JOBS_VACUUM = "VACUUM (ANALYZE, INDEX_CLEANUP ON, TRUNCATE false) tenure_jobs"
JOBS_ANALYZE = "ANALYZE tenure_jobs"

# The retention statements walk their index whatever the estimate: the clock is a parameter, so
# the planner takes a third of the table for ``updated_at + delete_after_ms <= now`` and, at
# 100 000 000 rows, chose a sequential scan of the whole heap (~40 s per batch) for the custom
# horizon's statement although its partial index was empty; a bitmap scan would read every due
# row before sorting them. Set in the statement's own transaction (never in a caller's).
INDEX_WALK = ("SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off")

DELETE_SETTLED_CUSTOM = f"WITH {CLOCK},\ndoomed AS ({_DUE_CUSTOM}),{_DELETE}"
DELETE_SETTLED_DEFAULT = f"WITH {CLOCK},\ndoomed AS ({_DUE_DEFAULT}),{_DELETE}"


class PostgresMaintenanceMixin:
    """Schedule, leader and maintenance methods of the PostgreSQL session (see tenure.maintenance)."""

    _conn: Any

    def _one(self, sql: str, params: dict[str, Any]) -> Any:
        return self._conn.execute(sql, params).fetchone()

    # -- schedules ------------------------------------------------------------------------------
    def schedule_upsert(self, row: dict[str, Any], now: int | None) -> ScheduleRow | None:
        """Insert or change one schedule; answers the row, or None when nothing changed."""
        if now is None:
            now = self.now_ms()  # type: ignore[attr-defined]
        return _schedule(self._one(SCHEDULE_UPSERT, {**row, "now": now}))

    def schedule_get(self, name: str, key: str) -> ScheduleRow | None:
        return _schedule(self._one(SCHEDULE_GET, {"name": name, "key": key}))

    def schedule_list(self, name: str | None) -> list[ScheduleRow]:
        if name is None:
            return [ScheduleRow(*r) for r in self._conn.execute(SCHEDULE_LIST)]
        return [ScheduleRow(*r) for r in self._conn.execute(SCHEDULE_LIST_NAMED, {"name": name})]

    # -- leadership -----------------------------------------------------------------------------
    def leader_acquire(self, name: str, owner: str, ttl_ms: int, now: int | None) -> int | None:
        """Take or renew the lease on role ``name``; answers its expiry, or None when another
        owner holds an unexpired lease."""
        row = self._one(LEADER_ACQUIRE, {"name": name, "owner": owner, "ttl_ms": ttl_ms, "now": now})
        return None if row is None else row[1]

    def leader_get(self, name: str) -> LeaderRow | None:
        row = self._one(LEADER_GET, {"name": name})
        return None if row is None else LeaderRow(*row)

    # -- worker registry ------------------------------------------------------------------------
    def worker_heartbeat(self, rows: Sequence[dict[str, Any]], now: int | None) -> None:
        if rows:
            self._conn.execute(WORKER_HEARTBEAT, {"rows": json.dumps(list(rows)), "now": now})

    def worker_remove(self, ids: Sequence[str]) -> int:
        return self._conn.execute(WORKER_REMOVE, {"ids": list(ids)}).rowcount

    def worker_reap(self, dead_before: int, keep: Sequence[str], now: int | None,
                    limit: int) -> Reaped:
        """End the live leases of up to ``limit`` workers silent since ``dead_before`` (except
        ``keep``) and delete their rows, in one statement."""
        row = self._one(WORKER_REAP, {"dead_before": dead_before, "keep": list(keep), "now": now,
                                      "limit": limit})
        return Reaped(int(row[0]), int(row[1]))

    def job_release_lost(self, instance: str, keep: Sequence[str], now: int | None) -> list[str]:
        """Give back the leases stamped with ``instance`` except those of the jobs in ``keep`` (the
        ones its worker holds): pending again, one attempt fewer. Answers the ids released."""
        return [r[0] for r in self._conn.execute(RELEASE_LOST_CLAIMS, {"instance": instance,
                                                                        "keep": list(keep), "now": now})]

    # -- sweeps ---------------------------------------------------------------------------------
    def job_expire_queued(self, now: int | None, error: str, limit: int) -> int:
        """Queued (pending/failed) jobs with ``keep_until <= now`` -> dead with ``error``."""
        return int(self._one(EXPIRE_QUEUED, {"now": now, "error": error, "limit": limit})[0])

    def jobs_table_stats(self) -> TableStats | None:
        """The jobs table's counters from the statistics collector and the autovacuum settings that
        apply to it (see the base class)."""
        row = self._one(JOBS_TABLE_STATS, {})
        if row is None:
            return None
        settings = dict(zip(_AV_SETTINGS, row[6:], strict=True))
        return TableStats(row[0], row[1], row[2], row[3], row[4], settings, row[5])

    def jobs_vacuum(self, cancel: threading.Event | None = None, *, analyze_only: bool = False) -> bool:
        """:data:`JOBS_VACUUM` (which never truncates the table), or ``ANALYZE`` it (outside any transaction). A set
        ``cancel`` cancels it on the server at once (the maintenance service is stopping); answers
        False then."""
        conn = self._conn
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.05):
                if cancel is not None and cancel.is_set():
                    try:
                        cancel_safe = getattr(conn, "cancel_safe", None)  # psycopg >= 3.2
                        cancel_safe(timeout=2.0) if cancel_safe is not None else conn.cancel()
                    except Exception:  # noqa: BLE001 - best effort; the vacuum just runs on
                        pass
                    return

        watcher = threading.Thread(target=watch, name="tenure-vacuum-cancel", daemon=True)
        if cancel is not None:
            watcher.start()
        try:
            conn.execute(JOBS_ANALYZE if analyze_only else JOBS_VACUUM, prepare=False)
            return True
        except psycopg.errors.QueryCanceled:
            if cancel is not None and cancel.is_set():
                return False
            raise
        finally:
            done.set()
            if cancel is not None:
                watcher.join()

    def job_delete_settled(self, now: int | None, default_after_ms: int | None, limit: int,
                           mark: RetentionMark | None = None) -> int:
        """Delete up to ``limit`` settled jobs past their deletion horizon (``updated_at +
        delete_after_ms``, else ``+ default_after_ms``; None: only jobs with their own), with their
        checkpoints; answers how many. Each statement is its own short transaction. ``mark``: see
        the base class."""
        mark = RetentionMark() if mark is None else mark
        n, key, key_id = self._retention(DELETE_SETTLED_CUSTOM, {
            "now": now, "limit": limit, "from": _from(mark.custom), "from_id": mark.custom_id or ""})
        if key is not None:  # ordered by (horizon, id): past the mark
            mark.custom, mark.custom_id = int(key), key_id
        if default_after_ms is not None and n < limit:
            more, key, key_id = self._retention(DELETE_SETTLED_DEFAULT, {
                "now": now, "limit": limit - n, "default_after_ms": default_after_ms,
                "from": _from(mark.default), "from_id": mark.default_id or ""})
            n += more
            if key is not None:  # ordered by (updated_at, id): past the mark
                mark.default, mark.default_id = int(key), key_id
        return n

    def _retention(self, sql: str, params: dict[str, Any]) -> tuple[int, int | None, str | None]:
        """One retention statement (answers its count, highest key and that row's id), on tenure's own
        connection in a transaction of its own with :data:`INDEX_WALK` (one round trip); inside
        a caller's transaction as it is."""
        conn = self._conn
        if not (conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE):
            row = self._one(sql, params)
        else:
            with _pipelined(conn):
                for setting in INDEX_WALK:
                    conn.execute(setting)
                cur = conn.execute(sql, params)
            row = cur.fetchone()
        return int(row[0]), row[1], row[2]


def _from(key: int | None) -> int:
    return NO_MARK if key is None else key


def _schedule(r: Any) -> ScheduleRow | None:
    return None if r is None else ScheduleRow(*r)
