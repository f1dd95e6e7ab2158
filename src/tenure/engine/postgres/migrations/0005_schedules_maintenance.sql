-- Cron schedules and the maintenance runtime; SQLite's 0005 does the same.
--
-- Schedules are keyed by (name, key): the key lets one schedule name carry variants (one per
-- tenant, say). catch_up says what a schedule does with boundaries missed while nothing ran:
-- 'latest' (fire the most recent one once), 'all' (fire each), 'none' (skip them).
ALTER TABLE tenure_schedules ADD COLUMN IF NOT EXISTS key TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE tenure_schedules ADD COLUMN IF NOT EXISTS catch_up TEXT NOT NULL DEFAULT 'latest';
ALTER TABLE tenure_schedules DROP CONSTRAINT IF EXISTS tenure_schedules_pkey;
ALTER TABLE tenure_schedules ADD CONSTRAINT tenure_schedules_pkey PRIMARY KEY (name, key);
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
