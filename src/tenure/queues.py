"""Queues as first-class objects: defaults, policies, limits, dead letters (resolution at enqueue)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .engine.base import JobRow, NewJob, Session
from .jobs import DEFAULT_MAX_ATTEMPTS

if TYPE_CHECKING:
    from .store import Store


class Queues:
    """``store.queues``: the queue registry."""

    def __init__(self, store: Store) -> None:
        self._store = store

    # -- enqueue-time resolution (called by tenure.jobs) ----------------------------------------
    def job_options(self, options: dict[str, Any]) -> dict[str, Any] | None:
        """Validate extra enqueue options; None when one is unknown."""
        return None

    def apply_job_options(self, new: NewJob, options: dict[str, Any]) -> None:
        return None

    def insert(self, session: Session, jobs: list[NewJob], now: int | None) -> list[str | None]:
        """Resolve each job's options (job -> queue default -> built-in) and insert them."""
        for j in jobs:
            if not j.max_attempts:
                j.max_attempts = DEFAULT_MAX_ATTEMPTS
            if j.singleton_on:
                clock_now = now if now is not None else session.now_ms()
                j.singleton_on = clock_now - clock_now % j.singleton_on
        return [jid for jid, _ in session.job_insert(jobs, now)]

    def dead_letter(self, session: Session, rows: list[JobRow], now: int | None) -> None:
        return None

    def redrive(self, queue: str, *, limit: int | None = None) -> int:
        return 0
