"""The holder's side of ``jobs.request_cancel``: each worker watches for cancel
requests on the jobs it runs and settles them ``cancelled`` with its own lease.

One thread per worker. It wakes on the engine's cancel watcher (PostgreSQL: ``LISTEN
tenure_cancel``, notified by migration 0010's trigger when a running job is flagged; heard on the
connection of the worker's own watcher of new jobs where it has one, so that a busy worker has
one listening server process, not two), at the
latest every :data:`POLL_S` seconds while attempts are in flight (SQLite has no notification
across processes; on PostgreSQL the poll is the backstop for a lost connection), and at once
when a request is made in this process. It then reads the ids of the flagged leased jobs (a
partial index that is empty unless an operator is cancelling something) and hands each of its
own to :meth:`CancelRequests._cancel_requested`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from .. import worker_log
from ..job_control import CANCEL_REQUESTED, settle_requested
from .lifecycle import RUNNING, SETTLED, SETTLING
from .state import WorkerState

if TYPE_CHECKING:
    from .attempt import Attempt
    from .core import Worker

log = logging.getLogger("tenure.worker")

#: Longest a cancel request waits for its holder to look, without a notification (seconds).
POLL_S = 0.25
#: With a notification channel (PostgreSQL), the poll is only a backstop.
POLL_NOTIFIED_S = 2.0
#: A worker with no attempt in flight for this long stops listening (PostgreSQL: closes its
#: ``LISTEN tenure_cancel`` connection). Up to PostgreSQL 15 at least, every ``NOTIFY`` wakes
#: every listening backend of the database whatever its channel, and each runs a transaction to
#: read the queue: an idle worker's cancel listener cost the server a wake-up and a commit on
#: every enqueue. It listens again as soon as an attempt starts.
LISTEN_IDLE_S = 2.0
#: How often an idle worker without a listener looks whether an attempt started (no database call).
IDLE_LOOK_S = 0.05


class CancelWatch:
    """Watches cancel requests for one worker's in-flight attempts (see the module docstring)."""

    def __init__(self, worker: Worker, stop: threading.Event, notified: bool = True) -> None:
        self.worker = worker
        self._notified = notified
        self._stop = stop
        self._poke = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tenure-cancel-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def poke(self) -> None:
        """Look now (a request was made in this process)."""
        self._poke.set()

    def join(self) -> None:
        self._poke.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        watcher = None
        try:
            watcher = self._loop()
        finally:
            self._close(watcher)

    def _open(self):
        """The cancel side of the worker's own watcher (:meth:`tenure.engine.postgres.watch.
        PostgresWatcher.cancel_listener`: no connection of its own), else the engine's cancel
        watcher, or None (then the poll decides: an engine without one, or one that failed to
        open, never asked again)."""
        shared = getattr(self.worker, "_watcher", None)
        listener = getattr(shared, "cancel_listener", None)
        if listener is not None:
            try:
                side = listener()
            except Exception:  # a watcher of its own instead
                log.debug("no cancel listener on the worker's watcher", exc_info=True)
                side = None
            if side is not None:
                return side
        try:
            watcher = self.worker.store.engine.cancel_watcher()
        except Exception as exc:  # noqa: BLE001 - the poll is the fallback
            log.info("no cancel-request notifications (%s); polling every %.2fs", exc, POLL_S)
            watcher = None
        if watcher is None:
            self._notified = False
        return watcher

    @staticmethod
    def _close(watcher) -> None:
        if watcher is not None:
            try:
                watcher.close()
            except Exception:
                log.debug("closing the cancel watcher failed", exc_info=True)

    def _loop(self):
        """Answers the watcher open when the worker stops. The watcher is open only while this
        worker has attempts in flight, and for :data:`LISTEN_IDLE_S` after: opened as one starts
        (then the flags are read at once, so that a request made before it listened is seen)."""
        stop, poke = self._stop, self._poke
        watcher = None
        idle_since: float | None = None
        next_poll = time.monotonic() + POLL_S
        while not stop.is_set():
            busy = self.worker._has_attempts()
            now = time.monotonic()
            if busy:
                idle_since = None
                if watcher is None and self._notified:
                    watcher = self._open()
                    if watcher is not None:
                        poke.set()
            else:
                idle_since = idle_since if idle_since is not None else now
                if watcher is not None and now - idle_since >= LISTEN_IDLE_S:
                    self._close(watcher)  # an idle listener is woken by every enqueue's NOTIFY
                    watcher = None
            poll = POLL_S if watcher is None else POLL_NOTIFIED_S
            if watcher is None:
                # Idle with notifications: look again soon for an attempt starting (no database call).
                pause = next_poll - now if busy or not self._notified else min(next_poll - now, IDLE_LOOK_S)
                woke = poke.wait(max(0.0, pause))
            else:
                try:
                    woke = watcher.wait(0.05)
                except Exception:  # noqa: BLE001 - the poll is the fallback
                    woke = stop.wait(0.05) and False
                woke = woke or poke.is_set()
            if not woke and time.monotonic() < next_poll:
                continue
            next_poll = time.monotonic() + poll
            poke.clear()
            if stop.is_set() or not self.worker._has_attempts():
                continue
            try:
                self.check()
            except Exception as exc:  # noqa: BLE001 - looked at again on the next turn
                log.warning("reading cancel requests failed: %s", exc)
        return watcher

    def check(self) -> None:
        """Read the flagged jobs once and act on this worker's own."""
        worker = self.worker
        with worker.store._session(worker._halt) as s:
            flagged = set(s.job_cancel_flagged())
        if flagged:
            for attempt in worker._attempts_of(flagged):
                worker._cancel_requested(attempt)


class CancelRequests(WorkerState):
    """The worker's side of a cancel request: which attempts it runs, and settling one cancelled."""

    def _has_attempts(self) -> bool:
        return bool(self._attempts)

    def _attempts_of(self, job_ids: set[str]) -> list[Attempt]:
        with self._lock:
            return [a for a in self._attempts.values() if a.job.id in job_ids]

    def _cancel_requested(self, a: Attempt) -> None:
        """An operator asked to cancel this attempt's job: set ``ctx.cancelled`` (reason
        :data:`CANCEL_REQUESTED`) and settle the attempt ``cancelled`` with its own current lease.
        The handler keeps its slot until it returns (its late result is ignored). With a handler
        transaction open (the settle lock held) the next look settles it."""
        if a.state is not RUNNING or a.lost is not None:
            return
        a.cancel(CANCEL_REQUESTED)
        if not a.settle_lock.acquire(blocking=False):
            return
        try:
            if a.state is not RUNNING:
                return
            a.state = SETTLING
            try:
                refused = settle_requested(self.store, a.lease)
            except Exception as exc:  # noqa: BLE001 - storage trouble: looked at again next turn
                a.state = RUNNING
                log.warning("settling the cancel request of job %s failed: %s", a.job.id, exc)
                return
        finally:
            a.settle_lock.release()
        a.state = SETTLED
        if refused is not None:
            a.lost = refused  # another attempt or an operator settled it first
            self._count("lost_settlements")
            self._outcome(a, "lost", code=refused.code, reason=str(refused))
        else:
            a.operator_cancelled = True
            self._count("cancellations")
            worker_log.event(logging.INFO, a.job, a.lease.attempt, "cancelled", "cancelled (cancel requested)",
                             self.owner)
            self._outcome(a, "cancelled", code=CANCEL_REQUESTED.code, reason=str(CANCEL_REQUESTED))
        self._check_exhausted()
