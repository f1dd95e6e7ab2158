"""Helpers for the maintenance tests: cron schedules, leadership, the worker registry and the
sweeps. Every store test runs on SQLite and PostgreSQL through the root fixtures (``engine_url``,
``store``, ``other``), with the injected clock, so nothing here sleeps to wait for a lease or a
boundary; ``pg_store`` is the PostgreSQL-only one.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

import tenure
from tests.conftest import PG_URL, empty_pg, require_pg

PARIS = ZoneInfo("Europe/Paris")


def at(y: int, mo: int, d: int, h: int = 0, mi: int = 0, tz=PARIS, fold: int = 0) -> int:
    """Epoch ms of a wall time in ``tz`` (``fold=1``: the second of a repeated hour)."""
    return int(dt.datetime(y, mo, d, h, mi, tzinfo=tz, fold=fold).timestamp() * 1000)


def wall(ms: int, tz=PARIS) -> str:
    """``2026-03-29T03:00+02:00``: how a fire instant reads on the wall in ``tz``."""
    return dt.datetime.fromtimestamp(ms / 1000, tz).isoformat(timespec="minutes")


@pytest.fixture
def pg_store(clock, rand):
    """A PostgreSQL store (for PostgreSQL-only behaviour), tables emptied, clock injected."""
    require_pg()
    empty_pg()
    s = tenure.connect(PG_URL, clock=clock, random=rand)
    s.jobs  # noqa: B018
    yield s
    s.close(grace=1)


def fired(store, name: str | None = None) -> list[tuple[str, int]]:
    """``(job id, run_at)`` of every job a schedule enqueued (optionally one schedule), by run_at."""
    out, after = [], None
    while True:
        page = store.jobs.page(after=after, limit=1000)
        out += [(j.id, j.run_at) for j in page.items if j.id.startswith("cron:")]
        if page.next_after is None:
            break
        after = page.next_after
    if name is not None:
        out = [(i, r) for i, r in out if i.rsplit(":", 1)[0] in (f"cron:{name}",) or
               i.startswith(f"cron:{name}#")]
    return sorted(out, key=lambda x: x[1])


def step(store, clock, until: int, every_ms: int) -> int:
    """Move the clock to ``until`` in steps, firing due schedules at each; answers jobs fired."""
    n = 0
    while clock.now < until:
        clock.advance(min(every_ms, until - clock.now))
        n += store.schedules.fire_due()
    return n
