"""Rate limits: "N starts per period", exact over every sliding window (user guide:
``docs/queues.md``, "Rate limits").

A queue's ``rate_limit`` (and each group's ``group_rate_limit``) is kept in a *window row*
(``tenure_rate_windows``): the recent claim starts as a short list of ``[at, count]`` pairs, and
``blocked_until``, the first instant a start is allowed again. The claim of a rate-limited queue
reads and rewrites these rows under the same serialisation that makes ``concurrency_limit`` exact
(the queue's advisory lock on PostgreSQL, the one write transaction on SQLite), so the rule holds
whatever the number of workers and hosts:

    no more than N claims in any half-open window ``(t - period, t]``.

A start is allowed at ``t`` only when fewer than N recorded starts are later than ``t - period``.
Starts are recorded at ``t`` rounded UP to a granule of ``period / GRANULES`` (at least 1 ms), so
a window row never holds more than ``GRANULES + 1`` pairs however large N is. Rounding up only
keeps a start in the windows longer than it really is (it can delay the next start by at most a
granule, 1.6 % of the period), never shorter, so the rule above still holds exactly: at each
start ``t`` every real start in ``(t - period, t]`` was counted.

This module is pure arithmetic over those rows (no SQL, no clock of its own): the engines call it
from their claims, and the tests drive it with an injected clock.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRateLimit, InvalidType

#: Pairs a window row holds at most (plus one): the period is cut into this many granules.
GRANULES = 64
#: Largest N of a rate limit.
MAX_RATE = 1_000_000
#: Period units a rate limit may name, in milliseconds.
UNITS: dict[str, int] = {"ms": 1, "s": 1_000, "sec": 1_000, "min": 60_000, "m": 60_000, "h": 3_600_000,
                         "hour": 3_600_000, "d": 86_400_000, "day": 86_400_000}
_CANONICAL = {1_000: "s", 60_000: "min", 3_600_000: "h", 86_400_000: "d"}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*$")

#: Scope of a window row: the queue as a whole, or one ``group_key`` of it.
QUEUE_SCOPE = 0
GROUP_SCOPE = 1


@dataclass(frozen=True, slots=True)
class Rate:
    """A parsed rate limit: ``limit`` starts per ``period_ms`` milliseconds."""

    limit: int
    period_ms: int

    def __str__(self) -> str:
        return format_rate(self.limit, self.period_ms)


def parse_rate(value: Any, what: str = "rate_limit") -> Rate | None:
    """``"100/s"``, ``"6000/min"``, ``"10/h"`` (also ``"5/10s"``, ``"1/d"``, ``"/ms"``) -> a
    :class:`Rate`; None stays None (no limit). Anything else is refused with
    :class:`InvalidRateLimit` (TN3004); a value that is not a string with :class:`InvalidType`."""
    if value is None:
        return None
    if isinstance(value, Rate):
        return value
    if not isinstance(value, str):
        raise InvalidType(f"{what} must be a string such as '100/s', '6000/min' or '10/h', got {value!r}")
    m = _RATE.match(value.lower())
    if m is None or m.group(3) not in UNITS:
        raise InvalidRateLimit(f"{what} {value!r} is not a rate: write N/s, N/min or N/h (for example "
                               "'100/s'), optionally with a count of units ('5/10s')", value=value)
    n, times = int(m.group(1)), int(m.group(2) or 1)
    period = times * UNITS[m.group(3)]
    if not 1 <= n <= MAX_RATE:
        raise InvalidRateLimit(f"{what} {value!r}: the number of starts must be 1 to {MAX_RATE:,}", value=value)
    if not 1 <= period <= 7 * 86_400_000:
        raise InvalidRateLimit(f"{what} {value!r}: the period must be 1 ms to 7 days", value=value)
    return Rate(n, period)


def format_rate(limit: int, period_ms: int) -> str:
    """The canonical text of a rate: ``"50/s"``, ``"10/min"``, ``"3/h"``, ``"5/10s"``, ``"7/250ms"``."""
    if period_ms in _CANONICAL:
        return f"{limit}/{_CANONICAL[period_ms]}"
    for ms, unit in sorted(_CANONICAL.items(), reverse=True):
        if period_ms % ms == 0:
            return f"{limit}/{period_ms // ms}{unit}"
    return f"{limit}/{period_ms}ms"


def stored_rate_text(limit: int | None, period_ms: int | None) -> str | None:
    """:func:`format_rate` of a rate as a registry row stores it; None when it is unset."""
    return None if limit is None or period_ms is None else format_rate(limit, period_ms)


def granule(period_ms: int) -> int:
    """The rounding step of recorded starts for this period."""
    return max(1, period_ms // GRANULES)


def load(starts: str | None) -> list[list[int]]:
    """A window row's ``starts`` text -> ``[[at, count], ...]``, oldest first."""
    return json.loads(starts) if starts else []


def dump(pairs: list[list[int]]) -> str:
    return json.dumps(pairs, separators=(",", ":"))


def in_window(pairs: list[list[int]], now: int, period_ms: int) -> int:
    """Starts counted against a start at ``now``: those recorded later than ``now - period``."""
    edge = now - period_ms
    return sum(c for at, c in pairs if at > edge)


def allowance(pairs: list[list[int]], now: int, rate: Rate) -> int:
    """How many more starts the window allows at ``now`` (0 when at its limit)."""
    return max(0, rate.limit - in_window(pairs, now, rate.period_ms))


def blocked_until(pairs: list[list[int]], rate: Rate) -> int:
    """The first instant at which one more start is allowed (0: it is allowed now, whatever now
    is): the N-th most recent recorded start plus the period."""
    seen = 0
    for at, c in reversed(pairs):
        seen += c
        if seen >= rate.limit:
            return at + rate.period_ms
    return 0


def record(pairs: list[list[int]], now: int, count: int, rate: Rate) -> list[list[int]]:
    """The pairs after ``count`` starts at ``now``: the ones no longer in any window dropped, the
    new starts added at ``now`` rounded up to the granule (merged with the last pair when it is
    the same instant)."""
    edge = now - rate.period_ms
    out = [list(p) for p in pairs if p[0] > edge]
    if count > 0:
        g = granule(rate.period_ms)
        at = -(-now // g) * g
        if out and out[-1][0] >= at:  # never moves a recorded start earlier
            out[-1][1] += count
        else:
            out.append([at, count])
    return out


@dataclass(slots=True)
class Window:
    """One window row being used by a claim: its pairs, its fairness turn, and how many starts
    the claim adds. ``rate`` None: the row only carries a turn (a fair queue without a rate)."""

    scope: int
    group_key: str
    rate: Rate | None
    pairs: list[list[int]]
    turn: int = 0
    started: int = 0

    def allowance(self, now: int) -> int:
        """Starts still allowed at ``now`` after this claim's own."""
        if self.rate is None:
            return MAX_RATE
        return allowance(self.pairs, now, self.rate) - self.started

    def recorded(self, now: int) -> list[list[int]]:
        """The pairs with this claim's starts recorded at ``now``."""
        return self.pairs if self.rate is None else record(self.pairs, now, self.started, self.rate)

    def next_open(self, now: int) -> int:
        """When a start is allowed again, counting this claim's starts."""
        return now if self.rate is None else next_open(self.recorded(now), now, self.rate)

    def row(self, now: int) -> tuple[int, str, str, int, int]:
        """``(scope, group_key, starts, blocked_until, turn)`` to store after the claim."""
        if self.rate is None:
            return self.scope, self.group_key, "[]", 0, self.turn
        pairs = self.recorded(now)
        return self.scope, self.group_key, dump(pairs), blocked_until(pairs, self.rate), self.turn


def next_open(pairs: list[list[int]], now: int, rate: Rate) -> int:
    """When a window at its limit at ``now`` allows a start again (``now`` if it already does)."""
    return max(now, blocked_until(record(pairs, now, 0, rate), rate))
