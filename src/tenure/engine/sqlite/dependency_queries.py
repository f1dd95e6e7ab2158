"""The dependency statements of the SQLite dialect (docs/composition.md): parents' states, the
edges of a new dependent, and what reads them back; the settlement side is migration 0013's
trigger."""

from __future__ import annotations

from ..rows import JOB_COLUMNS

JOB_STATES = "SELECT id, state FROM tenure_jobs WHERE id IN (SELECT value FROM json_each(:ids))"
MARK_PARENTS = """
UPDATE tenure_jobs SET has_dependents = 1 WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING id, state
"""
ADD_DEPENDENCY = """
INSERT INTO tenure_dependencies (job_id, parent_id, position, policy, released)
VALUES (:job_id, :parent_id, :position, :policy, :released)
ON CONFLICT DO NOTHING
"""
SET_WAITING = "UPDATE tenure_jobs SET waiting_on = :n WHERE id = :id"
# A dependent whose parent had already failed when it was enqueued (policy cancel): cancelled at
# once, like the trigger would have done had the parent failed a moment later.
CANCEL_DEPENDENT = """
UPDATE tenure_jobs SET state = 'cancelled', last_error = :error, updated_at = :now
WHERE id = :id AND state = 'pending'
"""
PARENTS_OF = f"""
SELECT d.parent_id, d.position, d.policy, d.released, {", ".join("j." + c for c in JOB_COLUMNS)}
FROM tenure_dependencies d LEFT JOIN tenure_jobs j ON j.id = d.parent_id
WHERE d.job_id = ? ORDER BY d.position
"""
DEPENDENTS_OF = f"""
SELECT d.job_id, d.position, d.policy, d.released, {", ".join("j." + c for c in JOB_COLUMNS)}
FROM tenure_dependencies d INDEXED BY tenure_dependencies_parent LEFT JOIN tenure_jobs j ON j.id = d.job_id
WHERE d.parent_id = ? ORDER BY d.job_id
"""
