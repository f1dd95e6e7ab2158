-- each failed attempt's error history (a JSON list, bounded: docs/operations.md,
-- "Error history") and the operator's request to cancel a running job (store.jobs.request_cancel:
-- the time it was asked; the holding worker settles the attempt cancelled with its own lease).
ALTER TABLE tenure_jobs ADD COLUMN errors TEXT;
ALTER TABLE tenure_jobs ADD COLUMN cancel_requested_at INTEGER;
-- Only flagged leased rows: the holders' watch and the claim's clean-up read this, and it stays
-- empty unless an operator is cancelling a running job right now.
CREATE INDEX IF NOT EXISTS tenure_jobs_cancel_requested ON tenure_jobs (lease_until)
  WHERE cancel_requested_at IS NOT NULL AND state = 'leased';
