-- (composition across workers): dependencies between jobs (docs/composition.md).
--
-- A dependent is an ordinary `pending` job (spec 2.5 keeps its six states) that is not eligible
-- while `waiting_on` > 0: the number of its parent edges not yet met. An edge is met when its
-- parent is `done`, or when the parent ends `dead`/`cancelled` and the dependent's policy is
-- `run`. `has_dependents` marks a parent, so the triggers below cost nothing for every other job.
ALTER TABLE tenure_jobs ADD COLUMN waiting_on INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenure_jobs ADD COLUMN has_dependents INTEGER NOT NULL DEFAULT 0;
-- One row per (dependent, parent); `position` is the parent's place in depends_on (a chord's
-- callback receives its children's results in that order), `policy` the dependent's
-- on_parent_failure (cancel, run, wait), `released` 1 once the edge no longer holds it back.
CREATE TABLE IF NOT EXISTS tenure_dependencies (
  job_id TEXT NOT NULL,
  parent_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  policy TEXT NOT NULL,
  released INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (job_id, parent_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tenure_dependencies_parent ON tenure_dependencies (parent_id, released);
-- A waiting dependent is not in the claim index at all: a claim never walks past it, however many
-- dependents wait in a queue (the claim's WHERE carries the same `waiting_on = 0`).
DROP INDEX IF EXISTS tenure_jobs_claim;
CREATE INDEX tenure_jobs_claim
  ON tenure_jobs (queue, priority DESC, run_at, created_at, id) WHERE state IN ('pending', 'failed') AND waiting_on = 0;
-- Settlement of a parent settles its dependents IN THE SAME TRANSACTION, whichever statement
-- settled it (complete, fail, cancel, request_cancel, the bounded reclaim, retention, bulk admin):
-- a trigger, so no settle path can forget it. done: every unmet edge is met. dead/cancelled: the
-- `run` edges are met, the `cancel` dependents still waiting are cancelled (and, the connection
-- having recursive_triggers on, their own dependents in turn), the `wait` ones are left as they
-- are, for an operator's requeue of the parent. A failed parent requeued (dead/cancelled back to
-- pending) holds back again the dependents its failure had released that have not run yet.
CREATE TRIGGER IF NOT EXISTS tenure_jobs_parent_done AFTER UPDATE OF state ON tenure_jobs
  WHEN NEW.has_dependents = 1 AND NEW.state = 'done' AND OLD.state <> 'done'
BEGIN
  UPDATE tenure_jobs SET waiting_on = waiting_on - 1
    WHERE id IN (SELECT job_id FROM tenure_dependencies WHERE parent_id = NEW.id AND released = 0);
  UPDATE tenure_dependencies SET released = 1 WHERE parent_id = NEW.id AND released = 0;
END;
CREATE TRIGGER IF NOT EXISTS tenure_jobs_parent_failed AFTER UPDATE OF state ON tenure_jobs
  WHEN NEW.has_dependents = 1 AND NEW.state IN ('dead', 'cancelled') AND OLD.state NOT IN ('dead', 'cancelled')
BEGIN
  UPDATE tenure_jobs SET waiting_on = waiting_on - 1
    WHERE state = 'pending' AND id IN (SELECT job_id FROM tenure_dependencies
                                       WHERE parent_id = NEW.id AND released = 0 AND policy = 'run');
  UPDATE tenure_dependencies SET released = 1 WHERE parent_id = NEW.id AND released = 0 AND policy = 'run'
    AND job_id IN (SELECT id FROM tenure_jobs WHERE state = 'pending');
  UPDATE tenure_jobs SET state = 'cancelled', updated_at = NEW.updated_at,
    last_error = 'TN2103: parent ' || NEW.id || ' ended ' || NEW.state || ', so this dependent was cancelled (on_parent_failure=cancel)'
    WHERE state = 'pending' AND id IN (SELECT job_id FROM tenure_dependencies
                                       WHERE parent_id = NEW.id AND released = 0 AND policy = 'cancel');
END;
CREATE TRIGGER IF NOT EXISTS tenure_jobs_parent_requeued AFTER UPDATE OF state ON tenure_jobs
  WHEN NEW.has_dependents = 1 AND NEW.state = 'pending' AND OLD.state IN ('dead', 'cancelled')
BEGIN
  UPDATE tenure_jobs SET waiting_on = waiting_on + 1
    WHERE state IN ('pending', 'dead', 'cancelled')
      AND id IN (SELECT job_id FROM tenure_dependencies WHERE parent_id = NEW.id AND released = 1);
  UPDATE tenure_dependencies SET released = 0 WHERE parent_id = NEW.id AND released = 1
    AND job_id IN (SELECT id FROM tenure_jobs WHERE state IN ('pending', 'dead', 'cancelled'));
END;
