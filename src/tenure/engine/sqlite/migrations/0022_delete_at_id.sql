-- The same shape as PostgreSQL's 0022: (horizon, id), so both dialects walk retention in one
-- order. SQLite removes a deleted row's index entries at once, so here it changes no cost.
DROP INDEX IF EXISTS tenure_jobs_delete_at;
CREATE INDEX tenure_jobs_delete_at
  ON tenure_jobs ((updated_at + delete_after_ms), id)
  WHERE delete_after_ms IS NOT NULL AND state IN ('done', 'dead', 'cancelled');
