-- Dependencies (docs/composition.md): the settlement function of migration 0016, made like
-- SQLite's 0016: the failed job's trigger also meets the `run` edges of every dependent its
-- cascade cancels, and stamps each cancelled row's `cascade_mark`, so the triggers of those rows do
-- not run (before, each ran the whole function: a line of 3 000 dependents took 7.8 s to cancel).
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS cascade_mark TEXT;
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
    -- The closure of the `cancel` dependents still waiting; the `run` edges from every job in it
    -- are met (their dependents were waiting on a job that is now cancelled); then the closure is
    -- cancelled, each row stamped with cascade_mark so its own trigger does not run again.
    WITH RECURSIVE doomed(id, parent, parent_state) AS (
      SELECT d.job_id, NEW.id, NEW.state FROM tenure_dependencies d JOIN tenure_jobs j ON j.id = d.job_id
      WHERE d.parent_id = NEW.id AND d.released = 0 AND d.policy = 'cancel' AND j.state = 'pending'
      UNION
      SELECT d.job_id, x.id, 'cancelled'::text FROM doomed x
        JOIN tenure_dependencies d ON d.parent_id = x.id JOIN tenure_jobs j ON j.id = d.job_id
      WHERE d.released = 0 AND d.policy = 'cancel' AND j.state = 'pending'),
    closure AS (SELECT DISTINCT ON (id) id, parent, parent_state FROM doomed ORDER BY id, parent),
    runs AS (
      UPDATE tenure_dependencies d SET released = 1
      FROM tenure_jobs j
      WHERE d.released = 0 AND d.policy = 'run' AND d.parent_id IN (SELECT id FROM closure)
        AND j.id = d.job_id AND j.state = 'pending'
      RETURNING d.job_id),
    counted AS (SELECT job_id, count(*) AS n FROM runs GROUP BY job_id),
    bumped AS (
      UPDATE tenure_jobs j SET waiting_on = j.waiting_on - c.n FROM counted c WHERE j.id = c.job_id
      RETURNING j.waiting_on, j.state, j.run_at),
    cancelled AS (
      UPDATE tenure_jobs j SET state = 'cancelled', updated_at = NEW.updated_at,
        cascade_mark = NEW.id || '@' || NEW.updated_at,
        last_error = 'TN2103: parent ' || x.parent || ' ended ' || x.parent_state || ', so this dependent was cancelled (on_parent_failure=cancel)'
      FROM closure x
      WHERE j.id = x.id AND j.state = 'pending'
      RETURNING j.id)
    SELECT eligible + (SELECT count(*) FROM bumped
                       WHERE waiting_on = 0 AND state IN ('pending', 'failed') AND run_at <= NEW.updated_at)
           + 0 * (SELECT count(*) FROM cancelled)
      INTO eligible;
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
                     AND NEW.cascade_mark IS NOT DISTINCT FROM OLD.cascade_mark
                     AND (NEW.state = 'done'
                          OR (NEW.state IN ('dead', 'cancelled') AND OLD.state NOT IN ('dead', 'cancelled'))
                          OR (NEW.state = 'pending' AND OLD.state IN ('dead', 'cancelled'))))
  EXECUTE FUNCTION tenure_jobs_settle_dependents();
