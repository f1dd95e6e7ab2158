"""The dependency statements of the PostgreSQL dialect (docs/composition.md): parents' states, the
edges of a new dependent, and what reads them back; the settlement side is migration 0013's
trigger."""

from __future__ import annotations

from .queries import CLOCK, J_COLS, NOW

JOB_STATES = "SELECT id, state FROM tenure_jobs WHERE id = ANY(%(ids)s::text[])"
# The row update locks each parent to the end of the enqueue's transaction: a settlement of it
# waits, and its trigger then reads the committed edges (migration 0013).
MARK_PARENTS = """
UPDATE tenure_jobs SET has_dependents = 1 WHERE id = ANY(%(ids)s::text[])
RETURNING id, state
"""
ADD_DEPENDENCIES = """
INSERT INTO tenure_dependencies (job_id, parent_id, position, policy, released)
SELECT * FROM unnest(%(jobs)s::text[], %(parents)s::text[], %(positions)s::int[], %(policies)s::text[],
                     %(released)s::int[])
ON CONFLICT DO NOTHING
"""
SET_WAITING = """
UPDATE tenure_jobs j SET waiting_on = t.n
FROM unnest(%(ids)s::text[], %(counts)s::int[]) AS t(id, n) WHERE j.id = t.id
"""
CANCEL_DEPENDENT = f"""
WITH {CLOCK}
UPDATE tenure_jobs SET state = 'cancelled', last_error = %(error)s::text, updated_at = {NOW}
WHERE id = %(id)s::text AND state = 'pending'
"""
PARENTS_OF = f"""
SELECT d.parent_id, d.position, d.policy, d.released, {J_COLS}
FROM tenure_dependencies d LEFT JOIN tenure_jobs j ON j.id = d.parent_id
WHERE d.job_id = %(id)s::text ORDER BY d.position
"""
DEPENDENTS_OF = f"""
SELECT d.job_id, d.position, d.policy, d.released, {J_COLS}
FROM tenure_dependencies d LEFT JOIN tenure_jobs j ON j.id = d.job_id
WHERE d.parent_id = %(id)s::text ORDER BY d.job_id
"""
