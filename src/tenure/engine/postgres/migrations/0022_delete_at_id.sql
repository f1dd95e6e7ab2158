-- The retention walk over settled jobs with a delete_after of their own (maintenance.py,
-- _DUE_CUSTOM) starts each batch just past the (horizon, id) of the last row it deleted. Without id
-- in this index its mark could only say "from this horizon on", and every batch walked again the
-- dead entries of the rows tied at that horizon that earlier batches deleted (they stay in the
-- index until a vacuum): quadratic in the tie, and ties are the rule (a complete_many settles its
-- whole batch at one updated_at, and a queue gives its jobs one delete_after). SQLite's 0022 gives
-- its index the same shape.
-- Built in the migration's transaction (not CONCURRENTLY): writes to tenure_jobs wait for one scan
-- of the table while it is built; reads go on.
DROP INDEX IF EXISTS tenure_jobs_delete_at;
CREATE INDEX tenure_jobs_delete_at
  ON tenure_jobs ((updated_at + delete_after_ms), id)
  WHERE state IN ('done', 'dead', 'cancelled') AND delete_after_ms IS NOT NULL;
