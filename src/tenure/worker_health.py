"""Zombie slots: a worker notices when handlers that were told to stop keep its slots.

A handler is asked to stop when it runs past its timeout, when its lease is lost, when an operator
cancels its job and when the worker stops (``ctx.cancelled`` is set; an async handler's task is
cancelled). Its attempt is settled at once, but a handler that ignores the request keeps running,
and keeps its slot, until it returns: Python cannot kill a thread. Such an attempt is a **zombie**
once it has been running ``zombie_grace`` seconds (default: the worker's ``stop_grace``) past the
request. The retries of ONE job that hangs and ignores cancellation are enough to fill every slot
of a worker, which then claims nothing while its process, its heartbeat and its supervisor all
look alive.

So the worker counts them: ``Worker.stats()`` has ``zombies`` and ``healthy``, the heartbeat row
carries both (its ``stats`` column), and ``/metrics`` has ``tenure_worker_zombies`` and
``tenure_worker_healthy``. When the zombies reach ``zombie_share`` of the slots (default half,
never fewer than one slot), the worker is **unhealthy**: ``App.run_worker`` stops it and raises
:class:`tenure.errors.WorkerUnhealthy` (TN2090), and ``tenure worker`` exits with status
:data:`EXIT_UNHEALTHY` (75, ``EX_TEMPFAIL``), so whatever supervises the process (the
``--processes`` supervisor, systemd, Kubernetes) starts a fresh one. The zombies' jobs were
settled already (a timeout fails its attempt at once), so nothing is lost with the process.

docs/guarantees.md ("Liveness: zombie slots and the handler transaction") states the promise and
names its tests (tests/worker/test_zombies.py, tests/cli/test_worker_health_cli.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import InvalidArgument, WorkerUnhealthy

if TYPE_CHECKING:
    from .worker import Attempt, Worker

#: The share of a worker's slots that zombies may take before the worker is unhealthy.
DEFAULT_ZOMBIE_SHARE = 0.5
#: ``tenure worker`` (and each supervised child) exits with this status when unhealthy
#: (``sysexits.h`` EX_TEMPFAIL: "try again": a fresh process will do).
EXIT_UNHEALTHY = 75


def check_share(share: object) -> float:
    """``share`` as a float in (0, 1], or :class:`InvalidArgument`."""
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
        raise InvalidArgument(
            f"zombie_share must be a number in (0, 1] (a share of the slots), got {share!r}"
        )
    return float(share)


def zombie_limit(concurrency: int, share: float) -> int:
    """How many zombies make a worker of ``concurrency`` slots unhealthy: ``share`` of its slots,
    rounded up, at least one."""
    return max(1, math.ceil(concurrency * share - 1e-9))


def is_zombie(attempt: Attempt, now: float, grace: float) -> bool:
    """True when the attempt's handler was asked to stop at least ``grace`` seconds ago and has
    not returned. A detached attempt (``stop()`` gave up on it) belongs to a stopped worker and
    is not counted."""
    at = attempt.cancelled.at
    return at is not None and now - at >= grace and not attempt.finished.is_set() and not attempt.detached


def count_zombies(attempts: Iterable[Attempt], grace: float, now: float | None = None) -> int:
    """How many of ``attempts`` are zombies (see :func:`is_zombie`) at ``now`` (monotonic)."""
    now = time.monotonic() if now is None else now
    return sum(1 for a in attempts if is_zombie(a, now, grace))


@dataclass(frozen=True, slots=True)
class Health:
    """One reading of a worker's health: ``zombies`` running now, the ``limit`` that makes it
    unhealthy, and ``healthy`` (zombies below the limit)."""

    zombies: int
    limit: int
    concurrency: int

    @property
    def healthy(self) -> bool:
        return self.zombies < self.limit

    def error(self) -> WorkerUnhealthy:
        """The coded error a host raises (or logs) for an unhealthy reading."""
        return WorkerUnhealthy(
            f"{self.zombies} of {self.concurrency} slot(s) are held by handlers that outlived their timeout "
            f"or cancellation (unhealthy at {self.limit}); the process should be replaced",
            zombies=self.zombies,
            limit=self.limit,
            concurrency=self.concurrency,
        )


def assess(worker: Worker) -> Health:
    """The worker's health now (see the module docstring)."""
    with worker._lock:
        attempts = list(worker._attempts.values())
    return Health(
        count_zombies(attempts, worker.zombie_grace),
        zombie_limit(worker.concurrency, worker.zombie_share),
        worker.concurrency,
    )
