-- Queues, priorities, policies, schedules, leadership and worker registry.
ALTER TABLE tenure_jobs ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
ALTER TABLE tenure_jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenure_jobs ADD COLUMN timeout_ms INTEGER;
ALTER TABLE tenure_jobs ADD COLUMN singleton_key TEXT;
ALTER TABLE tenure_jobs ADD COLUMN singleton_on INTEGER;
ALTER TABLE tenure_jobs ADD COLUMN policy TEXT NOT NULL DEFAULT 'standard';
ALTER TABLE tenure_jobs ADD COLUMN group_key TEXT;
ALTER TABLE tenure_jobs ADD COLUMN dead_letter TEXT;
ALTER TABLE tenure_jobs ADD COLUMN origin_id TEXT;
ALTER TABLE tenure_jobs ADD COLUMN retry_delay_ms INTEGER;
ALTER TABLE tenure_jobs ADD COLUMN retry_backoff INTEGER;
ALTER TABLE tenure_jobs ADD COLUMN retry_delay_max_ms INTEGER;
ALTER TABLE tenure_jobs ADD COLUMN keep_until INTEGER;
ALTER TABLE tenure_jobs ADD COLUMN delete_after_ms INTEGER;

-- Claim path: one index per queue in priority order (a claim over several queues merges their
-- index-ordered heads, so cost stays flat with depth); expired leases are found separately.
-- Every index here is paid on each state change, so there are as few as the claim, the
-- recovery and the sweep need (see docs/performance.md).
CREATE INDEX IF NOT EXISTS tenure_jobs_claim
  ON tenure_jobs (queue, priority DESC, run_at, created_at, id) WHERE state IN ('pending', 'failed');
CREATE INDEX IF NOT EXISTS tenure_jobs_leased
  ON tenure_jobs (lease_until) WHERE state = 'leased';
CREATE INDEX IF NOT EXISTS tenure_jobs_settled
  ON tenure_jobs (updated_at) WHERE state IN ('done', 'dead', 'cancelled');
CREATE INDEX IF NOT EXISTS tenure_jobs_origin ON tenure_jobs (origin_id) WHERE origin_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS tenure_jobs_singleton
  ON tenure_jobs (queue, singleton_key, state) WHERE singleton_key IS NOT NULL;

CREATE TABLE IF NOT EXISTS tenure_queues (
  name TEXT PRIMARY KEY,
  policy TEXT NOT NULL DEFAULT 'standard',
  max_attempts INTEGER,
  retry_delay_ms INTEGER,
  retry_backoff INTEGER,
  retry_delay_max_ms INTEGER,
  timeout_ms INTEGER,
  retention_ms INTEGER,
  delete_after_ms INTEGER,
  dead_letter TEXT,
  concurrency_limit INTEGER,
  group_limit INTEGER,
  paused INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS tenure_schedules (
  name TEXT PRIMARY KEY,
  cron TEXT NOT NULL,
  tz TEXT NOT NULL DEFAULT 'UTC',
  kind TEXT NOT NULL,
  payload TEXT,
  queue TEXT,
  options TEXT,
  last_fire_at INTEGER,
  next_fire_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS tenure_subscriptions (
  event TEXT NOT NULL,
  queue TEXT NOT NULL,
  PRIMARY KEY (event, queue)
);

CREATE TABLE IF NOT EXISTS tenure_leader (
  name TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  expires_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS tenure_workers (
  id TEXT PRIMARY KEY,
  host TEXT,
  pid INTEGER,
  queues TEXT,
  kinds TEXT,
  concurrency INTEGER,
  started_at INTEGER NOT NULL,
  heartbeat_at INTEGER NOT NULL,
  in_flight INTEGER NOT NULL DEFAULT 0,
  stats TEXT
);

-- Jobs written before the registry existed: register their queues now (an all-queues claim
-- enumerates the registry, so a missing row would strand that queue's live jobs).
INSERT OR IGNORE INTO tenure_queues (name, created_at, updated_at)
  SELECT queue, min(created_at), min(created_at) FROM tenure_jobs GROUP BY queue;

-- Every queue a job names exists in the registry (so an all-queues claim can enumerate them),
-- whoever inserted the job: tenure, or the application's own connection (the outbox).
CREATE TRIGGER IF NOT EXISTS tenure_jobs_queue_registry AFTER INSERT ON tenure_jobs
BEGIN
  INSERT OR IGNORE INTO tenure_queues (name, created_at, updated_at)
  VALUES (NEW.queue, NEW.created_at, NEW.created_at);
END;
