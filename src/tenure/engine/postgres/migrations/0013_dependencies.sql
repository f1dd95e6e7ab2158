-- (composition across workers): dependencies between jobs (docs/composition.md); the
-- same columns, table, index change and trigger semantics as SQLite's 0013.
--
-- A dependent is an ordinary `pending` job that is not eligible while `waiting_on` > 0 (its
-- parent edges not yet met); `has_dependents` marks a parent, so the trigger below never fires
-- for any other job.
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS waiting_on INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS has_dependents INTEGER NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS tenure_dependencies (
  job_id TEXT NOT NULL,
  parent_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  policy TEXT NOT NULL,
  released INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (job_id, parent_id)
);
CREATE INDEX IF NOT EXISTS tenure_dependencies_parent ON tenure_dependencies (parent_id, released);
-- A waiting dependent is in neither claim index: a claim never walks past it (the claim's WHERE
-- carries the same `waiting_on = 0`, so the planner still matches the partial predicates).
DROP INDEX IF EXISTS tenure_jobs_claim_any;
CREATE INDEX tenure_jobs_claim_any
  ON tenure_jobs (priority DESC, run_at, created_at, id) WHERE state IN ('pending', 'failed') AND waiting_on = 0;
DROP INDEX IF EXISTS tenure_jobs_claim;
CREATE INDEX tenure_jobs_claim
  ON tenure_jobs (queue, priority DESC, run_at, created_at, id) WHERE state IN ('pending', 'failed') AND waiting_on = 0;
-- Settlement of a parent settles its dependents in the same transaction, whichever statement
-- settled it: done meets every unmet edge; dead/cancelled meets the `run` edges and cancels the
-- `cancel` dependents still waiting (whose own trigger then carries the cascade on), leaving the
-- `wait` ones for an operator's requeue of the parent. A failed parent requeued (back to pending)
-- holds back again the dependents its failure had released that have not run yet. A row trigger runs after the parent row is
-- locked, and each statement in it reads a fresh snapshot: an enqueue that added an edge to this
-- parent and committed while the settlement waited for the row is seen (jobs.py marks the parent
-- with has_dependents in the enqueue's own transaction, which is that lock). Dependents are
-- locked in id order first, so two settlements sharing dependents never wait on each other in a
-- cycle. A dependent left with nothing to wait for wakes the workers (NOTIFY tenure_jobs).
CREATE OR REPLACE FUNCTION tenure_jobs_settle_dependents() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  eligible integer;
BEGIN
  PERFORM 1 FROM tenure_jobs j
    WHERE j.id IN (SELECT d.job_id FROM tenure_dependencies d WHERE d.parent_id = NEW.id)
    ORDER BY j.id FOR UPDATE;
  IF NEW.state = 'pending' THEN
    WITH rearmed AS (
      UPDATE tenure_dependencies d SET released = 0
      FROM tenure_jobs j
      WHERE d.parent_id = NEW.id AND d.released = 1 AND j.id = d.job_id
        AND j.state IN ('pending', 'dead', 'cancelled')
      RETURNING d.job_id)
    UPDATE tenure_jobs j SET waiting_on = j.waiting_on + 1 FROM rearmed WHERE j.id = rearmed.job_id;
    RETURN NULL;
  END IF;
  WITH met AS (
    UPDATE tenure_dependencies d SET released = 1
    FROM tenure_jobs j
    WHERE d.parent_id = NEW.id AND d.released = 0 AND j.id = d.job_id
      AND (NEW.state = 'done' OR (d.policy = 'run' AND j.state = 'pending'))
    RETURNING d.job_id),
  bumped AS (
    UPDATE tenure_jobs j SET waiting_on = j.waiting_on - 1 FROM met WHERE j.id = met.job_id
    RETURNING j.waiting_on, j.state, j.run_at)
  SELECT count(*) INTO eligible FROM bumped
    WHERE waiting_on = 0 AND state IN ('pending', 'failed') AND run_at <= NEW.updated_at;
  IF NEW.state <> 'done' THEN
    UPDATE tenure_jobs j SET state = 'cancelled', updated_at = NEW.updated_at,
      last_error = 'TN2103: parent ' || NEW.id || ' ended ' || NEW.state || ', so this dependent was cancelled (on_parent_failure=cancel)'
    WHERE j.state = 'pending' AND j.id IN (SELECT d.job_id FROM tenure_dependencies d
                                           WHERE d.parent_id = NEW.id AND d.released = 0 AND d.policy = 'cancel');
  END IF;
  IF eligible > 0 THEN
    PERFORM pg_notify('tenure_jobs', TG_TABLE_SCHEMA);
  END IF;
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS tenure_jobs_dependents ON tenure_jobs;
CREATE TRIGGER tenure_jobs_dependents AFTER UPDATE OF state ON tenure_jobs
  FOR EACH ROW WHEN (NEW.has_dependents = 1 AND OLD.state IS DISTINCT FROM NEW.state
                     AND (NEW.state = 'done'
                          OR (NEW.state IN ('dead', 'cancelled') AND OLD.state NOT IN ('dead', 'cancelled'))
                          OR (NEW.state = 'pending' AND OLD.state IN ('dead', 'cancelled'))))
  EXECUTE FUNCTION tenure_jobs_settle_dependents();
