-- (durable workflows, docs/workflows.md "Sleeping, signals and children"):
-- tenure_signals holds every signal sent with store.signals.send(key, payload): one row each,
-- consumed at most once (consumed_by = the run that received it, written in the same
-- transaction as that run's checkpoint of the payload).
CREATE TABLE IF NOT EXISTS tenure_signals (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  key TEXT NOT NULL,
  payload TEXT,
  sent_at INTEGER NOT NULL,
  consumed_by TEXT,
  consumed_at INTEGER
);
CREATE INDEX IF NOT EXISTS tenure_signals_unconsumed ON tenure_signals (key, id) WHERE consumed_by IS NULL;
-- The parked runs waiting for a signal key: a send makes each of them eligible now, in the
-- send's own transaction.
CREATE TABLE IF NOT EXISTS tenure_waits (
  job_id TEXT NOT NULL,
  key TEXT NOT NULL,
  PRIMARY KEY (job_id, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tenure_waits_key ON tenure_waits (key);
-- A child job started by a run (ctx.map / ctx.call) names the run here; when the last of a
-- run's children settles (done, dead or cancelled), the trigger below makes the parked run
-- eligible at that settlement's time, in the settling transaction (every settlement path).
ALTER TABLE tenure_jobs ADD COLUMN wake_parent TEXT;
CREATE INDEX IF NOT EXISTS tenure_jobs_wake_parent ON tenure_jobs (wake_parent) WHERE wake_parent IS NOT NULL;
CREATE TRIGGER IF NOT EXISTS tenure_wake_parent AFTER UPDATE OF state ON tenure_jobs
WHEN NEW.wake_parent IS NOT NULL AND NEW.state IN ('done', 'dead', 'cancelled')
  AND OLD.state NOT IN ('done', 'dead', 'cancelled')
BEGIN
  UPDATE tenure_jobs SET run_at = NEW.updated_at
  WHERE id = NEW.wake_parent AND state = 'pending' AND run_at > NEW.updated_at
    AND NOT EXISTS (SELECT 1 FROM tenure_jobs c WHERE c.wake_parent = NEW.wake_parent
                    AND c.state NOT IN ('done', 'dead', 'cancelled'));
END;
