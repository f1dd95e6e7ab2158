-- (admin at scale): tags and meta given at enqueue (JSON text: a list of short strings,
-- an object; docs/operations.md, "Tags and meta") and the progress a running attempt reports
-- (ctx.progress: JSON text {"fraction", "note", "at"}, fenced by the lease). A tag filter reads
-- tags with json_each over the rows the other filters leave: no side table to keep in step.
ALTER TABLE tenure_jobs ADD COLUMN tags TEXT;
ALTER TABLE tenure_jobs ADD COLUMN meta TEXT;
ALTER TABLE tenure_jobs ADD COLUMN progress TEXT;
