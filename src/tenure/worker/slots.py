"""The hand-off of claimed attempts to a worker's slot threads (:class:`SlotPool`).

A slot thread that finishes a handler takes the next queued attempt itself instead of parking,
and a parked one is woken only when queued work has no thread on its way to it, so a run of short
jobs costs a thread switch or two per batch instead of two per job (docs/performance.md,
"SQLite drain")."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .attempt import Attempt


class SlotPool:
    """The queue between the claimers and the slot threads.

    Promise (liveness): while an attempt waits here and a slot thread is free, some thread is on
    its way to take it: a parked thread is woken when attempts arrive and no woken thread is
    still on its way (``put_many``), and a thread that takes an attempt and leaves others queued
    wakes one more before it runs its handler (``take``). So a handler that blocks never holds up
    the attempts queued behind it, while a run of short handlers is taken by one thread after
    another without waking the rest: handing each attempt to its own parked thread was a futex
    wake and a GIL hand-off per job, ~25% of a busy SQLite worker's GIL time.

    At most one thread per slot takes from it (the worker starts ``concurrency`` of them), each
    running one handler at a time, so at most N attempts run at once (spec 6.3) as before.
    """

    __slots__ = ("_mutex", "_queue", "_parked", "_waking", "_closed")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._queue: deque[Attempt] = deque()
        # The gates of parked threads (each a lock held while its thread waits on it; releasing
        # it wakes that thread). A stack: the thread parked last is the one woken first.
        self._parked: list[threading.Lock] = []
        self._waking = 0  # threads woken and not yet back at the queue
        self._closed = False

    def put_many(self, attempts: Iterable[Attempt]) -> None:
        """Queue attempts to run, waking a parked thread if none is on its way already."""
        with self._mutex:
            self._queue.extend(attempts)
            gate = self._next_gate()
        if gate is not None:
            gate.release()

    def _next_gate(self) -> threading.Lock | None:
        """Holding ``_mutex``: the gate to open when work is queued and no woken thread is on its
        way to it (counted as on its way from now on), else None."""
        if self._queue and not self._waking and self._parked:
            self._waking += 1
            return self._parked.pop()
        return None

    def take(self, gate: threading.Lock) -> Attempt | None:
        """The next attempt for the calling slot thread, parking it on ``gate`` (its own lock,
        held) while none is queued; None once the pool is closed and empty (the thread ends)."""
        woken = False
        mutex, queue = self._mutex, self._queue
        while True:
            with mutex:
                if woken:
                    self._waking -= 1
                if queue:
                    attempt = queue.popleft()
                    more = self._next_gate()  # the rest must not wait for this handler
                    break
                if self._closed:
                    return None
                self._parked.append(gate)
            gate.acquire()  # parked until put_many or close releases it
            woken = True
        if more is not None:
            more.release()
        return attempt

    def close(self) -> None:
        """Let every slot thread end once the queue is empty (queued attempts still run first,
        as they did ahead of a queue's end markers)."""
        with self._mutex:
            self._closed = True
            gates, self._parked = self._parked, []
            self._waking += len(gates)
        for gate in gates:
            gate.release()
