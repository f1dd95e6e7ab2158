-- The fence (spec §2/§3): a generation per attempt and a token per claim, plus the
-- checkpoint store of §7. Columns are added behind a presence check by the migrator, because
-- jobs rows are live work and a rebuild would drop a queue.
ALTER TABLE tenure_jobs ADD COLUMN lease_generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenure_jobs ADD COLUMN lease_token TEXT;
CREATE TABLE IF NOT EXISTS tenure_checkpoints (
  run_id TEXT NOT NULL,
  node_id TEXT NOT NULL,
  value TEXT,
  generation INTEGER NOT NULL,
  PRIMARY KEY (run_id, node_id)
) WITHOUT ROWID;
