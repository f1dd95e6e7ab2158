-- tenure's first schema: the jobs table before the fence (kept so old files upgrade in place).
-- WITHOUT ROWID: the job id is the clustering key, so a fenced UPDATE by id touches one b-tree
-- instead of the id index plus the rowid table; measured ~2x cheaper claims and completions
-- (docs/performance.md). Files created before this choice keep their rowid table: no rebuild.
CREATE TABLE IF NOT EXISTS tenure_jobs (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  payload TEXT,
  state TEXT NOT NULL,
  run_at INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL DEFAULT 5,
  lease_until INTEGER,
  lease_owner TEXT,
  last_error TEXT,
  result TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;
