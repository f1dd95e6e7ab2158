-- Dependencies (docs/composition.md): migration 0013's settlement function, with the `cancel`
-- cascade computed as ONE recursive query over the dependents' graph instead of each cancelled
-- dependent's own trigger cancelling the next (a nested trigger per level: a line of 1 200
-- dependents overflowed max_stack_depth and refused the parent's settlement). The cancelled
-- dependents' triggers still fire, once each and one level deep, for their `run` dependents.
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
    WITH RECURSIVE doomed(id, parent, parent_state) AS (
      SELECT d.job_id, NEW.id, NEW.state FROM tenure_dependencies d JOIN tenure_jobs j ON j.id = d.job_id
      WHERE d.parent_id = NEW.id AND d.released = 0 AND d.policy = 'cancel' AND j.state = 'pending'
      UNION
      SELECT d.job_id, x.id, 'cancelled'::text FROM doomed x
        JOIN tenure_dependencies d ON d.parent_id = x.id JOIN tenure_jobs j ON j.id = d.job_id
      WHERE d.released = 0 AND d.policy = 'cancel' AND j.state = 'pending')
    UPDATE tenure_jobs j SET state = 'cancelled', updated_at = NEW.updated_at,
      last_error = 'TN2103: parent ' || x.parent || ' ended ' || x.parent_state || ', so this dependent was cancelled (on_parent_failure=cancel)'
    FROM (SELECT DISTINCT ON (id) id, parent, parent_state FROM doomed ORDER BY id, parent) x
    WHERE j.id = x.id AND j.state = 'pending';
  END IF;
  IF eligible > 0 THEN
    PERFORM pg_notify('tenure_jobs', TG_TABLE_SCHEMA);
  END IF;
  RETURN NULL;
END
$$;
