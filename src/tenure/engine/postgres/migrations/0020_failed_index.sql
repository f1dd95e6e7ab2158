-- The overview's throughput counts failures waiting for their retry by the minute they failed
-- (insights.py, FAILED_BUCKETS: state = 'failed' and updated_at in the last hour). No index had
-- that: at 10 000 000 pending jobs the statement read the whole table (1.7 s, a parallel seq
-- scan). Only a failure writes an entry (and the retry's claim leaves it), so the claims and
-- completions of the hot path pay nothing.
CREATE INDEX IF NOT EXISTS tenure_jobs_failed ON tenure_jobs (updated_at) WHERE state = 'failed';
