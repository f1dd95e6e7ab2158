-- The six policy and retention indexes, with the same predicates, the rarely-true term first.
--
-- Every claim and every settlement changes `state`, so SQLite re-evaluates the WHERE of each
-- partial index that mentions it, for the old row and for the new one. Written state-first, a
-- standard job (no singleton key, no keep_until, no delete_after: almost every job) passed the
-- `state` term and failed only at the last one; written with the `... IS NOT NULL` term first it
-- fails at once. Same predicate, same index, same plans: measured by `python -m bench.anatomy`,
-- the claim write fell from 47.7 to 24.2 us and the completion write from 24.9 to 14.1 us
-- (docs/performance.md, proposal 3).
DROP INDEX IF EXISTS tenure_jobs_u_queued;
CREATE UNIQUE INDEX tenure_jobs_u_queued
  ON tenure_jobs (queue, singleton_key)
  WHERE singleton_key IS NOT NULL AND policy IN ('short', 'stately') AND state = 'pending';
DROP INDEX IF EXISTS tenure_jobs_u_exclusive;
CREATE UNIQUE INDEX tenure_jobs_u_exclusive
  ON tenure_jobs (queue, singleton_key)
  WHERE singleton_key IS NOT NULL AND policy = 'exclusive' AND state IN ('pending', 'failed', 'leased');
DROP INDEX IF EXISTS tenure_jobs_u_throttle;
CREATE UNIQUE INDEX tenure_jobs_u_throttle
  ON tenure_jobs (queue, singleton_on, singleton_key)
  WHERE singleton_on IS NOT NULL AND singleton_key IS NOT NULL AND state <> 'cancelled';
DROP INDEX IF EXISTS tenure_jobs_u_debounce;
CREATE UNIQUE INDEX tenure_jobs_u_debounce
  ON tenure_jobs (queue, kind, singleton_key)
  WHERE debounce_ms IS NOT NULL AND singleton_key IS NOT NULL AND state = 'pending';
DROP INDEX IF EXISTS tenure_jobs_keep_until;
CREATE INDEX tenure_jobs_keep_until
  ON tenure_jobs (keep_until) WHERE keep_until IS NOT NULL AND state IN ('pending', 'failed');
DROP INDEX IF EXISTS tenure_jobs_delete_at;
CREATE INDEX tenure_jobs_delete_at
  ON tenure_jobs ((updated_at + delete_after_ms))
  WHERE delete_after_ms IS NOT NULL AND state IN ('done', 'dead', 'cancelled');
