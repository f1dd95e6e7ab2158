"""The PostgreSQL statements of administration: counts, keyset pages, filtered matches, deletes
and sweeps (the operator reads and actions above them are tenure.job_admin and tenure.insights)."""

from __future__ import annotations

from .queries import CLOCK, COLS, NOW

COUNTS = "SELECT state, count(*) FROM tenure_jobs GROUP BY state"

# Keyset page by id; the engine appends only the filters a call uses (an "IS NULL OR" filter
# would keep a prepared plan from using an index).
PAGE = f"SELECT {COLS} FROM tenure_jobs WHERE true{{filters}} ORDER BY id {{direction}} LIMIT %(limit)s"
# Newest first (page(order="newest")): the same keyset walked down the primary key.
PAGE_AFTER_DESC = " AND id < %(after)s::text"
PAGE_FILTERS = {
    "state": " AND state = %(state)s::text",
    "kind": " AND kind = %(kind)s::text",
    "queue": " AND queue = %(queue)s::text",
    "tag": " AND tags IS NOT NULL AND tags::jsonb @> jsonb_build_array(%(tag)s::text)",
    "after": " AND id > %(after)s::text",
}

# Bulk administration (tenure.bulk_admin): the ids a filter matches, by id, among the rows the
# operation may touch (MATCH_ELIGIBLE); one bounded batch per call, continued with "after".
MATCH = f"WITH {CLOCK} SELECT id FROM tenure_jobs WHERE true{{filters}} ORDER BY id LIMIT %(limit)s"
MATCH_FILTERS = {**PAGE_FILTERS, "before": " AND created_at < %(before)s::bigint"}
MATCH_ELIGIBLE = {
    "cancel": " AND state IN ('pending', 'failed', 'leased')",
    "requeue": f" AND (state IN ('failed', 'dead', 'cancelled') OR (state = 'leased' AND lease_until <= {NOW}))",
    "delete": f" AND NOT (state = 'leased' AND lease_until > {NOW})",
}
# Never a job with a live lease: its running attempt would lose the row under it. FOR UPDATE
# waits for a concurrent settlement or claim, so the lease test reads the row as it ends up.
DELETE_JOBS = f"""
WITH {CLOCK},
doomed AS (SELECT id FROM tenure_jobs WHERE id = ANY(%(ids)s::text[]) FOR UPDATE),
gone AS (DELETE FROM tenure_jobs j USING doomed d WHERE j.id = d.id
         AND NOT (j.state = 'leased' AND j.lease_until > {NOW}) RETURNING j.id),
checkpoints AS (DELETE FROM tenure_checkpoints WHERE run_id IN (SELECT id FROM gone))
SELECT id FROM gone
"""

# Up to :limit settled jobs older than the horizon, oldest first, and their checkpoints, in one
# statement. FOR UPDATE SKIP LOCKED: a row being requeued right now is re-checked (or skipped),
# never deleted as the pending job it just became.
SWEEP = """
WITH doomed AS (
  SELECT id FROM tenure_jobs
  WHERE state IN ('done', 'dead', 'cancelled') AND updated_at < %(before)s::bigint
  ORDER BY updated_at, id LIMIT %(limit)s
  FOR UPDATE SKIP LOCKED),
checkpoints AS (DELETE FROM tenure_checkpoints WHERE run_id IN (SELECT id FROM doomed)),
jobs AS (DELETE FROM tenure_jobs WHERE id IN (SELECT id FROM doomed) RETURNING 1)
SELECT count(*) FROM jobs
"""
