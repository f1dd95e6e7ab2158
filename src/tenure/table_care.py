"""The jobs table's upkeep: when the maintenance leader vacuums or analyzes it (PostgreSQL).

A queue table is all churn: every claim and every settlement leaves a dead row version, and a
burst of enqueues leaves the planner's statistics describing a table that no longer exists.
PostgreSQL's autovacuum handles both, with the storage parameters migration 0003 sets on
``tenure_jobs``; where it is off (server-wide, or ``autovacuum_enabled = false`` on the table) or
falls behind, the leader does the same work itself (:meth:`tenure.maintenance.Maintainer.vacuum_jobs`):

* **off**: it applies autovacuum's own rule with the table's own settings (threshold + scale
  factor x live rows, for dead tuples, for inserts since the last vacuum, and for rows changed
  since the last analyze), so the table gets what autovacuum would have given it -- except that
  the dead-tuple trigger never exceeds a row cap (``vacuum_max_dead`` of the maintenance config,
  :data:`tenure.maintenance.DEFAULT_VACUUM_MAX_DEAD`): a fraction of a 100 000 000-row table is
  millions of dead rows, every one of them walked by claims and kept from reuse until a vacuum
  (PostgreSQL 18's ``autovacuum_vacuum_max_threshold`` is the same idea for autovacuum);
* **on**: it acts only when the table is :data:`BEHIND_FACTOR` times past those same (capped)
  triggers (autovacuum is falling behind a hot queue), so it never competes with a healthy
  autovacuum.

A vacuum (``VACUUM (ANALYZE, INDEX_CLEANUP ON, TRUNCATE false)``, which also analyzes, cleans the
indexes even of a large table with few dead rows, and never takes the ACCESS EXCLUSIVE lock of a
truncation) is chosen over a plain ``ANALYZE`` when both are due. At most one of them runs per ``vacuum_interval`` seconds of the store's clock, whoever
asks (the background loop, ``run_once``, ``tenure maintain --once``), unless forced. Each run is
logged (``tenure.maintenance``, INFO, with the numbers that triggered it) and counted
(``stats()["vacuums"]`` / ``["analyzes"]``; ``tenure_maintenance_vacuums_total`` /
``..._analyzes_total`` in :mod:`tenure.metrics`).

SQLite has nothing to reclaim (deleted pages go to the file's freelist and are reused by the next
inserts) and its statements name their indexes, so there the duty reads nothing and does nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from .engine.rows import TableStats

log = logging.getLogger("tenure.maintenance")

#: Autovacuum's own defaults (PostgreSQL 13+), used when neither the server nor the table says.
DEFAULTS: dict[str, float] = {
    "autovacuum_vacuum_threshold": 50, "autovacuum_vacuum_scale_factor": 0.2,
    "autovacuum_vacuum_insert_threshold": 1000, "autovacuum_vacuum_insert_scale_factor": 0.2,
    "autovacuum_analyze_threshold": 50, "autovacuum_analyze_scale_factor": 0.1,
}
#: With autovacuum on, the backstop waits until the table is this many times past autovacuum's
#: trigger: only a falling-behind autovacuum leaves it that far.
BEHIND_FACTOR = 10

Action = Literal["vacuum", "analyze"]


@dataclass(frozen=True, slots=True)
class TableHealth:
    """What the statistics collector says of ``tenure_jobs``, and the autovacuum settings that
    apply to it (the table's storage parameters over the server's)."""

    dead: int
    live: int
    #: Rows inserted since the last vacuum, and rows changed since the last analyze.
    inserted: int
    modified: int
    #: True when autovacuum would process this table (server setting and table parameter).
    autovacuum: bool
    settings: dict[str, float]
    #: The most dead tuples the dead-tuple trigger ever asks for, whatever the live rows (None:
    #: no cap, autovacuum's fraction alone).
    max_dead: int | None = None

    def _trigger(self, name: str) -> float:
        s = self.settings
        return s[f"autovacuum_{name}_threshold"] + s[f"autovacuum_{name}_scale_factor"] * self.live

    def due(self) -> tuple[Action | None, str]:
        """The action this table needs now (None: none) and why, in words for the log."""
        factor = 1 if not self.autovacuum else BEHIND_FACTOR
        trigger, cap = self._trigger("vacuum"), self.max_dead
        capped = cap is not None and cap < trigger
        vacuum = (min(trigger, cap) if cap is not None else trigger) * factor
        insert = self._trigger("vacuum_insert") * factor
        analyze = self._trigger("analyze") * factor
        mode = "autovacuum off" if not self.autovacuum else f"autovacuum {factor}x behind"
        if self.dead > vacuum:
            why = f"the cap of {cap} dead tuples, " if capped else ""
            return "vacuum", f"{self.dead} dead tuples for {self.live} live (> {vacuum:.0f}, {why}{mode})"
        if self.settings["autovacuum_vacuum_insert_threshold"] >= 0 and self.inserted > insert:  # -1: off
            return "vacuum", f"{self.inserted} rows inserted since the last vacuum (> {insert:.0f}, {mode})"
        if self.modified > analyze:
            return "analyze", f"{self.modified} rows changed since the last analyze (> {analyze:.0f}, {mode})"
        return None, "healthy"


def health_from(row: tuple, reloptions: list[str] | None, max_dead: int | None = None) -> TableHealth:
    """:func:`health_of` the statistics ``(dead, live, inserted, modified, autovacuum_on,
    {setting: value})`` and the table's ``reloptions`` (``name=value`` texts)."""
    dead, live, inserted, modified, server_on, server = row
    return health_of(TableStats(dead, live, inserted, modified, server_on, server, reloptions), max_dead)


def health_of(stats: TableStats, max_dead: int | None = None) -> TableHealth:
    """Build a :class:`TableHealth` from the jobs table's statistics (``Session.jobs_table_stats``),
    its dead-tuple trigger capped at ``max_dead`` (None: no cap)."""
    settings = dict(DEFAULTS)
    settings.update({k: float(v) for k, v in stats.settings.items() if k in DEFAULTS and v is not None})
    enabled = True
    for opt in stats.reloptions or ():
        name, _, value = opt.partition("=")
        if name in DEFAULTS:
            settings[name] = float(value)
        elif name == "autovacuum_enabled":
            enabled = value.lower() in ("true", "on", "1", "yes")
    return TableHealth(int(stats.dead or 0), int(stats.live or 0), int(stats.inserted or 0),
                       int(stats.modified or 0), bool(stats.autovacuum_on) and enabled, settings, max_dead)


class TableCare:
    """The frequency bound of the upkeep of one store's jobs table (one per maintenance service)."""

    def __init__(self) -> None:
        #: The store-clock time (epoch ms) of the last vacuum or analyze this service ran.
        self.last_at: int | None = None

    def too_soon(self, now: int, interval_s: float) -> bool:
        """True when the last run is less than ``interval_s`` seconds (store clock) before ``now``."""
        return self.last_at is not None and now - self.last_at < interval_s * 1000
