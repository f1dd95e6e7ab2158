"""A reference to one enqueued job (:class:`Handle`): what ``Task.enqueue`` and a composition
answer; ``result()`` waits for the job and answers its result."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from .errors import InvalidArgument, JobCancelled, JobDead, ResultTimeout
from .records import Job
from .store import Store

if TYPE_CHECKING:
    pass

R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True)
class Handle(Generic[R_co]):
    """A reference to one enqueued job; ``Handle[R]``: its ``result()`` is the task's return type."""

    id: str | None
    store: Store = field(repr=False)

    def get(self) -> Job | None:
        return None if self.id is None else self.store.jobs.get(self.id)

    def result(self, timeout: float | None = None, *, poll: float = 0.005) -> R_co:
        """Wait for the job to settle and answer its stored result. Raises :class:`JobDead` (with the
        last error) or :class:`JobCancelled`, or :class:`ResultTimeout` after ``timeout`` seconds.
        Works across processes: it reads the store."""
        if self.id is None:
            raise InvalidArgument("this enqueue was deduplicated (no job id): there is no result to wait for")
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = poll
        while True:
            job = self.store.jobs.get(self.id)
            if job is None:
                raise JobDead(f"job {self.id!r} no longer exists (swept?)", job_id=self.id)
            if job.state == "done":
                return job.result
            if job.state == "dead":
                raise JobDead(f"job {self.id!r} is dead after {job.attempts} attempt(s): {job.last_error}",
                              job_id=self.id, last_error=job.last_error)
            if job.state == "cancelled":
                raise JobCancelled(f"job {self.id!r} was cancelled", job_id=self.id)
            if deadline is not None and time.monotonic() >= deadline:
                raise ResultTimeout(f"job {self.id!r} is still {job.state} after {timeout} s{_why(self.store, job)}",
                                    job_id=self.id)
            time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
            delay = min(delay * 1.5, 0.1)

    def cancel(self) -> bool:
        # A deduplicated enqueue (id None) is refused by cancel's own validation (InvalidType).
        return self.store.jobs.cancel(self.id)  # type: ignore[arg-type]


def _why(store: Store, job: Job) -> str:
    """``: <why a queued job has not run>`` for a timeout's message (tenure.kinds.why_waiting),
    or empty; a failing read leaves the timeout as it was."""
    from . import kinds

    try:
        why = kinds.why_waiting(store, job)
    except Exception:  # noqa: BLE001 - only an explanation: the timeout stands on its own
        return ""
    return f": {why}" if why else ""
