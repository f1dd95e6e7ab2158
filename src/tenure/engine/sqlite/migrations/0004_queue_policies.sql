-- Queue policies, throttling, debounce and dead letters, enforced by the database.
--
-- "Queued" means pending: a job waiting to retry (failed) is not queued for the short and
-- stately policies, so a failure can never collide with a job enqueued while it ran (see
-- docs/queues.md). A job without a singleton_key in a queue with a policy is stored with the
-- key '' (the queue-wide key, as pg-boss does); a NULL key is never unique, so standard-policy
-- jobs pay nothing here. Every index below is partial: a row outside its predicate costs no
-- index entry.
ALTER TABLE tenure_jobs ADD COLUMN debounce_ms INTEGER;
ALTER TABLE tenure_jobs ADD COLUMN origin_queue TEXT;

-- short and stately: one pending job per key.
CREATE UNIQUE INDEX IF NOT EXISTS tenure_jobs_u_queued
  ON tenure_jobs (queue, singleton_key)
  WHERE state = 'pending' AND policy IN ('short', 'stately') AND singleton_key IS NOT NULL;
-- exclusive: one queued-or-active (pending, failed or leased) job per key.
CREATE UNIQUE INDEX IF NOT EXISTS tenure_jobs_u_exclusive
  ON tenure_jobs (queue, singleton_key)
  WHERE state IN ('pending', 'failed', 'leased') AND policy = 'exclusive' AND singleton_key IS NOT NULL;
-- singleton_for: one job per key per time bucket (a cancelled one frees its bucket).
CREATE UNIQUE INDEX IF NOT EXISTS tenure_jobs_u_throttle
  ON tenure_jobs (queue, singleton_on, singleton_key)
  WHERE singleton_on IS NOT NULL AND singleton_key IS NOT NULL AND state <> 'cancelled';
-- debounce: one pending debounced job per (queue, kind, key); a later enqueue updates it.
CREATE UNIQUE INDEX IF NOT EXISTS tenure_jobs_u_debounce
  ON tenure_jobs (queue, kind, singleton_key)
  WHERE state = 'pending' AND debounce_ms IS NOT NULL AND singleton_key IS NOT NULL;
