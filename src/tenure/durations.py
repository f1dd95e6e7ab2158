"""Durations: the one unit of every user-facing duration, and the one parser of their text form.

Every duration a user configures (a worker's ``lease``, ``poll_interval``, ``stop_grace``; the
maintenance horizons; ``?busy_timeout=`` in a store URL; ``tenure worker --lease``) is **seconds**
(an int or a float) or a :class:`datetime.timedelta`. Text surfaces (command-line flags, URL query
options, environment variables) spell it ``250ms``, ``10s``, ``5m``, ``1h``, ``1d``, ``2w`` or a
bare number of seconds; :func:`parse` reads that form and :func:`seconds` accepts both. The one
exception is the job format's own fields (``store.jobs.claim(lease_ms=...)``, ``renew``,
``fail(backoff_base_ms=...)``): they mirror docs/spec.md and stay in milliseconds.

A bad duration is refused here, at the call, with the same coded error everywhere: a wrong type
(``True``, a list) is :class:`~tenure.errors.InvalidType` (TN1002), a bad value (negative, NaN,
zero where it must be positive, text that is not a duration) is
:class:`~tenure.errors.InvalidArgument` (TN1001); both name the option and the value.
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
import re
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .errors import InvalidArgument, InvalidType

T = TypeVar("T")

#: The longest duration anything accepts: ten years (the columns' own bound, see ``_validate``).
MAX_SECONDS = 10 * 365 * 86_400.0
#: Seconds per unit of the text form; no unit means seconds.
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0}
_TEXT = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h|d|w)?\s*$")
#: How the text form is described in error messages and help.
SPELLING = "a number of seconds or 250ms, 10s, 5m, 1h, 1d"


def parse(text: str, what: str) -> float:
    """Seconds from the text form: ``"250ms"`` -> 0.25, ``"10s"``/``"10"`` -> 10.0, ``"5m"``,
    ``"1h"``, ``"1d"``, ``"2w"``. Anything else is :class:`InvalidArgument` (TN1001) naming
    ``what`` and the text. Never negative (a sign is not part of the form)."""
    if not isinstance(text, str):
        raise InvalidType(f"{what} must be a duration as text ({SPELLING}), got {type(text).__name__}",
                          option=what)
    m = _TEXT.match(text)
    if not m:
        raise InvalidArgument(f"{what}: {text!r} is not a duration (use {SPELLING})", option=what, value=text)
    return float(m.group(1)) * UNITS[m.group(2) or "s"]


def seconds(value: Any, what: str, *, positive: bool = False, minimum: float = 0.0,
            maximum: float = MAX_SECONDS) -> float:
    """A duration in seconds from a number of seconds, a :class:`~datetime.timedelta` or the text
    form (:func:`parse`). Finite, at least ``minimum`` (and above zero when ``positive``), at most
    ``maximum``; ``bool`` is refused (``True`` is not one second)."""
    if isinstance(value, str):
        out = parse(value, what)
    elif isinstance(value, _dt.timedelta):
        out = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidType(f"{what} must be a duration ({SPELLING}, or a timedelta), got {value!r}",
                          option=what)
    else:
        out = float(value)
    if not math.isfinite(out) or out < 0:
        raise InvalidArgument(f"{what} must be a finite duration >= 0 seconds, got {value!r}", option=what,
                              value=repr(value))
    if positive and out <= 0:
        raise InvalidArgument(f"{what} must be more than 0 seconds, got {value!r}", option=what, value=repr(value))
    if out < minimum:
        raise InvalidArgument(f"{what} must be at least {minimum:g} s, got {value!r}", option=what,
                              value=repr(value))
    if out > maximum:
        raise InvalidArgument(f"{what} must be at most {maximum:.0f} s, got {value!r}", option=what,
                              value=repr(value))
    return out


def optional_seconds(value: Any, what: str, **bounds: Any) -> float | None:
    """:func:`seconds`, or None for None."""
    return None if value is None else seconds(value, what, **bounds)


def ms(value: Any, what: str, *, positive: bool = False) -> int | None:
    """Whole milliseconds (what the store's columns hold) of a user-facing duration given as
    seconds, a :class:`~datetime.timedelta` or the text form, or None for None: the one reading
    of every enqueue, queue, retry and snooze duration (:func:`seconds`' errors). ``positive``:
    anything under 1 ms is refused (TN1001) rather than read as "none" - omit the option for none."""
    if value is None:
        return None
    if type(value) is int and 0 <= value <= _MAX_INT_SECONDS and (value or not positive):
        return value * 1000  # the common case (a whole number of seconds) without the general checks
    out = int(seconds(value, what, maximum=MAX_SECONDS) * 1000)
    if positive and out < 1:
        raise InvalidArgument(f"{what} must be at least 1 ms, got {value!r}; omit it for none", option=what,
                              value=repr(value))
    return out


_MAX_INT_SECONDS = int(MAX_SECONDS)


def to_ms(value: float) -> int:
    """Whole milliseconds of a duration in seconds (what the store's columns hold)."""
    return int(round(value * 1000))


def renamed_ms(options: dict[str, Any], renames: Mapping[str, str], where: str) -> dict[str, Any]:
    """``options`` with each deprecated ``<name>_ms`` key of ``renames`` (old -> new) replaced by
    its new name in seconds, warning once per call with a :class:`DeprecationWarning` that names
    the replacement. Giving both names is :class:`InvalidArgument`; an old value that is not a
    number of ms (or None) is :class:`InvalidType` naming the old name. The one helper every
    surface uses for its old names (docs/architecture.md, "Units")."""
    for old, new in renames.items():
        if old not in options:
            continue
        if new in options:
            raise InvalidArgument(f"{where}: give {new}= (seconds) or the deprecated {old}=, not both", option=old)
        value = options.pop(old)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise InvalidType(f"{old} must be a number of milliseconds, got {value!r}; use {new}= in seconds",
                              option=old)
        warnings.warn(f"{old}= is deprecated: use {new}= (seconds, a timedelta or text like '30s'); "
                      f"{old}={value!r} is read as {new}={None if value is None else value / 1000!r}",
                      DeprecationWarning, stacklevel=_outside_tenure())
        options[new] = None if value is None else value / 1000
    return options


def _outside_tenure() -> int:
    """The ``stacklevel`` of the first caller outside the ``tenure`` package (so a deprecation
    warning points at the user's line, however many layers it went through)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tenure"):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def accepts_ms_names(renames: Mapping[str, str]) -> Callable[[type[T]], type[T]]:
    """A class decorator for a configuration dataclass whose ``_ms`` fields were renamed (old ->
    new, now in seconds): its constructor still takes the old names (through :func:`renamed_ms`:
    a warning, then the value in seconds), and reading an old name answers the value in ms with a
    warning. The fields themselves carry only the new names."""

    def decorate(cls: type[T]) -> type[T]:
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **renamed_ms(kwargs, renames, cls.__name__))

        cls.__init__ = __init__  # type: ignore[method-assign]
        for old, new in renames.items():
            setattr(cls, old, property(_old_reader(old, new), doc=f"Deprecated: ``{new}`` in ms."))
        return cls

    return decorate


def _old_reader(old: str, new: str) -> Callable[[Any], int | None]:
    def read(self: Any) -> int | None:
        warnings.warn(f"{old} is deprecated: read {new} (seconds)", DeprecationWarning, stacklevel=_outside_tenure())
        value = getattr(self, new)
        return None if value is None else to_ms(value)
    return read
