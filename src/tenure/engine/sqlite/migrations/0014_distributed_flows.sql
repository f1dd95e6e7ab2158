-- (distributed flows, docs/workflows.md "Distributed runs"): a child with wake_each = 1
-- wakes its parked parent when IT settles, not only when the last child does (a distributed run
-- starts the nodes that became ready as soon as any node job finishes). The trigger of 0012 is
-- replaced by one that reads the flag.
ALTER TABLE tenure_jobs ADD COLUMN wake_each INTEGER NOT NULL DEFAULT 0;
DROP TRIGGER IF EXISTS tenure_wake_parent;
CREATE TRIGGER IF NOT EXISTS tenure_wake_parent AFTER UPDATE OF state ON tenure_jobs
WHEN NEW.wake_parent IS NOT NULL AND NEW.state IN ('done', 'dead', 'cancelled')
  AND OLD.state NOT IN ('done', 'dead', 'cancelled')
BEGIN
  UPDATE tenure_jobs SET run_at = NEW.updated_at
  WHERE id = NEW.wake_parent AND state = 'pending' AND run_at > NEW.updated_at
    AND (NEW.wake_each = 1 OR NOT EXISTS (SELECT 1 FROM tenure_jobs c WHERE c.wake_parent = NEW.wake_parent
                                          AND c.state NOT IN ('done', 'dead', 'cancelled')));
END;
-- Cancellation reaches a run's children (its node jobs, ctx.map / ctx.call children): when a job
-- is cancelled, its queued children are cancelled and its running ones are flagged for their
-- holders (cancel_requested_at, what jobs.request_cancel writes), in the same transaction. A
-- cancelled child cancels its own children in turn when its holder settles it.
CREATE TRIGGER IF NOT EXISTS tenure_cancel_children AFTER UPDATE OF state ON tenure_jobs
WHEN NEW.state = 'cancelled' AND OLD.state <> 'cancelled'
BEGIN
  UPDATE tenure_jobs SET cancel_requested_at = coalesce(cancel_requested_at, NEW.updated_at)
  WHERE wake_parent = NEW.id AND state = 'leased';
  UPDATE tenure_jobs SET state = 'cancelled', lease_until = NULL, lease_owner = NULL, lease_token = NULL,
    updated_at = NEW.updated_at
  WHERE wake_parent = NEW.id AND state IN ('pending', 'failed');
END;
