"""SQLite queries for signals, the runs waiting for them and a run's child jobs (mixed into the
session; the semantics live in :mod:`tenure.durable` and :mod:`tenure.signals`).

Every send, receive and park runs inside one write transaction (``BEGIN IMMEDIATE``), which
SQLite already serialises: :meth:`signal_lock` has nothing to add. ``now`` None means the wall
clock.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ..rows import JOB_COLUMNS, JobRow, SentSignal, TakenSignal, job_rows

COLS = ", ".join(JOB_COLUMNS)
SETTLED = "('done', 'dead', 'cancelled')"

SIGNAL_INSERT = "INSERT INTO tenure_signals (key, payload, sent_at) VALUES (?, ?, ?) RETURNING id, sent_at"
# A send wakes the parked runs waiting for its key: pending, due later -> due now.
SIGNAL_WAKE = """
UPDATE tenure_jobs SET run_at = :now
WHERE state = 'pending' AND run_at > :now AND id IN (SELECT job_id FROM tenure_waits WHERE key = :key)
RETURNING id
"""
SIGNAL_TAKE = """
UPDATE tenure_signals SET consumed_by = :job, consumed_at = :now
WHERE id = (SELECT id FROM tenure_signals WHERE key = :key AND consumed_by IS NULL ORDER BY id LIMIT 1)
RETURNING id, payload
"""
SIGNAL_COUNT = "SELECT count(*) FROM tenure_signals WHERE key = ? AND consumed_by IS NULL"
WAIT_ADD = "INSERT INTO tenure_waits (job_id, key) VALUES (?, ?) ON CONFLICT DO NOTHING"
WAIT_REMOVE = "DELETE FROM tenure_waits WHERE job_id = ? AND key = ?"
WAIT_REMOVE_ALL = "DELETE FROM tenure_waits WHERE job_id = ?"
SET_WAKE_PARENT = "UPDATE tenure_jobs SET wake_parent = ?, wake_each = ? WHERE id IN (SELECT value FROM json_each(?))"
CHILDREN_OPEN = f"SELECT count(*) FROM tenure_jobs WHERE wake_parent = ? AND state NOT IN {SETTLED}"
GET_MANY = f"SELECT {COLS} FROM tenure_jobs WHERE id IN (SELECT value FROM json_each(?))"
WAKE = "UPDATE tenure_jobs SET run_at = :now WHERE id = :id AND state = 'pending' AND run_at > :now"


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class SQLiteSignalsMixin:
    """Signals, waits and children: one statement per method."""

    _conn: Any

    def signal_lock(self, key: str) -> None:
        return None  # the write transaction (BEGIN IMMEDIATE) already serialises every writer

    def signal_insert(self, key: str, payload: str | None, now: int | None) -> SentSignal:
        now = _wall_ms() if now is None else now
        row = self._conn.execute(SIGNAL_INSERT, (key, payload, now)).fetchone()
        return SentSignal(int(row[0]), int(row[1]))

    def signal_wake(self, key: str, now: int | None) -> list[str]:
        now = _wall_ms() if now is None else now
        return [r[0] for r in self._conn.execute(SIGNAL_WAKE, {"key": key, "now": now}).fetchall()]

    def signal_take(self, key: str, job_id: str, now: int | None) -> TakenSignal | None:
        now = _wall_ms() if now is None else now
        row = self._conn.execute(SIGNAL_TAKE, {"key": key, "job": job_id, "now": now}).fetchone()
        return None if row is None else TakenSignal(int(row[0]), row[1])

    def signal_count(self, key: str) -> int:
        return int(self._conn.execute(SIGNAL_COUNT, (key,)).fetchone()[0])

    def wait_add(self, job_id: str, key: str) -> None:
        self._conn.execute(WAIT_ADD, (job_id, key))

    def wait_remove(self, job_id: str, key: str | None) -> None:
        if key is None:
            self._conn.execute(WAIT_REMOVE_ALL, (job_id,))
        else:
            self._conn.execute(WAIT_REMOVE, (job_id, key))

    def job_set_wake_parent(self, job_ids: Sequence[str], parent_id: str, each: bool = False) -> int:
        return self._conn.execute(SET_WAKE_PARENT, (parent_id, 1 if each else 0, json.dumps(list(job_ids)))).rowcount

    def job_children_open(self, parent_id: str) -> int:
        return int(self._conn.execute(CHILDREN_OPEN, (parent_id,)).fetchone()[0])

    def job_get_many(self, job_ids: Sequence[str]) -> list[JobRow]:
        return job_rows(self._conn.execute(GET_MANY, (json.dumps(list(job_ids)),)))

    def job_wake(self, job_id: str, now: int | None) -> bool:
        now = _wall_ms() if now is None else now
        return self._conn.execute(WAKE, {"id": job_id, "now": now}).rowcount == 1
