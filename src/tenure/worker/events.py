"""Milestones a worker reaches, counted, so that a test (or a host) can wait for one instead of
sleeping "long enough": ``worker.events.wait("turns", worker.events.count("turns") + 3)``.

The names (each counts from zero over the worker's lifetime):

- ``turns``: the dispatcher finished one turn of its loop (a claim, or a look at full slots);
- ``idle``: the dispatcher's claim came back short (or it could claim nothing) and it is about to
  wait for a wake-up or its poll;
- ``settle_batches``: one batch of settlements finished (on a settler, or on a slot thread that
  settled its own attempt: ``inline_settles`` counts those too);
- ``keeper_ticks``: the keeper finished one pass of renewals and timeouts;
- ``watch_claims``: the watch thread claimed for a change it heard itself, instead of waking the
  dispatcher (SQLite: ``Producer._heard``);
- ``inline_settles``: a slot thread settled what had finished itself, instead of handing it to
  the settler thread (SQLite, the only attempt in flight: ``Executor._finish``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..errors import InvalidArgument

NAMES = ("turns", "idle", "settle_batches", "keeper_ticks", "watch_claims", "inline_settles")


class Milestones:
    """Counters of :data:`NAMES` with a condition to wait on (thread-safe)."""

    __slots__ = ("_cv", "_counts", "_waiters")

    def __init__(self) -> None:
        self._cv = threading.Condition(threading.Lock())
        self._counts = dict.fromkeys(NAMES, 0)
        self._waiters = 0  # notify only when somebody waits: a mark is on the worker's hot path

    def _check(self, name: str) -> None:
        if name not in self._counts:
            raise InvalidArgument(f"no worker milestone {name!r}; the milestones are {', '.join(NAMES)}")

    def mark(self, name: str) -> None:
        """Count one more ``name`` and wake whoever waits for it."""
        with self._cv:
            self._counts[name] += 1
            if self._waiters:
                self._cv.notify_all()

    def count(self, name: str) -> int:
        """How many ``name`` milestones so far."""
        self._check(name)
        return self._counts[name]

    def wait(self, name: str, at_least: int, timeout: float | None = None) -> bool:
        """Block until ``name`` has been reached ``at_least`` times (True), or ``timeout``
        seconds pass (False)."""
        self._check(name)
        with self._cv:
            return self._waiting(lambda: self._counts[name] >= at_least, timeout)

    def wait_more(self, name: str, n: int = 1, timeout: float | None = None) -> bool:
        """Block until ``name`` is reached ``n`` more times from now (True), or ``timeout`` passes."""
        self._check(name)
        with self._cv:
            target = self._counts[name] + n
            return self._waiting(lambda: self._counts[name] >= target, timeout)

    def _waiting(self, predicate: Callable[[], bool], timeout: float | None) -> bool:
        """``wait_for`` counted in ``_waiters`` (called holding the condition)."""
        self._waiters += 1
        try:
            return self._cv.wait_for(predicate, timeout)
        finally:
            self._waiters -= 1
