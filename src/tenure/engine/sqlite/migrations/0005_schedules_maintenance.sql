-- Cron schedules and the maintenance runtime.
--
-- Schedules are keyed by (name, key): the key lets one schedule name carry variants (one per
-- tenant, say). catch_up says what a schedule does with boundaries missed while nothing ran:
-- 'latest' (fire the most recent one once), 'all' (fire each), 'none' (skip them). SQLite cannot
-- change a primary key in place, so the (still unused) 0003 table is rebuilt, rows kept.
CREATE TABLE tenure_schedules_v5 (
  name TEXT NOT NULL,
  key TEXT NOT NULL DEFAULT '',
  cron TEXT NOT NULL,
  tz TEXT NOT NULL DEFAULT 'UTC',
  kind TEXT NOT NULL,
  payload TEXT,
  queue TEXT,
  options TEXT,
  catch_up TEXT NOT NULL DEFAULT 'latest',
  last_fire_at INTEGER,
  next_fire_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (name, key)
);
INSERT INTO tenure_schedules_v5 (name, key, cron, tz, kind, payload, queue, options, last_fire_at,
  next_fire_at, created_at, updated_at)
SELECT name, '', cron, tz, kind, payload, queue, options, last_fire_at, next_fire_at, created_at,
  updated_at FROM tenure_schedules;
DROP TABLE tenure_schedules;
ALTER TABLE tenure_schedules_v5 RENAME TO tenure_schedules;
-- Every node asks "what is due?" about once a second.
CREATE INDEX IF NOT EXISTS tenure_schedules_due ON tenure_schedules (next_fire_at);

-- The retention sweep: queued jobs with a keep_until (set from their queue's retention). Only
-- rows with a keep_until are in it, so queues without retention pay nothing.
CREATE INDEX IF NOT EXISTS tenure_jobs_keep_until
  ON tenure_jobs (keep_until) WHERE keep_until IS NOT NULL AND state IN ('pending', 'failed');
-- The deletion sweep for settled jobs with a delete_after of their own, in horizon order. Jobs
-- without one are found through tenure_jobs_settled (updated_at order) against the default.
CREATE INDEX IF NOT EXISTS tenure_jobs_delete_at
  ON tenure_jobs ((updated_at + delete_after_ms))
  WHERE state IN ('done', 'dead', 'cancelled') AND delete_after_ms IS NOT NULL;
