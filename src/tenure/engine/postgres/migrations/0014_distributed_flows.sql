-- (distributed flows, docs/workflows.md "Distributed runs"): a child with wake_each
-- wakes its parked parent when IT settles, not only when the last child does (a distributed run
-- starts the nodes that became ready as soon as any node job finishes).
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS wake_each BOOLEAN NOT NULL DEFAULT false;
CREATE OR REPLACE FUNCTION tenure_wake_parent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM tenure_jobs WHERE id = NEW.wake_parent FOR UPDATE;
  UPDATE tenure_jobs SET run_at = NEW.updated_at
  WHERE id = NEW.wake_parent AND state = 'pending' AND run_at > NEW.updated_at
    AND (NEW.wake_each OR NOT EXISTS (SELECT 1 FROM tenure_jobs c WHERE c.wake_parent = NEW.wake_parent
                                      AND c.state NOT IN ('done', 'dead', 'cancelled')));
  IF FOUND THEN
    PERFORM pg_notify('tenure_jobs', TG_TABLE_SCHEMA);  -- a parked parent is eligible now: wake workers
  END IF;
  RETURN NULL;
END
$$;
-- Cancellation reaches a run's children (its node jobs, ctx.map / ctx.call children): when a job
-- is cancelled, its queued children are cancelled and its running ones are flagged for their
-- holders (cancel_requested_at, what jobs.request_cancel writes; migration 0010's trigger tells
-- the holders), in the same transaction, and so on down (the trigger fires for each child).
-- Only jobs that are somebody's parent do any work: the index on wake_parent answers the rest.
CREATE OR REPLACE FUNCTION tenure_cancel_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tenure_jobs SET cancel_requested_at = coalesce(cancel_requested_at, NEW.updated_at)
  WHERE wake_parent = NEW.id AND state = 'leased';
  UPDATE tenure_jobs SET state = 'cancelled', lease_until = NULL, lease_owner = NULL, lease_token = NULL,
    updated_at = NEW.updated_at
  WHERE wake_parent = NEW.id AND state IN ('pending', 'failed');
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS tenure_cancel_children ON tenure_jobs;
CREATE TRIGGER tenure_cancel_children AFTER UPDATE OF state ON tenure_jobs FOR EACH ROW
  WHEN (NEW.state = 'cancelled' AND OLD.state <> 'cancelled')
  EXECUTE FUNCTION tenure_cancel_children();
