-- The fence (spec §2/§3): a generation per attempt and a token per claim, plus the
-- checkpoint store of §7. ADD COLUMN IF NOT EXISTS: jobs rows are live work, never rebuilt.
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS lease_generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS lease_token TEXT;
CREATE TABLE IF NOT EXISTS tenure_checkpoints (
  run_id TEXT COLLATE "C" NOT NULL,
  node_id TEXT COLLATE "C" NOT NULL,
  value TEXT,
  generation INTEGER NOT NULL,
  PRIMARY KEY (run_id, node_id)
);
