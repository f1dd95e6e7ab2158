"""The claim of ONE limited queue, written once for both dialects (limits, rates,
fairness and strict order; user guide: ``docs/queues.md``).

A queue is *limited* when its claim needs an exact view of what other processes do: a
``concurrency_limit`` or ``group_limit`` (live leases counted), a ``rate_limit`` or
``group_rate_limit`` (recent starts counted, :mod:`tenure.rate_window`), ``fairness`` (which group
was served last), or a policy the claim enforces (``singleton``, ``stately``, ``strict_fifo``).
Each dialect claims such a queue inside one transaction that no other claimer of the queue can
interleave with (SQLite: its single writer; PostgreSQL: the queue's advisory lock, held to the
end of the transaction), and calls :func:`claim_queue` there with a :class:`LimitedClaimer`, the
few statements it needs. Everything :func:`claim_queue` reads is therefore current and everything
it writes is seen by the next claimer: the limits hold across processes and hosts.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..rate_window import GROUP_SCOPE, QUEUE_SCOPE, Rate, Window, blocked_until, load
from .rows import JobRow, QueueRow

#: How far a group of weight 1 moves in the round-robin's virtual time when it is served; a group
#: of weight w moves STRIDE // w (MAX_WEIGHT divides it evenly up to 1 000).
STRIDE = 1_000_000


#: The policies under which a job waits while another job's lease stands (its key's, or an earlier
#: one's): a lease settling can make it claimable, as it can under a concurrency or group limit.
HOLDING_POLICIES = frozenset({"singleton", "stately", "strict_fifo"})


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """What makes one queue limited, from its registry row."""

    name: str
    concurrency_limit: int | None = None
    group_limit: int | None = None
    rate: Rate | None = None
    group_rate: Rate | None = None
    fairness: str | None = None
    #: Round-robin weights by group key (others weigh 1).
    weights: dict[str, int] | None = None

    @property
    def one_at_a_time(self) -> bool:
        """Each claim statement takes one job: the next must see the group it filled."""
        return self.group_limit is not None or self.group_rate is not None or self.fairness is not None


class LimitedClaimer(Protocol):
    """The statements :func:`claim_queue` needs, in the dialect's transaction."""

    def leased_count(self, queue: str, now: int) -> int:
        """Live leases of the queue."""

    def saturated_groups(self, queue: str, now: int, group_limit: int) -> list[str]:
        """The group keys of the queue holding ``group_limit`` or more live leases."""

    def windows(self, queue: str, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], tuple[str, int]]:
        """``{(scope, group_key): (starts, turn)}`` of the window rows that exist."""

    def save_windows(self, queue: str, rows: Sequence[tuple[int, str, str, int, int]]) -> None:
        """Upsert ``(scope, group_key, starts, blocked_until, turn)`` rows."""

    def fair_groups(self, queue: str, now: int) -> list[tuple[str, int]]:
        """``(group_key, turn)`` of the groups with queued jobs in the queue whose group rate
        window is open, lowest turn first (never served: 0), then by key."""

    def next_group_open(self, queue: str, now: int) -> int | None:
        """The earliest ``blocked_until`` after ``now`` among the queue's group windows."""

    def claim(self, queue: str, want: int, *, full_groups: list[str] | None, group: str | None,
              group_rate: bool, revive: bool) -> tuple[list[JobRow], bool]:
        """Lease up to ``want`` eligible jobs of the queue (the dialect's limited claim statement:
        singleton and strict_fifo policies, groups in ``full_groups`` skipped, only ``group`` when
        given, groups whose rate window is closed skipped when ``group_rate``). Answers the rows
        and whether the one row is an expired lease leased again (it then runs alone)."""


@dataclass(slots=True)
class Outcome:
    """What :func:`claim_queue` leased, and when a rate limit that stopped it opens again."""

    rows: list[JobRow] = field(default_factory=list)
    reclaimed: bool = False
    wake_at: int | None = None


def _window(c: LimitedClaimer, lim: QueueLimits, cache: dict[tuple[int, str], Window],
            scope: int, key: str) -> Window:
    w = cache.get((scope, key))
    if w is None:
        got = c.windows(lim.name, [(scope, key)]).get((scope, key))
        rate = lim.rate if scope == QUEUE_SCOPE else lim.group_rate
        w = Window(scope, key, rate, load(got[0]) if got else [], got[1] if got else 0)
        cache[(scope, key)] = w
    return w


def claim_queue(c: LimitedClaimer, lim: QueueLimits, now: int, limit: int, *, revive: bool) -> Outcome:  # noqa: C901 - one branch per kind of limit, in the order they bind
    """Lease up to ``limit`` jobs of one limited queue, at ``now``, within every limit it has.

    - ``concurrency_limit``: never more live leases than the limit;
    - ``group_limit``: groups at their limit skipped (counted again before each statement);
    - ``rate_limit``: no more starts than the queue's window allows at ``now``;
    - ``group_rate_limit``: groups whose window is closed skipped (in SQL, one probe each), and a
      group whose window this claim fills skipped by the next statement;
    - ``fairness="round_robin"``: the groups with queued jobs are tried lowest turn first, one job
      each; serving a group moves its turn on by ``STRIDE // weight`` from the queue's virtual
      time (stride scheduling), so groups take turns, a group of weight w w times as often.

    The window rows the claim used are written back (starts recorded at ``now``) before it
    returns, in the caller's transaction. ``wake_at``: when nothing more could start because of a
    rate limit, the first instant one may (a worker sleeps until then instead of polling)."""
    out = Outcome()
    cache: dict[tuple[int, str], Window] = {}
    qwin = None
    if lim.rate is not None or lim.fairness is not None:
        qwin = _window(c, lim, cache, QUEUE_SCOPE, "")
        if lim.rate is not None and qwin.allowance(now) <= 0:
            out.wake_at = qwin.next_open(now)
            return out
    # fairness: the groups as a heap of (turn, key); serving one moves its turn on by STRIDE over
    # its weight from the queue's virtual time (stride scheduling: weight w, w times as often).
    order: list[tuple[int, str]] | None = None
    if lim.fairness:
        order = [(turn, key) for key, turn in c.fair_groups(lim.name, now)]
        heapq.heapify(order)
    closed: list[str] = []  # groups whose rate window this claim filled
    touched: dict[str, Window] = {}
    while len(out.rows) < limit:
        want = limit - len(out.rows)
        if lim.concurrency_limit is not None:
            leased = c.leased_count(lim.name, now)
            if leased >= lim.concurrency_limit:
                break
            want = min(want, lim.concurrency_limit - leased)
        if qwin is not None and lim.rate is not None:
            room = qwin.allowance(now)
            if room <= 0:
                out.wake_at = qwin.next_open(now)
                break
            want = min(want, room)
        if lim.one_at_a_time:
            want = 1
        full: list[str] | None = None
        if lim.group_limit is not None:
            full = c.saturated_groups(lim.name, now, lim.group_limit)
        if closed:
            full = (full or []) + closed
        group = None
        if order is not None:
            skip = set(full or ())
            while order and order[0][1] in skip:
                heapq.heappop(order)
            group = order[0][1] if order else None
        rows, reclaimed = c.claim(lim.name, want, full_groups=full, group=group,
                                  group_rate=lim.group_rate is not None, revive=revive and not out.rows)
        if not rows:
            if order is not None and group is not None:
                heapq.heappop(order)  # nothing of it is due (or eligible): the next group
                continue
            if lim.group_rate is not None and not out.rows:
                out.wake_at = c.next_group_open(lim.name, now)
            break
        out.rows.extend(rows)
        for r in rows:
            if qwin is not None:
                qwin.started += 1
            key = r.group_key
            if key is not None and (lim.group_rate is not None or lim.fairness is not None):
                w = _window(c, lim, cache, GROUP_SCOPE, key)
                w.started += 1
                touched[key] = w
                if lim.fairness is not None and qwin is not None:
                    base = max(w.turn, qwin.turn)
                    qwin.turn = base  # the queue's virtual time: the turn of the group served last
                    w.turn = base + STRIDE // (lim.weights or {}).get(key, 1)
                if lim.group_rate is not None and w.allowance(now) <= 0 and key not in closed:
                    closed.append(key)
        if order is not None and group is not None and order and order[0][1] == group:
            served = touched.get(group)
            heapq.heapreplace(order, (served.turn if served is not None else order[0][0] + STRIDE, group))
        if reclaimed:
            out.reclaimed = True
            break  # an expired lease leased again runs alone
        if len(rows) < want:
            break
    save = [w.row(now) for w in cache.values() if w.started or w.scope == QUEUE_SCOPE and w.turn]
    if save:
        c.save_windows(lim.name, save)
    return out


def record_starts(c: LimitedClaimer, lim: QueueLimits, now: int, rows: Sequence[JobRow]) -> None:
    """Count ``rows``, leased outside :func:`claim_queue` (an expired lease leased again by the
    dialect's reclaim, which skipped closed windows), as starts of ``lim``'s rate windows."""
    cache: dict[tuple[int, str], Window] = {}
    for r in rows:
        if lim.rate is not None:
            _window(c, lim, cache, QUEUE_SCOPE, "").started += 1
        if lim.group_rate is not None and r.group_key is not None:
            _window(c, lim, cache, GROUP_SCOPE, r.group_key).started += 1
    save = [w.row(now) for w in cache.values() if w.started]
    if save:
        c.save_windows(lim.name, save)


def queue_rates(row: QueueRow) -> tuple[Rate | None, Rate | None]:
    """The queue's own rate and its per-group rate from its registry row (None where unset)."""
    rate = None if row.rate_limit is None or row.rate_period_ms is None else Rate(row.rate_limit, row.rate_period_ms)
    group = None if row.group_rate_limit is None or row.group_rate_period_ms is None else \
        Rate(row.group_rate_limit, row.group_rate_period_ms)
    return rate, group


def rewindowed(rows: Sequence[tuple], rate: Rate | None, group_rate: Rate | None) -> list[tuple[int, str, str, int, int]]:
    """The queue's window rows ``(scope, group_key, starts, blocked_until, turn)`` with
    ``blocked_until`` recomputed for new rates (a changed limit binds from the next claim; the
    starts already recorded keep counting against it)."""
    out = []
    for scope, key, starts, _, turn in rows:
        r = rate if scope == QUEUE_SCOPE else group_rate
        out.append((scope, key, starts, 0 if r is None else blocked_until(load(starts), r), turn))
    return out
