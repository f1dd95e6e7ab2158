"""PostgreSQL queries for signals, the runs waiting for them and a run's child jobs (mixed into
the session; the same methods as :mod:`tenure.engine.sqlite.signals`, statement for statement).

Sends, receives and parks on one key take a transaction-scoped advisory lock on the key first
(:meth:`signal_lock`), before any job row, so they are serialised per key and never deadlock
with each other. ``now`` None means the database's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..rows import JOB_COLUMNS, JobRow, SentSignal, TakenSignal, job_rows

COLS = ", ".join(JOB_COLUMNS)
SETTLED = "('done', 'dead', 'cancelled')"
CLOCK = "clock AS (SELECT coalesce(%(now)s::bigint, tenure_now_ms()) AS ms)"
NOW = "(SELECT ms FROM clock)"

SIGNAL_LOCK = "SELECT pg_advisory_xact_lock(hashtext('tenure.signal.' || %(key)s::text))"
SIGNAL_INSERT = f"""
WITH {CLOCK}
INSERT INTO tenure_signals (key, payload, sent_at) VALUES (%(key)s::text, %(payload)s::text, {NOW})
RETURNING id, sent_at
"""
# A send wakes the parked runs waiting for its key (pending, due later -> due now) and, when it
# woke any, tells the LISTENing workers (delivered at commit, like every tenure wake-up).
SIGNAL_WAKE = f"""
WITH {CLOCK},
woken AS (
  UPDATE tenure_jobs SET run_at = {NOW}
  WHERE state = 'pending' AND run_at > {NOW}
    AND id IN (SELECT job_id FROM tenure_waits WHERE key = %(key)s::text)
  RETURNING id),
notified AS (SELECT pg_notify('tenure_jobs', current_schema()) FROM (SELECT 1 FROM woken LIMIT 1) w)
SELECT id FROM woken, (SELECT count(*) FROM notified) n
"""
SIGNAL_TAKE = f"""
WITH {CLOCK}
UPDATE tenure_signals SET consumed_by = %(job)s::text, consumed_at = {NOW}
WHERE id = (SELECT id FROM tenure_signals WHERE key = %(key)s::text AND consumed_by IS NULL
            ORDER BY id LIMIT 1 FOR UPDATE)
RETURNING id, payload
"""
SIGNAL_COUNT = "SELECT count(*) FROM tenure_signals WHERE key = %(key)s::text AND consumed_by IS NULL"
WAIT_ADD = "INSERT INTO tenure_waits (job_id, key) VALUES (%(job)s::text, %(key)s::text) ON CONFLICT DO NOTHING"
WAIT_REMOVE = "DELETE FROM tenure_waits WHERE job_id = %(job)s::text AND key = %(key)s::text"
WAIT_REMOVE_ALL = "DELETE FROM tenure_waits WHERE job_id = %(job)s::text"
SET_WAKE_PARENT = """
UPDATE tenure_jobs SET wake_parent = %(parent)s::text, wake_each = %(each)s::boolean WHERE id = ANY(%(ids)s::text[])"""
CHILDREN_OPEN = f"SELECT count(*) FROM tenure_jobs WHERE wake_parent = %(parent)s::text AND state NOT IN {SETTLED}"
GET_MANY = f"SELECT {COLS} FROM tenure_jobs WHERE id = ANY(%(ids)s::text[])"
WAKE = f"""
WITH {CLOCK}
UPDATE tenure_jobs SET run_at = {NOW} WHERE id = %(id)s::text AND state = 'pending' AND run_at > {NOW}
"""


class PostgresSignalsMixin:
    """Signals, waits and children: one statement per method."""

    _conn: Any

    def signal_lock(self, key: str) -> None:
        self._conn.execute(SIGNAL_LOCK, {"key": key})

    def signal_insert(self, key: str, payload: str | None, now: int | None) -> SentSignal:
        row = self._conn.execute(SIGNAL_INSERT, {"key": key, "payload": payload, "now": now}).fetchone()
        return SentSignal(int(row[0]), int(row[1]))

    def signal_wake(self, key: str, now: int | None) -> list[str]:
        return [r[0] for r in self._conn.execute(SIGNAL_WAKE, {"key": key, "now": now}).fetchall()]

    def signal_take(self, key: str, job_id: str, now: int | None) -> TakenSignal | None:
        row = self._conn.execute(SIGNAL_TAKE, {"key": key, "job": job_id, "now": now}).fetchone()
        return None if row is None else TakenSignal(int(row[0]), row[1])

    def signal_count(self, key: str) -> int:
        return int(self._conn.execute(SIGNAL_COUNT, {"key": key}).fetchone()[0])

    def wait_add(self, job_id: str, key: str) -> None:
        self._conn.execute(WAIT_ADD, {"job": job_id, "key": key})

    def wait_remove(self, job_id: str, key: str | None) -> None:
        if key is None:
            self._conn.execute(WAIT_REMOVE_ALL, {"job": job_id})
        else:
            self._conn.execute(WAIT_REMOVE, {"job": job_id, "key": key})

    def job_set_wake_parent(self, job_ids: Sequence[str], parent_id: str, each: bool = False) -> int:
        return self._conn.execute(SET_WAKE_PARENT, {"parent": parent_id, "each": each, "ids": list(job_ids)}).rowcount

    def job_children_open(self, parent_id: str) -> int:
        return int(self._conn.execute(CHILDREN_OPEN, {"parent": parent_id}).fetchone()[0])

    def job_get_many(self, job_ids: Sequence[str]) -> list[JobRow]:
        return job_rows(self._conn.execute(GET_MANY, {"ids": list(job_ids)}))

    def job_wake(self, job_id: str, now: int | None) -> bool:
        return self._conn.execute(WAKE, {"id": job_id, "now": now}).rowcount == 1
