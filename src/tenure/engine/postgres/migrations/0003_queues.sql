-- Queues, priorities, policies, schedules, leadership and worker registry (SQLite's 0003).
-- Flags (retry_backoff, paused) stay INTEGER 0/1 as on SQLite, so rows that cross the engine
-- boundary carry the same Python values on both engines.
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS queue TEXT NOT NULL DEFAULT 'default';
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS timeout_ms BIGINT;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS singleton_key TEXT;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS singleton_on BIGINT;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS policy TEXT NOT NULL DEFAULT 'standard';
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS group_key TEXT;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS dead_letter TEXT;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS origin_id TEXT;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS retry_delay_ms BIGINT;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS retry_backoff INTEGER;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS retry_delay_max_ms BIGINT;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS keep_until BIGINT;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS delete_after_ms BIGINT;

-- A queue table is all churn: every job is inserted, updated three or four times and deleted.
-- fillfactor 90 leaves room in each page so an update's new row version lands on the same page
-- (HOT, with no new index entries, when no indexed column changed; most transitions do change
-- state or lease_until, and then same-page placement still spares the table from growing).
-- Vacuum and analyze after 2% / 5% of the rows changed instead of the default 20% / 10%, so the
-- dead versions left by claims are reclaimed before they bloat the claim indexes, and the planner
-- keeps seeing how few rows are pending.
ALTER TABLE tenure_jobs SET (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_analyze_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);

-- Claim paths: any queue (global priority order) and one queue; expired leases separately. The
-- partial predicates are the claim's own WHERE clauses, so a claim reads an index in claim order
-- and stops after LIMIT rows (no sort, no visit to settled rows). Every index here is paid on each
-- state change, so there are only those the claim, recovery, sweep and policies need.
CREATE INDEX IF NOT EXISTS tenure_jobs_claim_any
  ON tenure_jobs (priority DESC, run_at, created_at, id) WHERE state IN ('pending', 'failed');
CREATE INDEX IF NOT EXISTS tenure_jobs_claim
  ON tenure_jobs (queue, priority DESC, run_at, created_at, id) WHERE state IN ('pending', 'failed');
CREATE INDEX IF NOT EXISTS tenure_jobs_leased
  ON tenure_jobs (lease_until) WHERE state = 'leased';
CREATE INDEX IF NOT EXISTS tenure_jobs_settled
  ON tenure_jobs (updated_at, id) WHERE state IN ('done', 'dead', 'cancelled');
CREATE INDEX IF NOT EXISTS tenure_jobs_origin ON tenure_jobs (origin_id) WHERE origin_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS tenure_jobs_singleton
  ON tenure_jobs (queue, singleton_key, state) WHERE singleton_key IS NOT NULL;

CREATE TABLE IF NOT EXISTS tenure_queues (
  name TEXT COLLATE "C" PRIMARY KEY,
  policy TEXT NOT NULL DEFAULT 'standard',
  max_attempts INTEGER,
  retry_delay_ms BIGINT,
  retry_backoff INTEGER,
  retry_delay_max_ms BIGINT,
  timeout_ms BIGINT,
  retention_ms BIGINT,
  delete_after_ms BIGINT,
  dead_letter TEXT,
  concurrency_limit INTEGER,
  group_limit INTEGER,
  paused INTEGER NOT NULL DEFAULT 0,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS tenure_schedules (
  name TEXT COLLATE "C" PRIMARY KEY,
  cron TEXT NOT NULL,
  tz TEXT NOT NULL DEFAULT 'UTC',
  kind TEXT NOT NULL,
  payload TEXT,
  queue TEXT,
  options TEXT,
  last_fire_at BIGINT,
  next_fire_at BIGINT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS tenure_subscriptions (
  event TEXT COLLATE "C" NOT NULL,
  queue TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (event, queue)
);

CREATE TABLE IF NOT EXISTS tenure_leader (
  name TEXT COLLATE "C" PRIMARY KEY,
  owner TEXT NOT NULL,
  expires_at BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS tenure_workers (
  id TEXT COLLATE "C" PRIMARY KEY,
  host TEXT,
  pid INTEGER,
  queues TEXT,
  kinds TEXT,
  concurrency INTEGER,
  started_at BIGINT NOT NULL,
  heartbeat_at BIGINT NOT NULL,
  in_flight INTEGER NOT NULL DEFAULT 0,
  stats TEXT
);

-- Every queue a job names exists in the registry, whoever inserted the job: tenure, or the
-- application's own connection (the outbox). Statement-level over the inserted rows, so a bulk
-- enqueue registers each new queue once; names in order, so two transactions creating the same
-- new queues never wait on each other in a cycle; an existing queue costs one index probe.
CREATE OR REPLACE FUNCTION tenure_jobs_register_queues() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO tenure_queues (name, created_at, updated_at)
  SELECT n.queue, min(n.created_at), min(n.created_at) FROM tenure_new_jobs n
  WHERE NOT EXISTS (SELECT 1 FROM tenure_queues q WHERE q.name = n.queue)
  GROUP BY n.queue ORDER BY n.queue
  ON CONFLICT (name) DO NOTHING;
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS tenure_jobs_queue_registry ON tenure_jobs;
CREATE TRIGGER tenure_jobs_queue_registry AFTER INSERT ON tenure_jobs
  REFERENCING NEW TABLE AS tenure_new_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION tenure_jobs_register_queues();
