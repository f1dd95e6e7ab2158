-- Dependencies (docs/composition.md): migration 0013's failure and requeue triggers rewritten.
--
-- The `cancel` cascade is now ONE recursive query over the dependents' graph, run by the trigger
-- of the job that failed (the root), instead of each cancelled dependent's own trigger cancelling
-- the next: nested triggers cost more with each level (a line of 400 took 2.2 s, 500 took 6 s)
-- and SQLite refuses more than 1000 levels, which failed the parent's settlement. The root's
-- trigger stores the closure in tenure_cascade (its rows live only inside the trigger), meets the
-- `run` edges of every job in it, cancels it, and stamps each cancelled row's `cascade_mark`, so
-- those rows' own triggers (recursive_triggers is on) do not run the cascade again. The "dependent
-- still pending" tests are primary-key probes (EXISTS), no longer a scan of every job.
ALTER TABLE tenure_jobs ADD COLUMN cascade_mark TEXT;
CREATE TABLE IF NOT EXISTS tenure_cascade (
  root TEXT NOT NULL,
  id TEXT NOT NULL,
  parent TEXT NOT NULL,
  parent_state TEXT NOT NULL,
  PRIMARY KEY (root, id)
) WITHOUT ROWID;
DROP TRIGGER IF EXISTS tenure_jobs_parent_failed;
CREATE TRIGGER tenure_jobs_parent_failed AFTER UPDATE OF state ON tenure_jobs
  WHEN NEW.has_dependents = 1 AND NEW.state IN ('dead', 'cancelled') AND OLD.state NOT IN ('dead', 'cancelled')
    AND NEW.cascade_mark IS OLD.cascade_mark
BEGIN
  INSERT INTO tenure_cascade (root, id, parent, parent_state)
    SELECT NEW.id, id, min(parent), parent_state FROM (
      WITH RECURSIVE doomed(id, parent, parent_state) AS (
        SELECT d.job_id, NEW.id, NEW.state FROM tenure_dependencies d JOIN tenure_jobs j ON j.id = d.job_id
        WHERE d.parent_id = NEW.id AND d.released = 0 AND d.policy = 'cancel' AND j.state = 'pending'
        UNION
        SELECT d.job_id, x.id, 'cancelled' FROM doomed x
          JOIN tenure_dependencies d ON d.parent_id = x.id JOIN tenure_jobs j ON j.id = d.job_id
        WHERE d.released = 0 AND d.policy = 'cancel' AND j.state = 'pending')
      SELECT id, parent, parent_state FROM doomed)
    GROUP BY id;
  UPDATE tenure_jobs SET waiting_on = waiting_on - (
      SELECT count(*) FROM tenure_dependencies d
      WHERE d.job_id = tenure_jobs.id AND d.released = 0 AND d.policy = 'run'
        AND (d.parent_id = NEW.id OR d.parent_id IN (SELECT c.id FROM tenure_cascade c WHERE c.root = NEW.id)))
    WHERE state = 'pending' AND id IN (
      SELECT d.job_id FROM tenure_dependencies d WHERE d.released = 0 AND d.policy = 'run'
        AND (d.parent_id = NEW.id OR d.parent_id IN (SELECT c.id FROM tenure_cascade c WHERE c.root = NEW.id)));
  UPDATE tenure_dependencies SET released = 1 WHERE released = 0 AND policy = 'run'
    AND (parent_id = NEW.id OR parent_id IN (SELECT c.id FROM tenure_cascade c WHERE c.root = NEW.id))
    AND EXISTS (SELECT 1 FROM tenure_jobs j WHERE j.id = tenure_dependencies.job_id AND j.state = 'pending');
  UPDATE tenure_jobs SET state = 'cancelled', updated_at = NEW.updated_at,
    cascade_mark = NEW.id || '@' || NEW.updated_at,
    last_error = (SELECT 'TN2103: parent ' || c.parent || ' ended ' || c.parent_state
                         || ', so this dependent was cancelled (on_parent_failure=cancel)'
                  FROM tenure_cascade c WHERE c.root = NEW.id AND c.id = tenure_jobs.id)
    WHERE state = 'pending' AND id IN (SELECT c.id FROM tenure_cascade c WHERE c.root = NEW.id);
  DELETE FROM tenure_cascade WHERE root = NEW.id;
END;
DROP TRIGGER IF EXISTS tenure_jobs_parent_requeued;
CREATE TRIGGER tenure_jobs_parent_requeued AFTER UPDATE OF state ON tenure_jobs
  WHEN NEW.has_dependents = 1 AND NEW.state = 'pending' AND OLD.state IN ('dead', 'cancelled')
BEGIN
  UPDATE tenure_jobs SET waiting_on = waiting_on + 1
    WHERE state IN ('pending', 'dead', 'cancelled')
      AND id IN (SELECT job_id FROM tenure_dependencies WHERE parent_id = NEW.id AND released = 1);
  UPDATE tenure_dependencies SET released = 0 WHERE parent_id = NEW.id AND released = 1
    AND EXISTS (SELECT 1 FROM tenure_jobs j WHERE j.id = tenure_dependencies.job_id
                AND j.state IN ('pending', 'dead', 'cancelled'));
END;
