-- tenure's first schema on PostgreSQL: the jobs table as SQLite's 0001 has it, plus the two
-- PostgreSQL-only helpers every later query relies on (the database clock and the wake-up).
--
-- Types: times are BIGINT epoch ms and ids TEXT, exactly as on SQLite, so a row reads back as
-- the same Python values on both engines. payload and result stay TEXT (not jsonb) on purpose:
-- jsonb would reorder keys, drop duplicate keys and re-spell numbers, so a payload would not
-- round-trip byte-identical with SQLite's; the semantics layer decodes JSON once, and inserts
-- skip a jsonb parse. Query them with payload::jsonb when you need to.
-- Ids sort with COLLATE "C" (byte order, as SQLite compares TEXT), so claim order, pages and
-- sweeps break ties the same way on every database whatever its default collation.
CREATE TABLE IF NOT EXISTS tenure_jobs (
  id TEXT COLLATE "C" PRIMARY KEY,
  kind TEXT NOT NULL,
  payload TEXT,
  state TEXT NOT NULL,
  run_at BIGINT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL DEFAULT 5,
  lease_until BIGINT,
  lease_owner TEXT,
  last_error TEXT,
  result TEXT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

-- The database clock in epoch ms. clock_timestamp(), not now(): inside a long transaction now()
-- is the transaction's start, which would make leases look younger than they are. Queries call
-- it once per statement (through a one-row CTE), never per row.
CREATE OR REPLACE FUNCTION tenure_now_ms() RETURNS bigint LANGUAGE sql VOLATILE PARALLEL SAFE
  AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

-- Wake-up: any insert, from any host or from an application's own connection (the outbox),
-- tells LISTENers on channel tenure_jobs. Statement-level, so a bulk insert notifies once; the
-- payload is the table's schema so stores on other schemas of the same database can ignore it.
-- NOTIFY is delivered at commit (a rolled-back outbox wakes nobody) and PostgreSQL folds
-- identical notifications of one transaction into one.
CREATE OR REPLACE FUNCTION tenure_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('tenure_jobs', TG_TABLE_SCHEMA);
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS tenure_jobs_inserted ON tenure_jobs;
CREATE TRIGGER tenure_jobs_inserted AFTER INSERT ON tenure_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION tenure_jobs_notify();
-- A job made eligible again right now by an UPDATE (requeue, a failure retried with no delay)
-- wakes workers too. Row-level with a WHEN clause, so claims, renewals and completions (the hot
-- path) never fire it and never take NOTIFY's commit-time lock.
DROP TRIGGER IF EXISTS tenure_jobs_requeued ON tenure_jobs;
CREATE TRIGGER tenure_jobs_requeued AFTER UPDATE OF state ON tenure_jobs
  FOR EACH ROW WHEN (NEW.state IN ('pending', 'failed') AND OLD.state IS DISTINCT FROM NEW.state
                     AND NEW.run_at <= NEW.updated_at)
  EXECUTE FUNCTION tenure_jobs_notify();
