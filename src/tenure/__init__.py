"""tenure: a durable job queue with fenced leases and exactly-once settlement.

Embedded on one SQLite file by default; PostgreSQL for many workers on many hosts, with the
same API and the same guarantees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import TenureError
from .handler_control import Discard, Retry, Snooze
from .records import STATES, Checkpoint, Claim, Job, Lease, Page, SweepResult, Undecodable
from .store import Store, connect

__all__ = [
    "STATES", "Checkpoint", "Claim", "Discard", "Job", "Lease", "Page", "Retry", "Snooze", "Store",
    "SweepResult", "TenureError", "Undecodable", "connect", "App", "JobContext", "chain", "group", "chord",
    "Results", "WorkerConfig",
]
__version__ = "0.1.0"

if TYPE_CHECKING:  # imported lazily at run time (below); type checkers see the real classes
    from .app import App
    from .canvas import Results, chain, chord, group
    from .worker import JobContext
    from .worker.config import WorkerConfig


def __getattr__(name: str) -> Any:
    if name == "App":
        from .app import App

        return App
    if name == "JobContext":  # what a task parameter is annotated with to receive the job context
        from .worker import JobContext

        return JobContext
    if name == "WorkerConfig":  # every worker option, validated once (docs/operations.md, "Units")
        from .worker.config import WorkerConfig

        return WorkerConfig
    if name in ("chain", "group", "chord", "Results"):  # the canvas (docs/composition.md)
        from . import canvas

        return getattr(canvas, name)
    raise AttributeError(name)
