"""Session methods that are the same code on both dialects, written once: each dialect's session
supplies its own statements (:class:`SharedStatements`, the same names in its modules) and
inherits the methods from :class:`SharedMethods`. A method moves here when its Python is identical
on both sides and only its SQL differs (tests/core/test_engine_contract.py lists what the
dialects declare)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .rows import QueueRow, RedriveRow, ScheduleRow, WorkerRow


@dataclass(frozen=True, slots=True)
class SharedStatements:
    """One dialect's statements for :class:`SharedMethods` (parameters by name)."""

    schedule_delete: str
    schedule_due: str
    schedule_pause: str
    schedule_resume: str
    schedule_advance: str
    leader_release: str
    worker_list: str
    queue_list: str
    redrive_select: str
    cancel_flagged: str


class SharedMethods:
    """The session methods of engine/base.py whose code both dialects share."""

    _conn: Any
    _shared_sql: ClassVar[SharedStatements]

    def schedule_delete(self, name: str, key: str) -> bool:
        return self._conn.execute(self._shared_sql.schedule_delete, {"name": name, "key": key}).rowcount == 1

    def schedule_pause(self, name: str, key: str, paused: bool, next_fire_at: int | None,
                       now: int) -> ScheduleRow | None:
        """Pause one schedule (kept if already paused), or resume it planned to ``next_fire_at`` if
        it was paused; answers its row, or None when absent."""
        sql = self._shared_sql.schedule_pause if paused else self._shared_sql.schedule_resume
        row = self._conn.execute(sql, {"name": name, "key": key, "now": now, "next_fire_at": next_fire_at}).fetchone()
        return None if row is None else ScheduleRow(*row)

    def schedule_due(self, now: int, limit: int) -> list[ScheduleRow]:
        return [ScheduleRow(*r) for r in self._conn.execute(self._shared_sql.schedule_due,
                                                            {"now": now, "limit": limit})]

    def schedule_advance(self, *, name: str, key: str, cron: str, tz: str, expected: int,
                         last_fire_at: int | None, next_fire_at: int | None, now: int) -> bool:
        """Compare-and-set: move the schedule from ``expected`` on; False when another caller did."""
        return self._conn.execute(self._shared_sql.schedule_advance, {
            "name": name, "key": key, "cron": cron, "tz": tz, "expected": expected,
            "last_fire_at": last_fire_at, "next_fire_at": next_fire_at, "now": now}).rowcount == 1

    def leader_release(self, name: str, owner: str) -> bool:
        return self._conn.execute(self._shared_sql.leader_release, {"name": name, "owner": owner}).rowcount == 1

    def worker_list(self) -> list[WorkerRow]:
        return [WorkerRow(*r) for r in self._conn.execute(self._shared_sql.worker_list)]

    def queue_list(self) -> list[QueueRow]:
        return [QueueRow(*r) for r in self._conn.execute(self._shared_sql.queue_list)]

    def queue_redrive_select(self, queue: str, limit: int, after: tuple[int, str] | None) -> list[RedriveRow]:
        """Up to ``limit`` dead-letter copies waiting in ``queue`` after ``(created_at, id)``."""
        created, last = (None, None) if after is None else after
        return [RedriveRow(*r) for r in self._conn.execute(self._shared_sql.redrive_select, {
            "queue": queue, "limit": limit, "after_created": created, "after_id": last})]

    def job_cancel_flagged(self) -> list[str]:
        return [r[0] for r in self._conn.execute(self._shared_sql.cancel_flagged)]
