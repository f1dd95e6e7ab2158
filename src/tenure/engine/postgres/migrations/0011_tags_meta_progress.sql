-- (admin at scale): tags and meta given at enqueue (JSON text like payload: a list of
-- short strings, an object; docs/operations.md, "Tags and meta") and the progress a running
-- attempt reports (ctx.progress: JSON text {"fraction", "note", "at"}, fenced by the lease).
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS tags TEXT;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS meta TEXT;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS progress TEXT;
-- The tag filter (tags::jsonb @> '["x"]') is served by this expression index; untagged rows
-- (most of them) are not in it.
CREATE INDEX IF NOT EXISTS tenure_jobs_tags ON tenure_jobs USING gin ((tags::jsonb) jsonb_path_ops)
  WHERE tags IS NOT NULL;
