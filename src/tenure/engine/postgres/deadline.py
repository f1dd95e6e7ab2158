"""Client-side deadlines for PostgreSQL calls: a watchdog that closes a call's socket when the call
outlives its deadline.

A server that stops answering (a stalled PgBouncer, a failover with a query in flight, a network
partition, a hung backend) leaves a psycopg call blocked on a read forever: TCP keepalives cannot
see it when something in the path still acknowledges the packets, and a server-side
``statement_timeout`` needs a server that answers. So every watched call registers its connection
with one :class:`Watchdog` thread per engine; when the deadline passes (or the call's group is
interrupted: a stopping worker), the watchdog shuts the socket down. The blocked read returns at
once, psycopg raises, the connection is marked broken and the pool discards it; the engine reports
the call as ``StoreUnavailable`` (TN0005, "no answer within ..."), which every caller already treats
as "the store could not be reached" (a settlement retries, a claim's lost answer is given back).

The deadline of the calls a thread makes is set with :func:`call_deadline` (a thread-local, so no
signature above the engine changes); :func:`current` reads it.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

_local = threading.local()
#: The shortest sleep of a watchdog with no call in flight (see Watchdog._run).
IDLE_WAKE_S = 1.0


@dataclass(frozen=True, slots=True)
class DeadlineSpec:
    """The deadline of a thread's calls: ``seconds`` per call (``math.inf``: none), and the
    ``group`` its calls belong to (:meth:`Watchdog.interrupt` ends a group's calls at once)."""

    seconds: float
    group: Any = None


@contextlib.contextmanager
def call_deadline(seconds: float | None, group: Any = None) -> Iterator[None]:
    """Within the block, each database call this thread makes must answer within ``seconds``
    (None or ``math.inf``: no deadline, even the engine's default). Blocks nest; the inner wins."""
    prev = getattr(_local, "spec", None)
    _local.spec = DeadlineSpec(math.inf if seconds is None else float(seconds), group)
    try:
        yield
    finally:
        _local.spec = prev


def current() -> DeadlineSpec | None:
    """The deadline set for this thread's calls, or None (the engine's default applies)."""
    return getattr(_local, "spec", None)


@dataclass(eq=False, slots=True)
class WatchedCall:
    """One call in flight: its socket, when it must have answered, and whether it was cut."""

    fd: int
    deadline: float
    seconds: float
    group: Any
    fired: bool = False
    reason: str = field(default="")


class Watchdog:
    """One thread that cuts the calls outliving their deadline (see the module docstring). It
    starts with the first watched call and ends with :meth:`close`."""

    def __init__(self, name: str = "tenure-deadline") -> None:
        self._name = name
        self._cond = threading.Condition()
        self._calls: set[WatchedCall] = set()
        self._thread: threading.Thread | None = None
        self._wake_at = 0.0  # when the thread wakes next (it is told only of earlier deadlines)
        self._idle_s = math.inf  # how long it sleeps with no call: the shortest watch it has seen
        self._closed = False
        #: Calls cut so far (a test signal).
        self.fired = 0

    @contextlib.contextmanager
    def watch(self, fd: int, seconds: float, group: Any = None) -> Iterator[WatchedCall]:
        """Watch the call made on socket ``fd`` (-1: none yet, see :meth:`rebind`) during the
        block: after ``seconds`` the socket is shut down. The block sees ``call.fired`` to tell a
        cut call from another failure."""
        call = WatchedCall(fd, time.monotonic() + seconds, seconds, group)
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._calls.add(call)
            self._idle_s = min(self._idle_s, seconds)
            if call.deadline < self._wake_at:  # else the thread wakes early enough: no thread hop
                self._cond.notify()
        try:
            yield call
        finally:
            with self._cond:
                self._calls.discard(call)

    def rebind(self, call: WatchedCall, fd: int) -> None:
        """The call now runs on socket ``fd`` (-1: on none, e.g. its connection went back to the
        pool): a cut from now on shuts that socket down, and never a socket it no longer owns."""
        with self._cond:
            call.fd = fd

    def interrupt(self, group: Any, reason: str = "interrupted") -> int:
        """Cut every call of ``group`` in flight now; answers how many."""
        with self._cond:
            victims = [c for c in self._calls if c.group is group and group is not None and not c.fired]
            for call in victims:
                self._fire(call, reason)
        return len(victims)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2)

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                live = [c for c in self._calls if not c.fired]
                for call in live:
                    if call.deadline <= now:
                        self._fire(call, f"no answer within {call.seconds:g} s")
                waits = [c.deadline - now for c in live if c.deadline > now]
                # With no call in flight it still wakes after the shortest watch it has seen (at
                # least IDLE_WAKE_S), not never: a call watched that long from now then ends after
                # that wake-up, so it needs no thread hop (sleeping forever, every first call after
                # an idle spell woke this thread: an idle worker's claim and its settlement, each).
                idle = None if math.isinf(self._idle_s) else max(self._idle_s, IDLE_WAKE_S)
                wait = min(waits) if waits else idle
                self._wake_at = math.inf if wait is None else now + wait
                self._cond.wait(wait)

    def _fire(self, call: WatchedCall, reason: str) -> None:
        """Shut the call's socket down (both directions): its blocked read returns at once. A dup
        of the descriptor is shut down, so the connection's own descriptor stays valid until psycopg
        closes it (no descriptor is ever closed under another thread)."""
        call.fired = True
        call.reason = reason
        self.fired += 1
        if call.fd < 0:
            return  # waiting for a connection: the waiter sees ``fired`` at its next poll
        try:
            dup = os.dup(call.fd)
        except OSError:
            return  # already closed: nothing blocks on it
        try:
            sock = socket.socket(fileno=dup)
        except OSError:
            os.close(dup)
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            sock.close()
