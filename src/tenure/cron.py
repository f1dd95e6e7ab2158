"""Cron expressions: validation and DST-correct fire times, on top of ``croniter`` and ``zoneinfo``.

A schedule is five fields (minute, hour, day-of-month, month, day-of-week) or an alias
(``@hourly``, ``@daily``/``@midnight``, ``@weekly``, ``@monthly``, ``@yearly``/``@annually``),
read as WALL-CLOCK time in an IANA zone. ``croniter`` matches the fields against naive local
times; this module maps each match to real instants (epoch ms) with ``zoneinfo``, which is where
daylight-saving time is decided:

* **A wall time that does not exist** (spring forward: 02:30 on Europe/Paris 2026-03-29) fires
  once, at the transition instant (03:00 local, the first moment after the skipped time).
* **A wall time that happens twice** (fall back: 02:30 on Europe/Paris 2026-10-25) fires once,
  at its first occurrence.
* **Exception: schedules whose hour field is ``*``** (every hour or more often) follow elapsed
  time instead: a skipped hour has no fires (the next hour comes anyway) and a repeated hour fires
  again in its second pass, so ``*/10 * * * *`` keeps firing every ten real minutes.

Every boundary is one instant, so two wall times that land on the same instant (a skipped 02:30
and a real 03:00) make one fire, not two.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from . import _validate
from .errors import InvalidSchedule

try:  # croniter is a core dependency; the import is guarded only to give a clear message
    from croniter import CroniterBadDateError, croniter
except ImportError as _exc:  # pragma: no cover
    raise ImportError("tenure's cron schedules need croniter: pip install croniter") from _exc

#: The five fields, in order, as error messages name them.
FIELDS: tuple[str, ...] = ("minute", "hour", "day-of-month", "month", "day-of-week")
#: Aliases and the five-field expression each stands for.
ALIASES: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
#: How far before ``after`` the search starts when a UTC-offset change is near: the longest
#: daylight-saving shift in the tz database is two hours (Antarctica/Troll).
_MARGIN = _dt.timedelta(hours=3)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_MAX_EXPR = 200


def _to_dt(ms: int) -> _dt.datetime:
    return _EPOCH + _dt.timedelta(milliseconds=ms)


def _to_ms(when: _dt.datetime) -> int:
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


@lru_cache(maxsize=256)
def zone(tz: str) -> ZoneInfo:
    """The IANA zone ``tz``; :class:`InvalidSchedule` naming ``tz`` when it is unknown."""
    if not isinstance(tz, str) or not tz:
        raise InvalidSchedule(f"tz must be an IANA time zone name such as 'Europe/Paris', got {tz!r}",
                              field="tz")
    _validate.time_zone(tz)  # host-dependent names (``localtime``) are refused
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidSchedule(f"tz {tz!r} is not a known IANA time zone (e.g. 'UTC', 'Europe/Paris')",
                              field="tz") from None


@dataclass(frozen=True)
class Cron:
    """A parsed, validated schedule in one zone. Build it with :func:`parse`."""

    expression: str
    fields: tuple[str, ...]
    tz: str
    zone: ZoneInfo = field(repr=False, compare=False)
    #: The hour field matches every hour: fires follow elapsed time across DST (module docstring).
    hourly: bool = field(repr=False, compare=False)

    @property
    def spec(self) -> str:
        """The five fields as croniter reads them."""
        return " ".join(self.fields)

    # -- instants ----------------------------------------------------------------------------
    def _instants(self, wall: _dt.datetime) -> list[_dt.datetime]:
        """The UTC instant(s) at which the naive local time ``wall`` fires (0, 1 or 2)."""
        first = wall.replace(tzinfo=self.zone, fold=0).astimezone(_dt.UTC)
        second = wall.replace(tzinfo=self.zone, fold=1).astimezone(_dt.UTC)
        if first == second:
            return [first]
        if first.astimezone(self.zone).replace(tzinfo=None) == wall:  # it happens twice
            early, late = sorted((first, second))
            return [early, late] if self.hourly else [early]
        if self.hourly:  # it never happens: an hourly schedule skips it
            return []
        return [self._transition(min(first, second), max(first, second))]

    def _transition(self, before: _dt.datetime, after: _dt.datetime) -> _dt.datetime:
        """The instant the UTC offset changes, in ``(before, after]`` (tz transitions fall on
        whole seconds, so a bisection to the second finds it exactly)."""
        one = _dt.timedelta(seconds=1)
        lo, hi = before, after
        lo_offset = lo.astimezone(self.zone).utcoffset()
        while hi - lo > one:
            mid = max((lo + (hi - lo) / 2).replace(microsecond=0), lo + one)
            if mid.astimezone(self.zone).utcoffset() == lo_offset:
                lo = mid
            else:
                hi = mid
        return hi

    def _shift_near(self, at: _dt.datetime) -> _dt.timedelta:
        """How far the UTC offset moves within :data:`_MARGIN` of ``at`` (zero almost always): a
        search starting inside a repeated hour must look back that far for its second pass."""
        offsets = [
            off
            for d in (-_MARGIN, _dt.timedelta(0), _MARGIN)
            if (off := (at + d).astimezone(self.zone).utcoffset()) is not None  # always, for an aware zone
        ]
        return max(offsets) - min(offsets)

    def next_after(self, after_ms: int) -> int | None:
        """The first fire instant strictly after ``after_ms`` (epoch ms), or None if the
        expression never fires again."""
        after = _to_dt(after_ms)
        wall = after.astimezone(self.zone).replace(tzinfo=None)
        start = wall - self._shift_near(after)
        it = croniter(self.spec, start)
        best: _dt.datetime | None = None
        while True:
            try:
                candidate = it.get_next(_dt.datetime)
            except CroniterBadDateError:
                break
            instants = self._instants(candidate)
            if best is not None and instants and instants[0] >= best:
                break  # the earliest instant of each later wall time only grows
            for at in instants:
                if at > after and (best is None or at < best):
                    best = at
            if best is None and candidate - wall > _dt.timedelta(days=366 * 8):
                break  # pragma: no cover - croniter gives up first
        return None if best is None else _to_ms(best)

    def fires(self, first_ms: int, until_ms: int, limit: int) -> list[int]:
        """Up to ``limit`` fire instants ``t`` with ``first_ms <= t <= until_ms``, in order."""
        out: list[int] = []
        at = self.next_after(first_ms - 1)
        while at is not None and at <= until_ms and len(out) < limit:
            out.append(at)
            at = self.next_after(at)
        return out

    def latest(self, not_before_ms: int, now_ms: int) -> int | None:
        """The last fire instant in ``[not_before_ms, now_ms]``, or None if there is none."""
        window = 3_600_000
        while True:
            start = max(not_before_ms, now_ms - window)
            at = self.next_after(start - 1)
            if at is not None and at <= now_ms:
                last = at
                while True:
                    nxt = self.next_after(last)
                    if nxt is None or nxt > now_ms:
                        return last
                    last = nxt
            if start <= not_before_ms:
                return None
            window *= 8


def parse(expression: str, tz: str = "UTC") -> Cron:
    """Validate ``expression`` in zone ``tz``. Raises :class:`InvalidSchedule` whose message (and
    ``field`` attribute) names the bad part: ``cron``, one of :data:`FIELDS`, or ``tz``."""
    if not isinstance(expression, str):
        raise InvalidSchedule(f"cron must be a string, got {type(expression).__name__}", field="cron")
    text = " ".join(expression.split())
    if not text or len(text) > _MAX_EXPR:
        raise InvalidSchedule(f"cron must be five fields or an alias such as @daily, got {expression!r}",
                              field="cron")
    zi = zone(tz)
    if text.startswith("@"):
        spec = ALIASES.get(text.lower())
        if spec is None:
            raise InvalidSchedule(f"unknown cron alias {text!r}; use one of {', '.join(ALIASES)}",
                                  field="cron")
        parts = spec.split()
    else:
        parts = text.split()
        if len(parts) != 5:
            raise InvalidSchedule(
                f"cron {text!r} has {len(parts)} field(s); tenure takes exactly five "
                f"({' '.join(FIELDS)}) or an alias such as @hourly", field="cron")
        for i, part in enumerate(parts):
            probe = ["*"] * 5
            probe[i] = part
            if not croniter.is_valid(" ".join(probe)):
                raise InvalidSchedule(f"cron {text!r}: the {FIELDS[i]} field {part!r} is not valid",
                                      field=FIELDS[i])
        if not croniter.is_valid(" ".join(parts)):
            raise InvalidSchedule(f"cron {text!r} is not a valid expression", field="cron")
    try:
        hours = croniter.expand(" ".join(parts))[0][1]
    except Exception:  # noqa: BLE001 - is_valid accepted it; treat it as not hourly
        hours = [0]
    hourly = hours == ["*"] or sorted(hours) == list(range(24))
    cron = Cron(text, tuple(parts), tz, zi, hourly)
    try:
        croniter(cron.spec, _dt.datetime(2000, 1, 1)).get_next(_dt.datetime)
    except CroniterBadDateError:
        raise InvalidSchedule(f"cron {text!r} never fires: its day-of-month and month never meet "
                              f"(e.g. 31 in a 30-day month)", field="day-of-month") from None
    return cron
