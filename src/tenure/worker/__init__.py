"""The worker: claims, runs, renews and settles jobs (spec 6).

``store.jobs.create_worker(handlers, **options)`` makes a :class:`Worker`; its options are one
:class:`WorkerConfig` (:mod:`~tenure.worker.config`). The package holds its
parts, each in its own module: :mod:`~tenure.worker.producer` (claims),
:mod:`~tenure.worker.executor` (runs handlers), :mod:`~tenure.worker.completer` (batched
settlement), :mod:`~tenure.worker.keeper` (renewals and timeouts),
:mod:`~tenure.worker.cancel_watch` (cancel requests), :mod:`~tenure.worker.attempt` and
:mod:`~tenure.worker.lifecycle` (one attempt and its state), :mod:`~tenure.worker.context`
(what a handler gets), :mod:`~tenure.worker.handler_tx` (the handler transaction) and
:mod:`~tenure.worker.events` (milestones to wait on); :mod:`~tenure.worker.core` puts them
together.
"""

from __future__ import annotations

from .attempt import SHUTDOWN, Attempt, CancelEvent, ShutdownReason, TimeoutReason
from .config import WorkerConfig
from .context import JobContext
from .core import StopResult, Worker
from .events import Milestones
from .lifecycle import AttemptState

__all__ = [
    "SHUTDOWN", "Attempt", "AttemptState", "CancelEvent", "JobContext", "Milestones", "ShutdownReason",
    "StopResult", "TimeoutReason", "Worker", "WorkerConfig",
]
