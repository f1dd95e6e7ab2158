"""Helpers for the tenure.flow tests: waiting on real progress (never on a lease's expiry),
reading a run's checkpoint rows, and gates that tasks block on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from tenure.records import Lease

FENCE = {"TN2065", "TN2066", "TN2067"}


def wait_for(pred: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``pred`` until it answers something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def wait_state(store, job_id: str, *states: str, timeout: float = 10.0):
    """The job once its state is one of ``states``."""
    def check():
        job = store.jobs.get(job_id)
        if job is not None and job.state not in states and job.state in ("done", "dead", "cancelled"):
            raise AssertionError(f"job {job_id} ended {job.state!r} (wanted {states}): {job.last_error}")
        return job if job is not None and job.state in states else None
    return wait_for(check, timeout, f"job {job_id} to reach {states}")


def rows(store, job_id: str) -> list[tuple[str, Any, int]]:
    """Every checkpoint row of the run as ``(node_id, value, generation)``, sorted by node."""
    key = Lease(job_id, "", 2**31 - 1, 0, "", 0)  # every generation (PostgreSQL: int4)
    return sorted((c.node_id, c.value, c.generation) for c in store.jobs.checkpoints(key).list())


class Recorder:
    """Thread-safe list of events (task invocations, outcomes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.items: list[Any] = []

    def __call__(self, item: Any) -> None:
        with self._lock:
            self.items.append(item)

    def count(self, item: Any) -> int:
        with self._lock:
            return self.items.count(item)

    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self.items)
