-- The queue registry trigger (0003) probes before it writes: an enqueue into a queue already
-- registered (nearly every one) now costs the trigger one SELECT over the inserted rows, not an
-- INSERT ... ON CONFLICT that inserts nothing. That empty INSERT still planned its sort and
-- aggregate, took a row-exclusive lock on tenure_queues and ran the ON CONFLICT machinery: ~30-60
-- us of server time per one-row enqueue in a loop of single-row INSERTs on this host
-- (docs/performance.md, "2026-12-04 evening: enqueue one by one"). A new queue is registered
-- exactly as before: the same statement, names in order, ON CONFLICT for a concurrent creator.
-- SQLite: nothing to do (its registry trigger, 0003, is a per-row INSERT OR IGNORE).
CREATE OR REPLACE FUNCTION tenure_jobs_register_queues() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM tenure_new_jobs n WHERE NOT EXISTS (SELECT 1 FROM tenure_queues q WHERE q.name = n.queue)) THEN
    INSERT INTO tenure_queues (name, created_at, updated_at)
    SELECT n.queue, min(n.created_at), min(n.created_at) FROM tenure_new_jobs n
    WHERE NOT EXISTS (SELECT 1 FROM tenure_queues q WHERE q.name = n.queue)
    GROUP BY n.queue ORDER BY n.queue
    ON CONFLICT (name) DO NOTHING;
  END IF;
  RETURN NULL;
END
$$;
