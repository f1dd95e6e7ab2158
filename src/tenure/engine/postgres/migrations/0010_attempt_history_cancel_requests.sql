-- each failed attempt's error history (a JSON list as TEXT, like payload and result;
-- bounded: docs/operations.md, "Error history") and the operator's request to cancel a running
-- job (store.jobs.request_cancel: the time it was asked; the holding worker settles the attempt
-- cancelled with its own lease).
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS errors TEXT;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS cancel_requested_at BIGINT;
-- Only flagged leased rows: the holders' watch and the claim's clean-up read this, and it stays
-- empty unless an operator is cancelling a running job right now.
CREATE INDEX IF NOT EXISTS tenure_jobs_cancel_requested ON tenure_jobs (lease_until)
  WHERE cancel_requested_at IS NOT NULL AND state = 'leased';
-- A cancel request reaches the holding worker at once: NOTIFY on channel tenure_cancel (payload:
-- the schema and the job id), fired only when the flag is first set, so no hot-path statement
-- (claims, renewals, settlements) ever fires it.
CREATE OR REPLACE FUNCTION tenure_jobs_cancel_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('tenure_cancel', TG_TABLE_SCHEMA || ' ' || NEW.id);
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS tenure_jobs_cancel_requested ON tenure_jobs;
CREATE TRIGGER tenure_jobs_cancel_requested AFTER UPDATE OF cancel_requested_at ON tenure_jobs
  FOR EACH ROW WHEN (OLD.cancel_requested_at IS NULL AND NEW.cancel_requested_at IS NOT NULL)
  EXECUTE FUNCTION tenure_jobs_cancel_notify();
