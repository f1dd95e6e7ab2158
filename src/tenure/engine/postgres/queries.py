"""Every SQL statement the PostgreSQL engine runs, by name. Parameters are psycopg's ``%(name)s``.

The names follow the SQLite engine's ``queries.py`` wherever a statement does the same job; the
batch settlements (``COMPLETE``, ``FAIL``) take arrays and settle a whole batch in one statement.

Times are epoch ms. ``%(now)s`` is an int or NULL; NULL means the database's clock. Each
time-dependent statement reads it once, through the one-row ``clock`` CTE (:data:`CLOCK`), and
refers to it as :data:`NOW`: a scalar sub-select the planner evaluates once per statement (an
InitPlan), so it can bound an index scan, where a volatile function call could not.
Every parameter carries an explicit cast: psycopg sends a small Python int as int2, and
``int2 + int2`` would overflow.
"""

from __future__ import annotations

from ...errors import WorkerLost
from ..rows import JOB_COLUMNS

COLS = ", ".join(JOB_COLUMNS)
J_COLS = ", ".join(f"j.{c}" for c in JOB_COLUMNS)

CLOCK = "clock AS (SELECT coalesce(%(now)s::bigint, tenure_now_ms()) AS ms)"
NOW = "(SELECT ms FROM clock)"

# Tokens: 32 lowercase hex chars like SQLite's lower(hex(randomblob(16))), from
# gen_random_uuid() (PostgreSQL 13+, no extension), which draws on the server's strong random
# source (random() is a seeded PRNG, fine for jitter but not for a fence).
NEW_TOKEN = "translate(gen_random_uuid()::text, '-', '')"

NOW_MS = "SELECT tenure_now_ms()"
# A worker's multi-round-trip transaction under a deadline: the server ends it too if a statement
# or an idle gap outlives the deadline (tenure/engine/postgres/deadline.py).
LOCAL_TIMEOUTS = """
SELECT set_config('statement_timeout', %(ms)s::text, true),
       set_config('idle_in_transaction_session_timeout', %(ms)s::text, true)
"""

# -- claim ----------------------------------------------------------------------------------------

# Queues whose claims must be serialised across processes: a concurrency or group limit needs an
# exact count of live leases, and the singleton policies an exact "is one of this key leased?".
# The claim statement skips them (with paused queues) in SQL; the engine then claims from them one
# queue at a time under that queue's advisory lock (PostgresSession._claim_limited).
LIMITED = ("concurrency_limit IS NOT NULL OR group_limit IS NOT NULL OR policy IN ('singleton', 'stately', "
           "'strict_fifo') OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL OR fairness IS NOT NULL")
SKIP_PAUSED = "q.paused = 1"
# paused = 1 or LIMITED, as a generated column (migration 0007 says why).
SKIP_PAUSED_OR_LIMITED = "q.claim_apart = 1"

_ELIGIBLE_FILTERS = f"""
       {{kind_filter}}
       {{queue_filter}}
       AND NOT EXISTS (SELECT 1 FROM tenure_queues q WHERE q.name = j.queue AND {{skip_queues}})
       AND (j.singleton_key IS NULL OR j.policy NOT IN ('singleton', 'stately')
            OR NOT EXISTS (SELECT 1 FROM tenure_jobs a WHERE a.queue = j.queue
                           AND a.singleton_key = j.singleton_key AND a.state = 'leased'
                           AND a.lease_until > {NOW} AND a.id <> j.id))
"""

# A 'singleton'/'stately' job waits while another job of its key holds a live lease.
SERIAL = "policy IN ('singleton', 'stately') AND singleton_key IS NOT NULL"

# One statement: pick eligible ids in claim order from each index-friendly branch (due
# pending/failed rows through a partial claim index, expired leases through the leased index),
# locking them with SKIP LOCKED so concurrent claimers pass each other instead of queueing, then
# lease the first :limit of them, minting a token per row. A row another transaction changed
# meanwhile is re-checked against the WHERE clause by the lock (READ COMMITTED's re-evaluation),
# so no attempt is handed out twice. Of the 'singleton'/'stately' candidates sharing a key only
# the first is taken (key_rank), as on SQLite, so one batch never leases two jobs of one key.
# Queue and group concurrency limits, and the singleton policies across processes, are applied by
# the engine under a per-queue advisory lock; see PostgresSession.job_claim.
# Bounded reclaim (docs/guarantees.md, "Liveness: bounded reclaim and dead letters"): an expired
# lease on a job that has used its last attempt is never leased again: its id is answered with a
# NULL flag (as a row of the old values), and the engine settles it dead with REAP in a
# transaction of its own (no INSERT may sit in this statement: tenure_jobs_inserted is a
# statement-level trigger and would NOTIFY on every claim). At most {revive} (1, or 0 when the
# caller already holds other claims) other expired lease is leased again, and then ALONE: no due
# job is claimed with it, so a job that crashes its worker takes no batch-mates down with it.
# {limit} is written into the text (a validated int), not sent as a parameter: with LIMIT $n the
# planner prices a prepared statement's generic plan for 10% of the table and so re-plans this
# statement on every call; with the number in the text the generic plan is reused.
_CANDIDATE = "SELECT j.id, j.priority, j.run_at, j.created_at, j.queue, j.policy, j.singleton_key"
_CLAIM_ORDER = "priority DESC, run_at, created_at, id"
CLAIM = f"""
WITH {CLOCK},
due AS (
  {_CANDIDATE} FROM tenure_jobs j
  WHERE j.state IN ('pending', 'failed') AND j.waiting_on = 0 AND j.run_at <= {NOW} {_ELIGIBLE_FILTERS}
  ORDER BY j.priority DESC, j.run_at, j.created_at, j.id LIMIT {{limit}}
  FOR UPDATE OF j SKIP LOCKED),
expired AS (
  {_CANDIDATE}, j.attempts >= j.max_attempts AS spent FROM tenure_jobs j
  WHERE j.state = 'leased' AND j.lease_until <= {NOW} AND j.cancel_requested_at IS NULL {_ELIGIBLE_FILTERS}
  ORDER BY j.priority DESC, j.run_at, j.created_at, j.id LIMIT {{limit}}
  FOR UPDATE OF j SKIP LOCKED),
revived AS (SELECT id FROM expired WHERE NOT spent ORDER BY {_CLAIM_ORDER} LIMIT {{revive}}),
ranked AS (
  SELECT id, priority, run_at, created_at, row_number() OVER (
    PARTITION BY CASE WHEN {SERIAL} THEN queue END, CASE WHEN {SERIAL} THEN singleton_key ELSE id END
    ORDER BY {_CLAIM_ORDER}) AS key_rank
  FROM due p),
chosen AS (
  SELECT id, true AS reclaimed FROM revived
  UNION ALL
  (SELECT id, false FROM ranked WHERE key_rank = 1 AND NOT EXISTS (SELECT 1 FROM revived)
   ORDER BY {_CLAIM_ORDER} LIMIT {{limit}})),
claimed AS (
  UPDATE tenure_jobs j SET state = 'leased', lease_owner = %(owner)s, lease_instance = %(instance)s::text,
    lease_until = {NOW} + %(lease_ms)s::bigint, lease_generation = j.lease_generation + 1,
    lease_token = {NEW_TOKEN}, attempts = j.attempts + 1, updated_at = {NOW}
  FROM chosen c WHERE j.id = c.id
  RETURNING {J_COLS}, c.reclaimed)
SELECT {COLS}, reclaimed FROM claimed
UNION ALL
SELECT {J_COLS}, NULL FROM tenure_jobs j JOIN expired e ON e.id = j.id WHERE e.spent
ORDER BY {_CLAIM_ORDER}
"""

# The last_error of a job whose worker was lost on its final attempt (read with the row's OLD values).
WORKER_LOST_ERROR = (f"'{WorkerLost.code}: worker lost on its final attempt (' || j.attempts || ' of ' || "
                     "j.max_attempts || '): the lease of ' || coalesce(j.lease_owner, '?') || "
                     "' expired, and the next claim settled the job dead instead of running it again'")
# Settle the spent expired leases a claim met (see CLAIM): dead, token cleared (the lost attempt,
# if it still runs somewhere, is refused), fenced on "still leased, expired and spent", so of two
# claimers that met the same row exactly one settles it; the engine dead-letters what this answers
# in the same transaction.
REAP = f"""
WITH {CLOCK}
UPDATE tenure_jobs j SET state = 'dead', last_error = {WORKER_LOST_ERROR}, lease_until = NULL,
  lease_owner = NULL, lease_instance = NULL, lease_token = NULL, updated_at = {NOW}
WHERE j.id = ANY(%(ids)s::text[]) AND j.state = 'leased' AND j.lease_until <= {NOW}
  AND j.attempts >= j.max_attempts
RETURNING j.id
"""

# Opaque to the planner on purpose (kind is NOT NULL, so coalesce changes no result): priced as
# "j.kind = ANY(...)", a burst of enqueues that the statistics do not know yet made the filter look
# selective, and the planner then read every pending row and sorted them (52 ms per claim at
# 10 000 pending) instead of stopping an ordered scan of the claim index after :limit rows
# (docs/performance.md, proposal 4).
KIND_FILTER = "AND coalesce(j.kind = ANY(%(kinds)s::text[]), false)"
QUEUE_FILTER = "AND j.queue = ANY(%(queues)s::text[])"
ONE_QUEUE_FILTER = "AND j.queue = %(queue)s::text"
GROUP_FILTER = " AND (j.group_key IS NULL OR j.group_key <> ALL(%(full_groups)s::text[]))"
# A claim that names no queue takes no dead letter (docs/queues.md, "Dead letters"): nothing in a
# queue named as a dead-letter queue (one hashed sub-plan per statement), and no copy anywhere.
NO_DEAD_LETTERS = (" AND j.origin_queue IS NULL AND j.queue NOT IN "
                   "(SELECT q.dead_letter FROM tenure_queues q WHERE q.dead_letter IS NOT NULL)")

# policy 'strict_fifo': a job waits while an earlier job of its key is not done or
# cancelled (pending, failed, leased, or dead until requeued or deleted). Only limited claims carry
# it (a strict_fifo queue is limited); one probe of tenure_jobs_strict per candidate.
STRICT_FILTER = """
       AND (j.policy <> 'strict_fifo' OR j.singleton_key IS NULL
            OR NOT EXISTS (SELECT 1 FROM tenure_jobs e WHERE e.queue = j.queue AND e.singleton_key = j.singleton_key
                           AND e.policy = 'strict_fifo' AND e.state IN ('pending', 'failed', 'leased', 'dead')
                           AND (e.created_at, e.id) < (j.created_at, j.id)))"""
# group_rate_limit: a group whose rate window is closed is skipped, one probe each.
GROUP_RATE_FILTER = f"""
       AND (j.group_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM tenure_rate_windows w WHERE w.queue = j.queue AND w.scope = 1
            AND w.group_key = j.group_key AND w.blocked_until > {NOW}))"""
ONE_GROUP_FILTER = " AND j.group_key = %(only_group)s::text"

# The limited queues (see LIMITED), in name order: the order their advisory locks are taken in.
QUEUE_LIMITS = f"""
SELECT name, concurrency_limit, group_limit, policy IN ('singleton', 'stately'), rate_limit, rate_period_ms,
  group_rate_limit, group_rate_period_ms, fairness, group_weights FROM tenure_queues
WHERE {LIMITED}
ORDER BY name
"""

# The claim's plan from its first use: the generic plan the server settles on after 5 custom ones.
GENERIC_PLAN = "SET LOCAL plan_cache_mode = force_generic_plan"

# Rate windows (tenure/rate_window.py), read and written by limited claims under the
# queue's advisory lock.
RATE_WINDOW_GET = """
SELECT scope, group_key, starts, turn FROM tenure_rate_windows
WHERE queue = %(queue)s::text AND scope = %(scope)s::int AND group_key = %(key)s::text"""
RATE_WINDOW_SAVE = """
INSERT INTO tenure_rate_windows (queue, scope, group_key, starts, blocked_until, turn)
SELECT %(queue)s::text, w.scope, w.group_key, w.starts, w.blocked_until, w.turn
FROM unnest(%(scopes)s::int[], %(keys)s::text[], %(starts)s::text[], %(blocked)s::bigint[], %(turns)s::bigint[])
  AS w(scope, group_key, starts, blocked_until, turn)
ON CONFLICT (queue, scope, group_key) DO UPDATE SET starts = excluded.starts,
  blocked_until = excluded.blocked_until, turn = excluded.turn"""
RATE_WINDOW_NEXT_OPEN = """
SELECT min(blocked_until) FROM tenure_rate_windows
WHERE queue = %(queue)s::text AND scope = 1 AND blocked_until > %(now)s::bigint"""
RATE_WINDOW_LIST = """
SELECT scope, group_key, starts, blocked_until, turn FROM tenure_rate_windows WHERE queue = %(queue)s::text
ORDER BY scope, group_key LIMIT %(limit)s::bigint"""
RATE_WINDOW_DELETE = "DELETE FROM tenure_rate_windows WHERE queue = %(queue)s::text"
# fairness: the groups with queued jobs, by a skip scan of tenure_jobs_group_head (one
# seek per group), those whose rate window is closed left out, served longest ago first.
FAIR_GROUPS = """
WITH RECURSIVE g(k) AS (
  (SELECT group_key FROM tenure_jobs
   WHERE queue = %(queue)s::text AND group_key IS NOT NULL AND state IN ('pending', 'failed') AND waiting_on = 0
   ORDER BY group_key LIMIT 1)
  UNION ALL
  SELECT (SELECT j.group_key FROM tenure_jobs j
          WHERE j.queue = %(queue)s::text AND j.group_key > g.k AND j.state IN ('pending', 'failed') AND j.waiting_on = 0
          ORDER BY j.group_key LIMIT 1)
  FROM g WHERE g.k IS NOT NULL)
SELECT g.k, coalesce(w.turn, 0) FROM g LEFT JOIN tenure_rate_windows w ON w.queue = %(queue)s::text AND w.scope = 1 AND w.group_key = g.k
WHERE g.k IS NOT NULL AND coalesce(w.blocked_until, 0) <= %(now)s::bigint
ORDER BY coalesce(w.turn, 0), g.k"""
# Held to the end of the claim's transaction; every claimer of the queue takes it, in name order.
LOCK_QUEUE = "SELECT pg_advisory_xact_lock(hashtext('tenure.queue.' || %(name)s::text))"
# The same lock, then the database's clock, read only once the lock is held (a rate-limited
# claim decides at that one instant): one round trip instead of two.
LOCK_QUEUE_NOW = """
WITH locked AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtext('tenure.queue.' || %(name)s::text)) AS l)
SELECT tenure_now_ms() FROM locked"""
LEASED_IN_QUEUE = f"""
WITH {CLOCK}
SELECT count(*) FROM tenure_jobs
WHERE queue = %(queue)s::text AND state = 'leased' AND lease_until > {NOW}
"""
SATURATED_GROUPS = f"""
WITH {CLOCK}
SELECT group_key FROM tenure_jobs
WHERE queue = %(queue)s::text AND state = 'leased' AND lease_until > {NOW} AND group_key IS NOT NULL
GROUP BY group_key HAVING count(*) >= %(group_limit)s::int
"""

# -- insert ---------------------------------------------------------------------------------------

_INSERT_COLUMNS = """id, kind, payload, state, run_at, attempts, max_attempts, lease_generation,
  created_at, updated_at, queue, priority, timeout_ms, singleton_key, singleton_on, policy, group_key,
  dead_letter, origin_id, retry_delay_ms, retry_backoff, retry_delay_max_ms, keep_until, delete_after_ms,
  last_error, headers, tags, meta"""

INSERT = f"""
WITH {CLOCK}
INSERT INTO tenure_jobs ({_INSERT_COLUMNS})
SELECT %(id)s::text, %(kind)s::text, %(payload)s::text, 'pending',
  coalesce(%(run_at)s::bigint, c.ms + %(delay_ms)s::bigint), 0, %(max_attempts)s::int, 0, c.ms, c.ms,
  %(queue)s::text, %(priority)s::int, %(timeout_ms)s::bigint, %(singleton_key)s::text,
  %(singleton_on)s::bigint, %(policy)s::text, %(group_key)s::text, %(dead_letter)s::text,
  %(origin_id)s::text, %(retry_delay_ms)s::bigint, %(retry_backoff)s::int, %(retry_delay_max_ms)s::bigint,
  %(keep_until)s::bigint, %(delete_after_ms)s::bigint, %(last_error)s::text, %(headers)s::text,
  %(tags)s::text, %(meta)s::text
FROM clock c
ON CONFLICT DO NOTHING
RETURNING id
"""

# INSERT with the queue's defaults resolved IN the statement (one round trip per
# enqueue instead of a registry read and then the INSERT). Each column follows exactly the order of
# QueueRegistry._resolve: the job's own option, else the queue's default, else the built-in; a
# non-standard queue policy sets the policy and the queue-wide key ''; ``keep_until`` from the
# job's or the queue's retention; ``singleton_on`` rounded down on this statement's clock. The
# queue row is read in the INSERT's own snapshot, so a queue update committed by any process
# before this statement starts takes effect here (nothing is cached).
INSERT_RESOLVED = f"""
WITH {CLOCK},
r AS (
  SELECT c.ms, coalesce(%(run_at)s::bigint, c.ms + %(delay_ms)s::bigint) AS run_at,
    q.policy IS NOT NULL AND q.policy <> 'standard' AS queue_policy, q.policy AS q_policy,
    coalesce(%(retention_ms)s::bigint, q.retention_ms) AS retention,
    q.max_attempts AS q_max_attempts, q.retry_delay_ms AS q_retry_delay_ms, q.retry_backoff AS q_retry_backoff,
    q.retry_delay_max_ms AS q_retry_delay_max_ms, q.timeout_ms AS q_timeout_ms,
    q.delete_after_ms AS q_delete_after_ms, q.dead_letter AS q_dead_letter
  FROM clock c LEFT JOIN tenure_queues q ON q.name = %(queue)s::text)
INSERT INTO tenure_jobs ({_INSERT_COLUMNS})
SELECT %(id)s::text, %(kind)s::text, %(payload)s::text, 'pending', r.run_at, 0,
  coalesce(nullif(%(max_attempts)s::int, 0), nullif(r.q_max_attempts, 0), %(default_max_attempts)s::int), 0,
  r.ms, r.ms, %(queue)s::text, %(priority)s::int, coalesce(%(timeout_ms)s::bigint, r.q_timeout_ms),
  CASE WHEN r.queue_policy THEN coalesce(%(singleton_key)s::text, '') ELSE %(singleton_key)s::text END,
  CASE WHEN coalesce(%(singleton_on)s::bigint, 0) <> 0
       THEN r.ms - r.ms %% %(singleton_on)s::bigint ELSE %(singleton_on)s::bigint END,
  CASE WHEN r.queue_policy THEN r.q_policy ELSE %(policy)s::text END, %(group_key)s::text,
  coalesce(%(dead_letter)s::text,
           CASE WHEN r.q_dead_letter IS DISTINCT FROM %(queue)s::text THEN r.q_dead_letter END),
  %(origin_id)s::text, coalesce(%(retry_delay_ms)s::bigint, r.q_retry_delay_ms),
  coalesce(%(retry_backoff)s::int, (r.q_retry_backoff <> 0)::int),
  coalesce(%(retry_delay_max_ms)s::bigint, r.q_retry_delay_max_ms),
  CASE WHEN r.retention IS NOT NULL THEN r.run_at + r.retention ELSE %(keep_until)s::bigint END,
  coalesce(%(delete_after_ms)s::bigint, r.q_delete_after_ms), %(last_error)s::text, %(headers)s::text,
  %(tags)s::text, %(meta)s::text
FROM r
ON CONFLICT DO NOTHING
RETURNING id
"""

# Many rows in one statement, handed over as ONE jsonb array of per-row arrays (columns in
# INSERT_MANY_COLUMNS order): json.dumps is C, so the client spends ~8x less CPU than building and
# dumping 21 typed arrays, and the server unpacks jsonb cheaply. Rows go in input order, so of two
# rows with one id the first wins, as with one INSERT per row.
INSERT_MANY_COLUMNS = (
    ("id", "text"), ("kind", "text"), ("payload", "text"), ("run_at", "bigint"), ("delay_ms", "bigint"),
    ("max_attempts", "int"), ("queue", "text"), ("priority", "int"), ("timeout_ms", "bigint"),
    ("singleton_key", "text"), ("singleton_on", "bigint"), ("policy", "text"), ("group_key", "text"),
    ("dead_letter", "text"), ("origin_id", "text"), ("retry_delay_ms", "bigint"), ("retry_backoff", "int"),
    ("retry_delay_max_ms", "bigint"), ("keep_until", "bigint"), ("delete_after_ms", "bigint"),
    ("last_error", "text"), ("headers", "text"), ("tags", "text"), ("meta", "text"),
)
_UNPACK = ", ".join(f"(e ->> {i})::{t}" for i, (_, t) in enumerate(INSERT_MANY_COLUMNS))
INSERT_MANY = f"""
WITH {CLOCK}
INSERT INTO tenure_jobs ({_INSERT_COLUMNS})
SELECT t.id, t.kind, t.payload, 'pending', coalesce(t.run_at, c.ms + t.delay_ms), 0, t.max_attempts, 0,
  c.ms, c.ms, t.queue, t.priority, t.timeout_ms, t.singleton_key, t.singleton_on, t.policy, t.group_key,
  t.dead_letter, t.origin_id, t.retry_delay_ms, t.retry_backoff, t.retry_delay_max_ms, t.keep_until,
  t.delete_after_ms, t.last_error, t.headers, t.tags, t.meta
FROM clock c, (SELECT {_UNPACK}, x.n FROM jsonb_array_elements(%(rows)s::jsonb) WITH ORDINALITY AS x(e, n))
  AS t({", ".join(name for name, _ in INSERT_MANY_COLUMNS)}, n)
ORDER BY t.n
ON CONFLICT DO NOTHING
RETURNING id
"""

# Bulk enqueue by COPY: the rows are streamed into a per-connection staging table
# (temporary: no WAL, no other session sees it), then ONE statement moves them into tenure_jobs,
# in input order (of two rows with one id the first wins) and emptying the stage as it reads it,
# so a second bulk in the same transaction starts from an empty stage. The rows arrive with every
# queue default and policy already resolved (QueueRegistry._resolve), exactly as INSERT_MANY's do;
# uniqueness refusals are ON CONFLICT DO NOTHING, answered by the caller from RETURNING.
STAGE_TABLE = "pg_temp.tenure_jobs_stage"
# Fresh ids and no uniqueness key (Session.job_insert's ``fresh``): nothing can collide, so the
# rows go straight into tenure_jobs, every column computed by the client as INSERT computes it.
COPY_JOBS = f"COPY tenure_jobs ({_INSERT_COLUMNS}) FROM STDIN"
_STAGE_COLUMNS = ", ".join(name for name, _ in INSERT_MANY_COLUMNS)
_STAGE_TYPED = ", ".join(f"{name} {t}" for name, t in INSERT_MANY_COLUMNS)
STAGE_CREATE = f"""
CREATE TEMPORARY TABLE IF NOT EXISTS tenure_jobs_stage (n bigint, {_STAGE_TYPED}) ON COMMIT DELETE ROWS
"""
STAGE_COPY = f"COPY {STAGE_TABLE} (n, {_STAGE_COLUMNS}) FROM STDIN"
INSERT_STAGED = f"""
WITH {CLOCK}, t AS (DELETE FROM {STAGE_TABLE} RETURNING *)
INSERT INTO tenure_jobs ({_INSERT_COLUMNS})
SELECT t.id, t.kind, t.payload, 'pending', coalesce(t.run_at, c.ms + t.delay_ms), 0, t.max_attempts, 0,
  c.ms, c.ms, t.queue, t.priority, t.timeout_ms, t.singleton_key, t.singleton_on, t.policy, t.group_key,
  t.dead_letter, t.origin_id, t.retry_delay_ms, t.retry_backoff, t.retry_delay_max_ms, t.keep_until,
  t.delete_after_ms, t.last_error, t.headers, t.tags, t.meta
FROM clock c, t
ORDER BY t.n
ON CONFLICT DO NOTHING
RETURNING id
"""

EXISTING_IDS = "SELECT id FROM tenure_jobs WHERE id = ANY(%(ids)s::text[])"

FIND_SINGLETON = """
SELECT id FROM tenure_jobs
WHERE queue = %(queue)s::text AND singleton_key = %(singleton_key)s::text
  AND (%(singleton_on)s::bigint IS NULL OR singleton_on = %(singleton_on)s::bigint)
  AND state IN ('pending', 'failed', 'leased')
ORDER BY created_at, id LIMIT 1
"""

GET = f"SELECT {COLS} FROM tenure_jobs WHERE id = %(id)s::text"

# -- settle ---------------------------------------------------------------------------------------

_FENCE = f"j.state = 'leased' AND j.lease_token = {{token}} AND j.lease_until > {NOW}"
# The same fence for the batch settlements, written so that NO index but the primary key can
# serve it: ``state || ''`` no longer implies the leased index's ``WHERE state = 'leased'`` and
# ``lease_until + 0`` is not its key. Without this, a planner whose statistics predate a burst of
# claims (they say: almost nothing is leased) joins the batch against a scan of the leased index,
# which also walks every dead entry that earlier claims left there: measured 64 us per settled job
# in batches of 100 after 20 000 claims, against ~12 us with one primary-key probe per item.
_BATCH_FENCE = (f"j.state || '' = 'leased' AND j.lease_token = {{token}} "
                f"AND j.lease_until + 0 > {NOW}")

RENEW = f"""
WITH {CLOCK}
UPDATE tenure_jobs j SET lease_until = {NOW} + %(lease_ms)s::bigint, lease_token = {NEW_TOKEN},
  updated_at = {NOW}
WHERE j.id = %(id)s::text AND {_FENCE.format(token="%(token)s::text")}
RETURNING {J_COLS}
"""

# A handler transaction's fence check: the row stays locked (FOR UPDATE) until that transaction
# ends, so no claim, renewal or operator cancel can move it under the handler's writes.
LOCK = f"""
WITH {CLOCK}
SELECT 1 FROM tenure_jobs j
WHERE j.id = %(id)s::text AND {_FENCE.format(token="%(token)s::text")}
FOR UPDATE OF j
"""

# The LIMIT (the batch's own length) changes no result: it gives the GENERIC plan of a batch
# settlement a row estimate (an unnest of parameters is priced at 10 rows, a LIMIT of a parameter
# at a tenth of its input: 1 row). Without it the planner priced the generic plan above every
# custom one and re-planned COMPLETE on every execution (~0.35 ms of server CPU each, most of a
# single completion's time; docs/performance.md).
_BATCH_ROWS = "LIMIT cardinality(%(ids)s::text[])"

# A batch of fenced completions and the pruning of each settled job's checkpoints (generations up
# to the settling one) in ONE statement. The token stays on the row: a repeat settlement from the
# same attempt is recognised by it (D1).
COMPLETE = f"""
WITH {CLOCK},
items AS (SELECT * FROM unnest(%(ids)s::text[], %(tokens)s::text[], %(results)s::text[])
          AS t(id, token, result) {_BATCH_ROWS}),
settled AS (
  UPDATE tenure_jobs j SET state = 'done', result = t.result, lease_until = NULL, lease_owner = NULL,
    updated_at = {NOW}
  FROM items t
  WHERE j.id = t.id AND {_BATCH_FENCE.format(token="t.token")}
  RETURNING j.id, j.lease_generation),
pruned AS (
  DELETE FROM tenure_checkpoints c USING settled s
  WHERE c.run_id = s.id AND c.generation <= s.lease_generation)
SELECT id FROM settled
"""

# A failed attempt's history entry (t.entry, JSON text) appended to errors, keeping the first and
# the %(keep)s most recent (tenure.attempt_history); its "at" is this statement's clock.
APPEND_ERROR = f"""(
    SELECT jsonb_agg(x.e ORDER BY x.n)::text
    FROM jsonb_array_elements(coalesce(j.errors, '[]')::jsonb
                              || jsonb_build_array(jsonb_set(t.entry::jsonb, '{{at}}', to_jsonb({NOW}))))
         WITH ORDINALITY AS x(e, n)
    WHERE x.n = 1 OR x.n > jsonb_array_length(coalesce(j.errors, '[]')::jsonb) + 1 - %(keep)s::int)"""

# A batch of fenced failures: failed with run_at = now + backoff while attempts remain, else dead.
# A queue's own retry policy (retry_delay_ms, retry_backoff, retry_delay_max_ms, copied onto the
# row at enqueue) overrides the worker's backoff, jittered by the settlement's :jitter and
# truncated to whole ms like SQLite's CAST(... AS INTEGER).
FAIL = f"""
WITH {CLOCK},
items AS (SELECT * FROM unnest(%(ids)s::text[], %(tokens)s::text[], %(errors)s::text[],
                               %(delays)s::bigint[], %(deads)s::bool[], %(jitters)s::float8[],
                               %(entries)s::text[], %(fixed)s::bool[])
          AS t(id, token, error, delay_ms, dead, jitter, entry, fixed) {_BATCH_ROWS})
UPDATE tenure_jobs j SET
  state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
    WHEN t.dead OR j.attempts >= j.max_attempts THEN 'dead' ELSE 'failed' END,
  run_at = CASE WHEN t.dead OR j.attempts >= j.max_attempts THEN j.run_at
    WHEN t.fixed THEN {NOW} + t.delay_ms
    WHEN j.retry_delay_ms IS NULL THEN {NOW} + t.delay_ms
    WHEN coalesce(j.retry_backoff, 0) = 0 THEN {NOW} + j.retry_delay_ms
    ELSE {NOW} + trunc(least(coalesce(j.retry_delay_max_ms, 9000000000000000),
                            j.retry_delay_ms << least(greatest(j.attempts - 1, 0), 40)) * t.jitter)::bigint
    END,
  errors = CASE WHEN t.entry IS NULL THEN j.errors ELSE {APPEND_ERROR} END,
  last_error = t.error, lease_until = NULL, lease_owner = NULL, updated_at = {NOW}
FROM items t
WHERE j.id = t.id AND {_BATCH_FENCE.format(token="t.token")}
RETURNING {J_COLS}
"""

# Handler control (tenure.Snooze): back to pending at now + delay without using up a retry (the
# claim counted this attempt, so max_attempts grows by one). Fenced like every settlement.
SNOOZE = f"""
WITH {CLOCK}
UPDATE tenure_jobs j SET state = 'pending', run_at = {NOW} + %(delay_ms)s::bigint,
  max_attempts = j.max_attempts + 1, lease_until = NULL, lease_owner = NULL, updated_at = {NOW}
WHERE j.id = %(id)s::text AND {_FENCE.format(token="%(token)s::text")}
RETURNING {J_COLS}
"""

CANCEL_LEASED = f"""
WITH {CLOCK}
UPDATE tenure_jobs j SET state = 'cancelled', lease_until = NULL, lease_owner = NULL, lease_token = NULL,
  updated_at = {NOW}
WHERE j.id = %(id)s::text AND {_FENCE.format(token="%(token)s::text")}
RETURNING {J_COLS}
"""

CANCEL_QUEUED = f"""
WITH {CLOCK}
UPDATE tenure_jobs j SET state = 'cancelled', lease_until = NULL, lease_owner = NULL, lease_token = NULL,
  updated_at = {NOW}
WHERE j.id = %(id)s::text
  AND (j.state IN ('pending', 'failed') OR (j.state = 'leased' AND j.lease_until <= {NOW}))
RETURNING {J_COLS}
"""

# A job abandoned by an immediate shutdown (tenure.job_control.release): back to pending now, its
# retries left unchanged (like a snooze), fenced by the abandoning attempt's current lease.
RELEASE = f"""
WITH {CLOCK}
UPDATE tenure_jobs j SET state = 'pending', run_at = {NOW}, max_attempts = j.max_attempts + 1,
  lease_until = NULL, lease_owner = NULL, updated_at = {NOW}
WHERE j.id = %(id)s::text AND {_FENCE.format(token="%(token)s::text")}
RETURNING {J_COLS}
"""

# jobs.request_cancel (tenure.job_control) on a job with a live lease: flag it for its holder
# (migration 0010's trigger then NOTIFYs tenure_cancel).
REQUEST_CANCEL = f"""
WITH {CLOCK}
UPDATE tenure_jobs j SET cancel_requested_at = coalesce(j.cancel_requested_at, {NOW}), updated_at = {NOW}
WHERE j.id = %(id)s::text AND j.state = 'leased' AND j.lease_until > {NOW}
RETURNING {J_COLS}
"""

# Flagged jobs whose holder is gone (lease expired): cancelled, by the next claim.
CANCEL_ABANDONED = f"""
WITH {CLOCK}
UPDATE tenure_jobs j SET state = 'cancelled', lease_until = NULL, lease_owner = NULL, lease_token = NULL,
  updated_at = {NOW}
WHERE j.cancel_requested_at IS NOT NULL AND j.state = 'leased' AND j.lease_until <= {NOW}
RETURNING {J_COLS}
"""

# The flagged jobs still leased: what the holders' cancel watch looks for (tenure.worker.cancel_watch).
CANCEL_FLAGGED = "SELECT id FROM tenure_jobs WHERE cancel_requested_at IS NOT NULL AND state = 'leased'"
CANCEL_CHANNEL = "tenure_cancel"

REQUEUE = f"""
WITH {CLOCK}
UPDATE tenure_jobs j SET state = 'pending', run_at = {NOW}, lease_until = NULL, lease_owner = NULL,
  lease_token = NULL, cancel_requested_at = NULL, updated_at = {NOW}
WHERE j.id = %(id)s::text
  AND (j.state IN ('failed', 'dead', 'cancelled') OR (j.state = 'leased' AND j.lease_until <= {NOW}))
RETURNING {J_COLS}
"""

# ctx.progress (tenure.progress): fenced like a settlement, so a stale attempt writes nothing.
PROGRESS = f"""
WITH {CLOCK}
UPDATE tenure_jobs j SET progress = json_build_object('fraction', %(fraction)s::float8, 'note', %(note)s::text,
  'attempt', %(attempt)s::int, 'at', {NOW})::text
WHERE j.id = %(id)s::text AND {_FENCE.format(token="%(token)s::text")}
"""

# -- checkpoints ----------------------------------------------------------------------------------

# Fenced upsert: the row is written only if the job's lease is current. FOR SHARE holds the job
# row until the write commits, so a concurrent reclaim or settlement either waits for it (and
# then prunes it) or has already moved the row (and the re-checked fence refuses the write).
CHECKPOINT_SAVE = f"""
WITH {CLOCK},
fenced AS (
  SELECT j.id, j.lease_generation FROM tenure_jobs j
  WHERE j.id = %(run_id)s::text AND {_FENCE.format(token="%(token)s::text")}
    AND j.lease_generation = %(generation)s::int
  FOR SHARE OF j)
INSERT INTO tenure_checkpoints (run_id, node_id, value, generation)
SELECT id, %(node_id)s::text, %(value)s::text, lease_generation FROM fenced
ON CONFLICT (run_id, node_id) DO UPDATE SET value = excluded.value, generation = excluded.generation
"""

CHECKPOINT_LIST = """
SELECT node_id, value, generation FROM tenure_checkpoints
WHERE run_id = %(run_id)s::text AND generation <= %(max_generation)s::int ORDER BY node_id
"""


# -- migrations -----------------------------------------------------------------------------------

# One constant for every tenure on every database: migrations of one database run one at a time.
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(7325110404163461837)"
MIGRATION_LOCK_TIMEOUT = "SET LOCAL lock_timeout = '120s'"
MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS tenure_migrations (
  version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)
"""
# The migrations table of the schema tenure's tables live in (the configured one, else the first
# schema on the search path), without looking further down the search path.
MIGRATIONS_TABLE_EXISTS = """
SELECT to_regclass(format('%%I.tenure_migrations', coalesce(%(schema)s::text, current_schema()))) IS NOT NULL
"""
APPLIED_VERSIONS = "SELECT version FROM tenure_migrations"
RECORD_MIGRATION = """
INSERT INTO tenure_migrations (version, name, applied_at)
VALUES (%(version)s::int, %(name)s::text, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
"""

TABLES = (
    "tenure_rate_windows",
    "tenure_dependencies", "tenure_checkpoints", "tenure_jobs", "tenure_queues", "tenure_schedules", "tenure_subscriptions",
    "tenure_leader", "tenure_workers", "tenure_signals", "tenure_waits",
)
# Every tenure table of the current schema except the migration log (so tables added by later
# migrations are emptied too), as one TRUNCATE statement.
TRUNCATE_STATEMENT = """
SELECT 'TRUNCATE ' || string_agg(format('%I', tablename), ', ' ORDER BY tablename) FROM pg_tables
WHERE schemaname = current_schema() AND tablename LIKE 'tenure\\_%' AND tablename <> 'tenure_migrations'
"""

LISTEN = "LISTEN tenure_jobs"
CHANNEL = "tenure_jobs"
CURRENT_SCHEMA = "SELECT current_schema()"
#: Which database of which server a connection is on: the database's name and the server's start
#: time (two servers never share one). ``conn=`` must answer what the store's own pool answers.
DATABASE_IDENTITY = "SELECT current_database(), pg_postmaster_start_time()"
