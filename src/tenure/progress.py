"""Progress a running attempt reports: ``ctx.progress(fraction, note=None)``.

The value is stored on the job (``Job.progress``: fraction, note, the attempt that wrote it and
when) by a fenced write: only the attempt holding the job's CURRENT lease can write it, so a
stale attempt (expired, superseded, the job cancelled) never overwrites what the live one
reported; its write is refused with the fence's code, as a settlement would be.

Writes are throttled per attempt: at most one every :data:`PROGRESS_EVERY` seconds on the store's
clock; a report inside the window is kept and written when the window has passed at the next
report, or when the handler returns or raises (before its attempt settles), so the last value
reported is always the one stored (docs/operations.md, "Progress").
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any

from . import _validate as v
from .errors import InvalidArgument, InvalidType

if TYPE_CHECKING:
    from .records import Lease
    from .store import Store

#: At most one progress write per attempt per this many seconds.
PROGRESS_EVERY = 1.0
#: Characters of a progress note.
MAX_NOTE_CHARS = 200


def check(fraction: Any, note: Any) -> tuple[float, str | None]:
    """The validated report: ``fraction`` a real number in [0, 1] (TN1002 for another type, TN1001
    out of range), ``note`` None or a string of at most :data:`MAX_NOTE_CHARS` characters."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise InvalidType(
            f"progress fraction must be a number between 0 and 1, got {type(fraction).__name__}"
        )
    f = float(fraction)
    if not math.isfinite(f) or not 0.0 <= f <= 1.0:
        raise InvalidArgument(f"progress fraction must be between 0 and 1, got {fraction!r}")
    if note is not None:
        v.text(note, "progress note", max_chars=MAX_NOTE_CHARS)
    return f, note


class Throttle:
    """One attempt's progress reports: writes at most one per :data:`PROGRESS_EVERY` seconds of
    the store's clock and keeps the latest unwritten one for :meth:`flush`."""

    __slots__ = ("_store", "_lease", "_last_ms", "_pending", "_lock")

    def __init__(self, store: Store, lease: Any) -> None:
        self._store = store
        self._lease = lease  # a callable answering the attempt's current lease
        self._last_ms: int | None = None
        self._pending: tuple[float, str | None] | None = None
        self._lock = threading.Lock()

    def report(self, fraction: Any, note: Any = None) -> bool:
        """Record a report; answers True when it was written now, False when it waits for the
        window (it is then written by a later report or by :meth:`flush`)."""
        value = check(fraction, note)
        with self._lock:
            now = self._store._now_wall()
            if self._last_ms is not None and now - self._last_ms < PROGRESS_EVERY * 1000:
                self._pending = value
                return False
            self._pending = None
            self._last_ms = now
        self._write(value)
        return True

    def flush(self) -> None:
        """Write the latest report still waiting for its window, if any (the attempt is about to
        settle). A fence refusal here is not raised: the settlement reports the lost lease."""
        with self._lock:
            value, self._pending = self._pending, None
        if value is not None:
            try:
                self._write(value)
            except Exception:  # noqa: BLE001 - the settlement that follows answers for the lease
                pass

    def _write(self, value: tuple[float, str | None]) -> None:
        lease: Lease = self._lease()
        self._store.jobs.progress(lease, value[0], note=value[1])
