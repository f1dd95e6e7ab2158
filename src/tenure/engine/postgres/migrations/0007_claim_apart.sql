-- The claim statement skips, in one anti-join on tenure_queues, every queue it must not claim
-- from directly: paused queues, and limited ones (a concurrency or group limit, or a singleton
-- policy), which the engine claims one at a time under their advisory lock. One generated
-- INTEGER column says which, so the planner prices that anti-join exactly as it priced
-- "paused = 1": spelled out as an OR of four terms, the estimate made it trade the ordered scan of
-- the claim index for a bitmap scan and a sort of every pending row. The expression is
-- queries.LIMITED plus paused; the two must agree.
ALTER TABLE tenure_queues ADD COLUMN IF NOT EXISTS claim_apart INTEGER GENERATED ALWAYS AS (
  CASE WHEN paused = 1 OR concurrency_limit IS NOT NULL OR group_limit IS NOT NULL
            OR policy IN ('singleton', 'stately') THEN 1 ELSE 0 END) STORED;
