-- rate limits, fairness across groups and strict per-key order (docs/queues.md).
-- A queue's rate limits are N starts per period, for the queue and for each group_key of it; the
-- claim keeps each one's recent starts in a window row (tenure/rate_window.py) and refuses a start
-- that would put more than N in any window of that length. blocked_until is when the row allows a
-- start again, so the claim skips a group at its limit with one probe of the primary key.
-- fairness = 'round_robin' makes the claim take the group served longest ago first (turn).
ALTER TABLE tenure_queues ADD COLUMN rate_limit INTEGER;
ALTER TABLE tenure_queues ADD COLUMN rate_period_ms INTEGER;
ALTER TABLE tenure_queues ADD COLUMN group_rate_limit INTEGER;
ALTER TABLE tenure_queues ADD COLUMN group_rate_period_ms INTEGER;
ALTER TABLE tenure_queues ADD COLUMN fairness TEXT;

CREATE TABLE IF NOT EXISTS tenure_rate_windows (
  queue TEXT NOT NULL,
  scope INTEGER NOT NULL,          -- 0: the queue as a whole, 1: one group_key
  group_key TEXT NOT NULL,         -- '' for the queue scope
  starts TEXT NOT NULL DEFAULT '[]',
  blocked_until INTEGER NOT NULL DEFAULT 0,
  turn INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (queue, scope, group_key)
) WITHOUT ROWID;

-- policy 'strict_fifo': a job waits while an earlier job of its (queue, singleton_key) is not
-- done or cancelled (dead blocks too, until requeued or deleted). Only those rows are indexed.
CREATE INDEX IF NOT EXISTS tenure_jobs_strict
  ON tenure_jobs (queue, singleton_key, created_at, id)
  WHERE policy = 'strict_fifo' AND state IN ('pending', 'failed', 'leased', 'dead');

-- fairness = 'round_robin': the claim finds the head of each group of the queue by a skip scan of
-- this index (one seek per group with queued jobs). Jobs without a group_key are not in it.
CREATE INDEX IF NOT EXISTS tenure_jobs_group_head
  ON tenure_jobs (queue, group_key, priority DESC, run_at, created_at, id)
  WHERE group_key IS NOT NULL AND state IN ('pending', 'failed') AND waiting_on = 0;
