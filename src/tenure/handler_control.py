"""Control from inside a handler: raise :class:`Retry`, :class:`Snooze` or :class:`Discard`, and the ``retry_on`` / ``discard_on`` task options.

Each is an exception the handler raises; the worker settles the attempt accordingly, through
the fence like any settlement (a stale attempt's control is refused like its completion):

- ``raise tenure.Retry(delay=10)``: a failure whose retry delay the handler chose (seconds). It
  counts as an attempt like any failure: with no attempts left the job is ``dead``.
- ``raise tenure.Snooze(delay=600)``: not a failure. The job goes back to ``pending`` at now +
  ``delay`` and its retries left are unchanged: the claim counted this attempt, so the snooze
  raises ``max_attempts`` by one (as Oban does); ``attempts`` keeps counting every run.
- ``raise tenure.Discard("reason")``: ``dead`` now, whatever attempts are left.

``@app.task(retry_on=(TimeoutError,), discard_on=(ValueError,))``: an exception of a
``discard_on`` class makes the job dead at once; with ``retry_on`` given, an exception of no
listed class does too (only the listed ones are retried). ``discard_on`` wins when both match.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import durations
from .errors import InvalidType

if TYPE_CHECKING:
    from .jobs import Jobs
    from .records import Job, Lease


class Control(Exception):  # raised for control flow, documented as such
    """Base of the exceptions a handler raises to steer its own job."""


class Retry(Control):
    """Fail this attempt and retry after ``delay`` seconds (a timedelta works too), instead of the
    backoff. Dead when no attempts are left."""

    def __init__(self, delay: Any = 0, reason: str | None = None) -> None:
        self.delay_ms = durations.ms(delay, "Retry(delay=...)") or 0
        self.reason = reason or f"retry requested in {self.delay_ms / 1000:g} s"
        super().__init__(self.reason)

    def __str__(self) -> str:
        return self.reason


class Snooze(Control):
    """Put the job back to ``pending`` at now + ``delay`` seconds without using up a retry."""

    def __init__(self, delay: Any = 0) -> None:
        self.delay_ms = durations.ms(delay, "Snooze(delay=...)") or 0
        super().__init__(f"snoozed for {self.delay_ms / 1000:g} s")

    def settle(self, jobs: Jobs, lease: Lease) -> Job:
        """How the worker settles it (fenced): ``jobs.snooze``. A durable step's
        :class:`tenure.durable.Park` parks with its records and wake conditions instead."""
        return jobs.snooze(lease, self.delay_ms / 1000)


class Discard(Control):
    """Make the job ``dead`` now, with ``reason`` as its last error (no further attempts)."""

    def __init__(self, reason: str = "discarded by the handler") -> None:
        if not isinstance(reason, str):
            reason = str(reason)
        self.reason = reason
        super().__init__(reason)

    def __str__(self) -> str:
        return self.reason


def exception_classes(value: Any, name: str) -> tuple[type[BaseException], ...]:
    """Validate a ``retry_on`` / ``discard_on`` option: an exception class or an iterable of them."""
    if value is None:
        return ()
    items: Iterable[Any] = (value,) if isinstance(value, type) else value
    try:
        out = tuple(items)
    except TypeError:
        raise InvalidType(f"{name} must be an exception class or a tuple of them, got {value!r}") from None
    for cls in out:
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise InvalidType(f"{name} must hold exception classes, got {cls!r}")
    return out


def apply_task_policy(
    exc: BaseException, retry_on: tuple[type[BaseException], ...], discard_on: tuple[type[BaseException], ...]
) -> BaseException:
    """The exception the worker settles for ``exc`` under a task's ``retry_on``/``discard_on``:
    ``exc`` itself, or a :class:`Discard` raised from it (the history records ``exc``'s type and
    traceback)."""
    if isinstance(exc, Control):
        return exc
    if discard_on and isinstance(exc, discard_on):
        why = f"discard_on {type(exc).__name__}"
    elif retry_on and not isinstance(exc, retry_on):
        why = f"{type(exc).__name__} is not in retry_on"
    else:
        return exc
    from ._validate import error_message

    d = Discard(f"{error_message(exc)} ({why})")
    d.__cause__ = exc
    return d
