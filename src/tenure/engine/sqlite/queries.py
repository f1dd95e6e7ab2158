"""Every SQL statement the SQLite engine runs, by name. Parameters are ``:named``.

Times are epoch ms. ``:kinds`` and ``:queues`` are JSON arrays (read with ``json_each``).
"""

from __future__ import annotations

from ...errors import WorkerLost
from ..rows import JOB_COLUMNS

COLS = ", ".join(JOB_COLUMNS)

SERIAL = "policy IN ('singleton', 'stately') AND singleton_key IS NOT NULL"
# A 'singleton'/'stately' job waits while another job with its key is leased (policies).
SINGLETON_FILTER = """
        AND (j.singleton_key IS NULL OR j.policy NOT IN ('singleton', 'stately')
             OR NOT EXISTS (SELECT 1 FROM tenure_jobs a INDEXED BY tenure_jobs_singleton
                            WHERE a.queue = j.queue AND a.singleton_key = j.singleton_key
                            AND a.state = 'leased' AND a.lease_until > :now AND a.id <> j.id))"""
KIND_FILTER = "AND j.kind IN (SELECT value FROM json_each(:kinds))"
GROUP_FILTER = ("AND (j.group_key IS NULL OR j.group_key NOT IN "
                "(SELECT value FROM json_each(:full_groups)))")

# policy 'strict_fifo': a job waits while an earlier job of its key is not done or
# cancelled (pending, failed, leased, or dead until requeued or deleted). Only limited claims
# carry it (a strict_fifo queue is limited); one probe of tenure_jobs_strict per candidate.
STRICT_FILTER = """
        AND (j.policy <> 'strict_fifo' OR j.singleton_key IS NULL
             OR NOT EXISTS (SELECT 1 FROM tenure_jobs e INDEXED BY tenure_jobs_strict
                            WHERE e.queue = j.queue AND e.singleton_key = j.singleton_key
                            AND e.policy = 'strict_fifo' AND e.state IN ('pending', 'failed', 'leased', 'dead')
                            AND (e.created_at < j.created_at OR (e.created_at = j.created_at AND e.id < j.id))))"""
# group_rate_limit: a group whose rate window is closed is skipped, one probe each.
GROUP_RATE_FILTER = """
        AND (j.group_key IS NULL OR NOT EXISTS (
             SELECT 1 FROM tenure_rate_windows w WHERE w.queue = j.queue AND w.scope = 1
             AND w.group_key = j.group_key AND w.blocked_until > :now))"""
ONE_GROUP_FILTER = "AND j.group_key = :only_group"

# The head of one queue: index-ordered, so the LIMIT stops the scan early (flat with depth).
# The head of one group of it (fairness) reads the group index instead.
CLAIM_QUEUE_HEAD = """
    SELECT * FROM (
      SELECT j.id, j.priority, j.run_at, j.created_at, j.queue, j.policy, j.singleton_key
      FROM tenure_jobs j INDEXED BY {index}
      WHERE j.queue = :q{i} AND j.state IN ('pending', 'failed') AND j.waiting_on = 0 AND j.run_at <= :now
        {kind_filter} {group_filter} {singleton_filter}
      ORDER BY j.priority DESC, j.run_at, j.created_at, j.id LIMIT :limit)"""

# Expired leases in the claimed queues: recovery is the next claim (spec §5).
CLAIM_EXPIRED = """
    SELECT * FROM (
      SELECT j.id, j.priority, j.run_at, j.created_at, j.queue, j.policy, j.singleton_key
      FROM tenure_jobs j INDEXED BY tenure_jobs_leased
      WHERE j.state = 'leased' AND j.lease_until <= :now AND j.cancel_requested_at IS NULL
        AND j.queue IN (SELECT value FROM json_each(:queues)) {kind_filter} {group_filter}
      ORDER BY j.priority DESC, j.run_at, j.created_at, j.id LIMIT :limit)"""

# ONE guarded statement: merge the queue heads, lease the first :limit, mint a token per row.
# Of the 'singleton'/'stately' candidates sharing a key only the first is taken (key_rank), so one
# batch never leases two jobs of one key (SINGLETON_FILTER already skips keys leased before).
# Only due jobs: expired leases are taken by RECLAIM, alone (docs/guarantees.md, "Liveness").
CLAIM = f"""
UPDATE tenure_jobs SET state = 'leased', lease_owner = :owner, lease_instance = :instance,
  lease_until = :now + :lease_ms,
  lease_generation = lease_generation + 1, lease_token = lower(hex(randomblob(16))),
  attempts = attempts + 1, updated_at = :now
WHERE id IN (
  SELECT id FROM (
    SELECT id, priority, run_at, created_at, row_number() OVER (
      PARTITION BY CASE WHEN {SERIAL} THEN queue END, CASE WHEN {SERIAL} THEN singleton_key ELSE id END
      ORDER BY priority DESC, run_at, created_at, id) AS key_rank
    FROM ({{heads}}
    ))
  WHERE key_rank = 1 ORDER BY priority DESC, run_at, created_at, id LIMIT :limit)
RETURNING {COLS}, 0
"""

# The last_error of a job whose worker was lost on its final attempt (read with the row's OLD values).
WORKER_LOST_ERROR = (f"'{WorkerLost.code}: worker lost on its final attempt (' || attempts || ' of ' || "
                     "max_attempts || '): the lease of ' || coalesce(lease_owner, '?') || "
                     "' expired, and the next claim settled the job dead instead of running it again'")
_SPENT = "attempts >= max_attempts"
# A reclaim must respect the queue's concurrency and group limits like any claim.
RECLAIM_LIMITS = """
        AND NOT EXISTS (SELECT 1 FROM tenure_queues q WHERE q.name = j.queue AND (
          q.concurrency_limit <= (SELECT count(*) FROM tenure_jobs a INDEXED BY tenure_jobs_leased
                                  WHERE a.state = 'leased' AND a.lease_until > :now AND a.queue = j.queue)
          OR (j.group_key IS NOT NULL AND q.group_limit <= (
                SELECT count(*) FROM tenure_jobs a INDEXED BY tenure_jobs_leased
                WHERE a.state = 'leased' AND a.lease_until > :now AND a.queue = j.queue
                  AND a.group_key = j.group_key))))
        AND NOT EXISTS (SELECT 1 FROM tenure_rate_windows w WHERE w.queue = j.queue AND w.blocked_until > :now
                        AND ((w.scope = 0 AND w.group_key = '') OR (w.scope = 1 AND w.group_key = j.group_key)))"""
# Is any lease expired? (RECLAIM runs only then: the claim's fast path skips it.)
ANY_EXPIRED = """
SELECT 1 FROM tenure_jobs INDEXED BY tenure_jobs_leased WHERE state = 'leased' AND lease_until <= ? LIMIT 1
"""

# Recovery is the next claim (spec §5), bounded (docs/guarantees.md, "Liveness: bounded
# reclaim and dead letters"), in ONE statement over the first :limit expired leases of the claimed
# queues, in claim order (as on PostgreSQL): those whose job has used its last attempt are settled
# dead (token cleared, so the lost attempt, if it still runs somewhere, is refused), and the first
# other one is leased again, for the caller to run alone. The engine copies the dead ones to their
# dead-letter queue in the same transaction. SET reads the old row, so every CASE below tests the
# attempts the lost worker used.
RECLAIM = f"""
WITH expired AS (
  SELECT j.id, j.attempts >= j.max_attempts AS spent, j.priority, j.run_at, j.created_at
  FROM tenure_jobs j INDEXED BY tenure_jobs_leased
  WHERE j.state = 'leased' AND j.lease_until <= :now AND j.cancel_requested_at IS NULL
    AND j.queue IN (SELECT value FROM json_each(:queues)) {{kind_filter}} {SINGLETON_FILTER} {RECLAIM_LIMITS}
  ORDER BY j.priority DESC, j.run_at, j.created_at, j.id LIMIT :limit)
UPDATE tenure_jobs SET
  state = CASE WHEN {_SPENT} THEN 'dead' ELSE 'leased' END,
  last_error = CASE WHEN {_SPENT} THEN {WORKER_LOST_ERROR} ELSE last_error END,
  lease_owner = CASE WHEN {_SPENT} THEN NULL ELSE :owner END,
  lease_instance = CASE WHEN {_SPENT} THEN NULL ELSE :instance END,
  lease_until = CASE WHEN {_SPENT} THEN NULL ELSE :now + :lease_ms END,
  lease_token = CASE WHEN {_SPENT} THEN NULL ELSE lower(hex(randomblob(16))) END,
  lease_generation = CASE WHEN {_SPENT} THEN lease_generation ELSE lease_generation + 1 END,
  attempts = CASE WHEN {_SPENT} THEN attempts ELSE attempts + 1 END,
  updated_at = :now
WHERE id IN (
  SELECT id FROM expired WHERE spent
  UNION ALL
  SELECT id FROM (SELECT id FROM expired WHERE NOT spent
                  ORDER BY priority DESC, run_at, created_at, id LIMIT 1))
RETURNING {COLS}, 1
"""

QUEUE_REGISTRY = """
SELECT name, paused, concurrency_limit, group_limit, dead_letter, policy, rate_limit, rate_period_ms,
  group_rate_limit, group_rate_period_ms, fairness, group_weights
FROM tenure_queues"""
# A claim that names no queue never takes a dead-letter copy (docs/queues.md, "Dead letters").
NO_COPIES = " AND j.origin_queue IS NULL"

INSERT = """
INSERT INTO tenure_jobs (id, kind, payload, state, run_at, attempts, max_attempts, lease_generation,
  created_at, updated_at, queue, priority, timeout_ms, singleton_key, singleton_on, policy, group_key,
  dead_letter, origin_id, retry_delay_ms, retry_backoff, retry_delay_max_ms, keep_until, delete_after_ms, last_error, headers,
  tags, meta)
VALUES (:id, :kind, :payload, 'pending', coalesce(:run_at, :now + :delay_ms), 0, :max_attempts, 0,
  :now, :now, :queue, :priority, :timeout_ms, :singleton_key, :singleton_on, :policy, :group_key,
  :dead_letter, :origin_id, :retry_delay_ms, :retry_backoff, :retry_delay_max_ms, :keep_until,
  :delete_after_ms, :last_error, :headers, :tags, :meta)
ON CONFLICT DO NOTHING
"""

# INSERT's bulk twin (a bulk without uniqueness keys): ONE statement over a JSON array of rows,
# the run time computed by the caller as INSERT computes it, and only the columns some row of the
# batch sets (the optional ones every row leaves NULL are not named: NULL is their default). Each
# column a row carries costs it time, NULL or not: an executemany binding 25 parameters a row took
# SQLite 13 µs a row, binding the ten a plain job sets 8.5 µs, and this statement 6.6 µs with the
# JSON encoding (docs/performance.md, "SQLite bulk enqueue").
INSERT_ROWS_ALWAYS = ("id", "kind", "payload", "run_at", "max_attempts", "created_at", "queue", "priority",
                      "policy")
INSERT_ROWS_OPTIONAL = ("timeout_ms", "singleton_key", "singleton_on", "group_key", "dead_letter", "origin_id",
                        "retry_delay_ms", "retry_backoff", "retry_delay_max_ms", "keep_until", "delete_after_ms",
                        "last_error", "headers", "tags", "meta")


def insert_rows(optional: tuple[str, ...]) -> str:
    """The bulk INSERT of the rows in the JSON array ``?1``, each an array of
    :data:`INSERT_ROWS_ALWAYS` then the ``optional`` columns (``created_at`` also written to
    ``updated_at``), in that order."""
    cols = INSERT_ROWS_ALWAYS + optional
    values = ", ".join(f"value ->> {i}" for i in range(len(cols)))
    return (f"INSERT INTO tenure_jobs (state, attempts, lease_generation, updated_at, {', '.join(cols)})\n"
            f"SELECT 'pending', 0, 0, value ->> 5, {values} FROM json_each(?1) WHERE true\nON CONFLICT DO NOTHING")


FIND_SINGLETON = """
SELECT id FROM tenure_jobs
WHERE queue = :queue AND singleton_key = :singleton_key
  AND (:singleton_on IS NULL OR singleton_on = :singleton_on)
  AND state IN ('pending', 'failed', 'leased')
ORDER BY created_at, id LIMIT 1
"""

GET = f"SELECT {COLS} FROM tenure_jobs WHERE id = ?"

RENEW = f"""
UPDATE tenure_jobs SET lease_until = :now + :lease_ms, lease_token = lower(hex(randomblob(16))),
  updated_at = :now
WHERE id = :id AND state = 'leased' AND lease_token = :token AND lease_until > :now
RETURNING {COLS}
"""

LOCK = """
SELECT 1 FROM tenure_jobs
WHERE id = :id AND state = 'leased' AND lease_token = :token AND lease_until > :now
"""

# Fenced completions of a batch in one statement; :items is a JSON array of [id, token, result].
COMPLETE = """
UPDATE tenure_jobs SET state = 'done', result = t.value ->> 2, lease_until = NULL, lease_owner = NULL,
  updated_at = :now
FROM json_each(:items) AS t
WHERE tenure_jobs.id = t.value ->> 0 AND tenure_jobs.state = 'leased'
  AND tenure_jobs.lease_token = t.value ->> 1 AND tenure_jobs.lease_until > :now
RETURNING tenure_jobs.id, tenure_jobs.lease_generation
"""

# Prune settled runs' checkpoints, only generations at or below the settling one (§5);
# :settled is a JSON array of [id, generation].
PRUNE_CHECKPOINTS = """
DELETE FROM tenure_checkpoints
WHERE run_id IN (SELECT value ->> 0 FROM json_each(:settled))
  AND generation <= (SELECT s.value ->> 1 FROM json_each(:settled) s WHERE s.value ->> 0 = run_id)
"""

# A failed attempt's history entry (:entry, JSON text) appended to errors, keeping the first and
# the :keep most recent (tenure.attempt_history); its "at" is this statement's clock.
APPEND_ERROR = """(SELECT json_group_array(json(h.value)) FROM (
    SELECT e.key, e.value FROM json_each(json_insert(coalesce(tenure_jobs.errors, '[]'), '$[#]',
                                                     json_set(:entry, '$.at', :now))) e
    WHERE e.key = 0 OR e.key > json_array_length(coalesce(tenure_jobs.errors, '[]')) - :keep
    ORDER BY e.key) h)"""

FAIL = f"""
UPDATE tenure_jobs SET
  state = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
    WHEN :dead OR attempts >= max_attempts THEN 'dead' ELSE 'failed' END,
  run_at = CASE WHEN :dead OR attempts >= max_attempts THEN run_at
    WHEN :fixed THEN :now + :delay_ms
    WHEN retry_delay_ms IS NULL THEN :now + :delay_ms
    WHEN coalesce(retry_backoff, 0) = 0 THEN :now + retry_delay_ms
    ELSE :now + CAST(min(coalesce(retry_delay_max_ms, 9000000000000000),
                         retry_delay_ms << min(max(attempts - 1, 0), 40)) * :jitter AS INTEGER) END,
  errors = CASE WHEN :entry IS NULL THEN errors ELSE {APPEND_ERROR} END,
  last_error = :error, lease_until = NULL, lease_owner = NULL, updated_at = :now
WHERE id = :id AND state = 'leased' AND lease_token = :token AND lease_until > :now
RETURNING {COLS}
"""

# Handler control (tenure.Snooze): back to pending at :run_at without using up a retry (the claim
# counted this attempt, so max_attempts grows by one). Fenced like every settlement.
SNOOZE = f"""
UPDATE tenure_jobs SET state = 'pending', run_at = :run_at, max_attempts = max_attempts + 1,
  lease_until = NULL, lease_owner = NULL, updated_at = :now
WHERE id = :id AND state = 'leased' AND lease_token = :token AND lease_until > :now
RETURNING {COLS}
"""

# ctx.progress (tenure.progress): fenced like a settlement, so a stale attempt writes nothing.
PROGRESS = """
UPDATE tenure_jobs SET progress = json_object('fraction', :fraction, 'note', :note, 'attempt', :attempt,
  'at', :now)
WHERE id = :id AND state = 'leased' AND lease_token = :token AND lease_until > :now
"""

CANCEL_LEASED = f"""
UPDATE tenure_jobs SET state = 'cancelled', lease_until = NULL, lease_owner = NULL, lease_token = NULL,
  updated_at = :now
WHERE id = :id AND state = 'leased' AND lease_token = :token AND lease_until > :now
RETURNING {COLS}
"""

CANCEL_QUEUED = f"""
UPDATE tenure_jobs SET state = 'cancelled', lease_until = NULL, lease_owner = NULL, lease_token = NULL,
  updated_at = :now
WHERE id = :id AND (state IN ('pending', 'failed') OR (state = 'leased' AND lease_until <= :now))
RETURNING {COLS}
"""

# A job abandoned by an immediate shutdown (tenure.job_control.release): back to pending now, its
# retries left unchanged (like a snooze), fenced by the abandoning attempt's current lease.
RELEASE = f"""
UPDATE tenure_jobs SET state = 'pending', run_at = :now, max_attempts = max_attempts + 1,
  lease_until = NULL, lease_owner = NULL, updated_at = :now
WHERE id = :id AND state = 'leased' AND lease_token = :token AND lease_until > :now
RETURNING {COLS}
"""

# jobs.request_cancel (tenure.job_control) on a job with a live lease: flag it for its holder.
REQUEST_CANCEL = f"""
UPDATE tenure_jobs SET cancel_requested_at = coalesce(cancel_requested_at, :now), updated_at = :now
WHERE id = :id AND state = 'leased' AND lease_until > :now
RETURNING {COLS}
"""

# Flagged jobs whose holder is gone (lease expired): cancelled, by the next claim.
CANCEL_ABANDONED = f"""
UPDATE tenure_jobs SET state = 'cancelled', lease_until = NULL, lease_owner = NULL, lease_token = NULL,
  updated_at = :now
WHERE id IN (SELECT id FROM tenure_jobs INDEXED BY tenure_jobs_cancel_requested
             WHERE cancel_requested_at IS NOT NULL AND state = 'leased' AND lease_until <= :now)
RETURNING {COLS}
"""

# The flagged jobs still leased: what the holders' cancel watch looks for (tenure.worker.cancel_watch).
CANCEL_FLAGGED = """
SELECT id FROM tenure_jobs INDEXED BY tenure_jobs_cancel_requested
WHERE cancel_requested_at IS NOT NULL AND state = 'leased'
"""

REQUEUE = f"""
UPDATE tenure_jobs SET state = 'pending', run_at = :now, lease_until = NULL, lease_owner = NULL,
  lease_token = NULL, cancel_requested_at = NULL, updated_at = :now
WHERE id = :id AND (state IN ('failed', 'dead', 'cancelled') OR (state = 'leased' AND lease_until <= :now))
RETURNING {COLS}
"""

COUNTS = "SELECT state, count(*) FROM tenure_jobs GROUP BY state"

# Keyset page by id. The WHERE clause is built per filter shape (see PAGE_FILTERS): a generic
# "(:after IS NULL OR id > :after)" would stop SQLite seeking on the primary key.
PAGE = f"""
SELECT {COLS} FROM tenure_jobs
WHERE 1 = 1 {{filters}}
ORDER BY id {{direction}} LIMIT :limit
"""
# Newest first (page(order="newest")): the same keyset walked down the primary key.
PAGE_AFTER_DESC = " AND id < :after"
PAGE_FILTERS = {
    "state": " AND state = :state",
    "kind": " AND kind = :kind",
    "queue": " AND queue = :queue",
    "tag": " AND tags IS NOT NULL AND EXISTS (SELECT 1 FROM json_each(tags) t WHERE t.value = :tag)",
    "after": " AND id > :after",
}

# Bulk administration (tenure.bulk_admin): the ids a filter matches, by id, among the rows the
# operation may touch (MATCH_ELIGIBLE); one bounded batch per call, continued with "after".
MATCH = """
SELECT id FROM tenure_jobs
WHERE 1 = 1 {filters}
ORDER BY id LIMIT :limit
"""
MATCH_FILTERS = {**PAGE_FILTERS, "before": " AND created_at < :before"}
MATCH_ELIGIBLE = {
    "cancel": " AND state IN ('pending', 'failed', 'leased')",
    "requeue": " AND (state IN ('failed', 'dead', 'cancelled') OR (state = 'leased' AND lease_until <= :now))",
    "delete": " AND NOT (state = 'leased' AND lease_until > :now)",
}
# Never a job with a live lease: its running attempt would lose the row under it.
DELETE_JOBS = """
DELETE FROM tenure_jobs WHERE id IN (SELECT value FROM json_each(:ids))
  AND NOT (state = 'leased' AND lease_until > :now)
RETURNING id
"""

SWEEP_SELECT = """
SELECT id FROM tenure_jobs INDEXED BY tenure_jobs_settled
WHERE state IN ('done', 'dead', 'cancelled') AND updated_at < :before
ORDER BY updated_at, id LIMIT :limit
"""
SWEEP_DELETE_JOBS = "DELETE FROM tenure_jobs WHERE id IN (SELECT value FROM json_each(:ids))"
SWEEP_DELETE_CHECKPOINTS = "DELETE FROM tenure_checkpoints WHERE run_id IN (SELECT value FROM json_each(:ids))"

CHECKPOINT_SAVE = """
INSERT INTO tenure_checkpoints (run_id, node_id, value, generation)
SELECT :run_id, :node_id, :value, lease_generation FROM tenure_jobs
WHERE id = :run_id AND state = 'leased' AND lease_token = :token AND lease_until > :now
  AND lease_generation = :generation
ON CONFLICT (run_id, node_id) DO UPDATE SET value = excluded.value, generation = excluded.generation
"""

CHECKPOINT_LIST = """
SELECT node_id, value, generation FROM tenure_checkpoints
WHERE run_id = ? AND generation <= ? ORDER BY node_id
"""

LEASED_IN_QUEUE = "SELECT count(*) FROM tenure_jobs WHERE queue = ? AND state = 'leased' AND lease_until > ?"
SATURATED_GROUPS = """
SELECT group_key FROM tenure_jobs
WHERE queue = ? AND group_key IS NOT NULL AND state = 'leased' AND lease_until > ?
GROUP BY group_key HAVING count(*) >= ?
"""


# Rate windows (tenure/rate_window.py), read and written by limited claims.
RATE_WINDOW_GET = """
SELECT starts, turn FROM tenure_rate_windows WHERE queue = ? AND scope = ? AND group_key = ?"""
RATE_WINDOW_SAVE = """
INSERT INTO tenure_rate_windows (queue, scope, group_key, starts, blocked_until, turn)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (queue, scope, group_key) DO UPDATE SET starts = excluded.starts,
  blocked_until = excluded.blocked_until, turn = excluded.turn"""
RATE_WINDOW_NEXT_OPEN = """
SELECT min(blocked_until) FROM tenure_rate_windows WHERE queue = ? AND scope = 1 AND blocked_until > ?"""
RATE_WINDOW_LIST = """
SELECT scope, group_key, starts, blocked_until, turn FROM tenure_rate_windows WHERE queue = ?
ORDER BY scope, group_key LIMIT ?"""
RATE_WINDOW_DELETE = "DELETE FROM tenure_rate_windows WHERE queue = ?"
# fairness: the groups with queued jobs, by a skip scan of tenure_jobs_group_head (one
# seek per group), those whose rate window is closed left out, served longest ago first.
FAIR_GROUPS = """
WITH RECURSIVE g(k) AS (
  SELECT (SELECT group_key FROM tenure_jobs INDEXED BY tenure_jobs_group_head
          WHERE queue = :queue AND group_key IS NOT NULL AND state IN ('pending', 'failed') AND waiting_on = 0
          ORDER BY queue, group_key LIMIT 1)
  UNION ALL
  SELECT (SELECT group_key FROM tenure_jobs INDEXED BY tenure_jobs_group_head
          WHERE queue = :queue AND group_key > g.k AND state IN ('pending', 'failed') AND waiting_on = 0
          ORDER BY queue, group_key LIMIT 1)
  FROM g WHERE g.k IS NOT NULL)
SELECT g.k, coalesce(w.turn, 0) FROM g LEFT JOIN tenure_rate_windows w ON w.queue = :queue AND w.scope = 1 AND w.group_key = g.k
WHERE g.k IS NOT NULL AND coalesce(w.blocked_until, 0) <= :now
ORDER BY coalesce(w.turn, 0), g.k"""

MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS tenure_migrations (
  version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)
"""

TABLES = (
    "tenure_dependencies", "tenure_checkpoints", "tenure_jobs", "tenure_queues", "tenure_schedules", "tenure_subscriptions",
    "tenure_leader", "tenure_workers", "tenure_signals", "tenure_waits", "tenure_rate_windows",
)
