-- (durable workflows, docs/workflows.md "Sleeping, signals and children"):
-- tenure_signals holds every signal sent with store.signals.send(key, payload): one row each,
-- consumed at most once (consumed_by = the run that received it, written in the same
-- transaction as that run's checkpoint of the payload). Sends, receives and parks on one key
-- are serialised by a transaction-scoped advisory lock on the key (engine/postgres/queries.py).
CREATE TABLE IF NOT EXISTS tenure_signals (
  id BIGSERIAL PRIMARY KEY,
  key TEXT NOT NULL,
  payload TEXT,
  sent_at BIGINT NOT NULL,
  consumed_by TEXT,
  consumed_at BIGINT
);
CREATE INDEX IF NOT EXISTS tenure_signals_unconsumed ON tenure_signals (key, id) WHERE consumed_by IS NULL;
-- The parked runs waiting for a signal key: a send makes each of them eligible now, in the
-- send's own transaction.
CREATE TABLE IF NOT EXISTS tenure_waits (
  job_id TEXT NOT NULL,
  key TEXT NOT NULL,
  PRIMARY KEY (job_id, key)
);
CREATE INDEX IF NOT EXISTS tenure_waits_key ON tenure_waits (key);
-- A child job started by a run (ctx.map / ctx.call) names the run here; when the last of a
-- run's children settles (done, dead or cancelled), the trigger below makes the parked run
-- eligible at that settlement's time, in the settling transaction (every settlement path). The
-- trigger locks the parent row first, so two last siblings settling at once are serialised and
-- the second sees the first (READ COMMITTED takes a new snapshot per statement). The WHEN clause
-- is evaluated without calling the function: jobs that are nobody's child pay nothing.
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS wake_parent TEXT;
CREATE INDEX IF NOT EXISTS tenure_jobs_wake_parent ON tenure_jobs (wake_parent) WHERE wake_parent IS NOT NULL;
CREATE OR REPLACE FUNCTION tenure_wake_parent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM tenure_jobs WHERE id = NEW.wake_parent FOR UPDATE;
  UPDATE tenure_jobs SET run_at = NEW.updated_at
  WHERE id = NEW.wake_parent AND state = 'pending' AND run_at > NEW.updated_at
    AND NOT EXISTS (SELECT 1 FROM tenure_jobs c WHERE c.wake_parent = NEW.wake_parent
                    AND c.state NOT IN ('done', 'dead', 'cancelled'));
  IF FOUND THEN
    PERFORM pg_notify('tenure_jobs', TG_TABLE_SCHEMA);  -- a parked parent is eligible now: wake workers
  END IF;
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS tenure_wake_parent ON tenure_jobs;
CREATE TRIGGER tenure_wake_parent AFTER UPDATE OF state ON tenure_jobs FOR EACH ROW
  WHEN (NEW.wake_parent IS NOT NULL AND NEW.state IN ('done', 'dead', 'cancelled')
        AND OLD.state NOT IN ('done', 'dead', 'cancelled'))
  EXECUTE FUNCTION tenure_wake_parent();
