-- The overview's failures per minute (insights.py, FAILED_BUCKETS) read through their own
-- partial index instead of the whole table (see the PostgreSQL migration of the same number);
-- only a failure writes an entry.
CREATE INDEX IF NOT EXISTS tenure_jobs_failed ON tenure_jobs (updated_at) WHERE state = 'failed';
