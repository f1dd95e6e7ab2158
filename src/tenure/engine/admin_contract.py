"""The admin half of the engine contract: queues, schedules, leadership, workers, retention and
the read model.

The other half (a job's life) is :class:`tenure.engine.job_contract.JobContract`;
:class:`tenure.engine.base.Session` is both. Types and conventions as in :mod:`tenure.engine.base`.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from . import rows as R
from .rows import NewJob, QueuedKindRow


class AdminContract(abc.ABC):
    """The session methods around the jobs (see the module docstring). Declared here, implemented
    by each dialect's queues, maintenance and insights mixins (``engine/<dialect>/``)."""

    # -- queues (engine/<dialect>/queues.py) ---------------------------------------------------
    @abc.abstractmethod
    def queue_atomic(self) -> AbstractContextManager[None]:
        """One transaction for several statements (joins the caller's open one; never commits an
        adopted connection's)."""

    @abc.abstractmethod
    def queue_get(self, name: str) -> R.QueueRow | None:
        """The registry row of queue ``name``, or None."""

    @abc.abstractmethod
    def queue_lock_dead_letters(self) -> None:
        """Serialise changes to the dead-letter graph until the caller's transaction ends, so two
        concurrent updates cannot each close half of a cycle."""

    @abc.abstractmethod
    def queue_list(self) -> list[R.QueueRow]:
        """Every registry row, by name."""

    @abc.abstractmethod
    def queue_defaults(self, names: Sequence[str]) -> dict[str, R.QueueRow]:
        """The registry rows of ``names`` that exist, by name."""

    @abc.abstractmethod
    def queue_put(self, name: str, settings: dict[str, Any], now: int | None, *,
                  create: bool) -> R.QueuePut:
        """Set ``settings`` on queue ``name`` (creating it first when ``create``). Answers ``ok``
        with the row, ``missing``, or ``busy`` with the row (a policy change refused because the
        queue holds live jobs)."""

    @abc.abstractmethod
    def queue_rate_windows(self, name: str, limit: int) -> list[R.RateWindowRow]:
        """The queue's window rows, the queue scope first, then groups by key; at most ``limit``."""

    @abc.abstractmethod
    def queue_pause(self, name: str, paused: bool, now: int | None) -> R.QueueRow | None:
        """Set the queue's ``paused`` flag; answers its row, or None when it does not exist."""

    @abc.abstractmethod
    def queue_delete(self, name: str, force: bool) -> R.QueueDeleted:
        """Delete the queue, its jobs (live ones only when ``force``), their checkpoints and its
        subscriptions, in one transaction."""

    @abc.abstractmethod
    def queue_find_duplicate(self, j: NewJob, debounce: bool) -> str | None:
        """The live job ``j`` collided with under its uniqueness rules, or None."""

    @abc.abstractmethod
    def queue_debounce(self, j: NewJob, debounce_ms: int, now: int | None) -> R.Inserted | None:
        """Move the pending debounced job of ``j``'s (queue, kind, key) to ``j``'s payload and
        run_at (answers ``(its id, False)``), else insert ``j`` (``(j.id, True)``); None when
        another uniqueness rule (or a racing insert) refused the insert."""

    @abc.abstractmethod
    def queue_dead_letter(self, pairs: Sequence[tuple[str, str]], default_max_attempts: int,
                          now: int | None) -> int:
        """Copy each dead job (``pairs`` of ``(dead_id, copy_id)``) into its dead-letter queue."""

    @abc.abstractmethod
    def queue_redrive_select(self, queue: str, limit: int, after: tuple[int, str] | None) -> list[R.RedriveRow]:
        """Up to ``limit`` dead-letter copies waiting in ``queue`` after ``(created_at, id)``."""

    @abc.abstractmethod
    def queue_redrive_settle(self, pairs: Sequence[tuple[str, str]], now: int | None) -> int:
        """Settle the redriven copies of ``pairs``; answers how many."""

    @abc.abstractmethod
    def subscription_add(self, event: str, queue: str, now: int | None) -> bool:
        """Subscribe ``queue`` to ``event``; False when it already was."""

    @abc.abstractmethod
    def subscription_remove(self, event: str, queue: str) -> bool:
        """Unsubscribe ``queue`` from ``event``; False when it was not subscribed."""

    @abc.abstractmethod
    def subscription_queues(self, event: str) -> list[str]:
        """The queues subscribed to ``event``."""

    @abc.abstractmethod
    def subscription_list(self, event: str | None) -> list[R.SubscriptionRow]:
        """The subscriptions, of ``event`` only unless None."""

    # -- schedules, leadership, workers, retention (engine/<dialect>/maintenance.py) -------------
    @abc.abstractmethod
    def schedule_upsert(self, row: dict[str, Any], now: int | None) -> R.ScheduleRow | None:
        """Insert or change one schedule; answers the row, or None when nothing changed."""

    @abc.abstractmethod
    def schedule_get(self, name: str, key: str) -> R.ScheduleRow | None:
        """One schedule's row, or None."""

    @abc.abstractmethod
    def schedule_list(self, name: str | None) -> list[R.ScheduleRow]:
        """The schedules (of ``name`` only unless None)."""

    @abc.abstractmethod
    def schedule_delete(self, name: str, key: str) -> bool:
        """Delete one schedule; False when it did not exist."""

    @abc.abstractmethod
    def schedule_due(self, now: int, limit: int) -> list[R.ScheduleRow]:
        """Up to ``limit`` schedules whose next fire time is at or before ``now``."""

    @abc.abstractmethod
    def schedule_advance(self, *, name: str, key: str, cron: str, tz: str, expected: int,
                         last_fire_at: int | None, next_fire_at: int | None, now: int) -> bool:
        """Compare-and-set: move the schedule from ``expected`` on; False when another caller did."""

    @abc.abstractmethod
    def schedule_pause(self, name: str, key: str, paused: bool, next_fire_at: int | None,
                       now: int) -> R.ScheduleRow | None:
        """Pause one schedule, or resume it planned to ``next_fire_at``; its row, or None when absent."""

    @abc.abstractmethod
    def leader_acquire(self, name: str, owner: str, ttl_ms: int, now: int | None) -> int | None:
        """Take or renew the lease on role ``name``; answers its expiry, or None when another
        owner holds an unexpired lease."""

    @abc.abstractmethod
    def leader_release(self, name: str, owner: str) -> bool:
        """Give up role ``name`` if ``owner`` holds it; False when it did not."""

    @abc.abstractmethod
    def leader_get(self, name: str) -> R.LeaderRow | None:
        """The holder row of role ``name``, or None."""

    @abc.abstractmethod
    def worker_heartbeat(self, rows: Sequence[dict[str, Any]], now: int | None) -> None:
        """Insert or refresh the registry rows of this process's workers."""

    @abc.abstractmethod
    def worker_remove(self, ids: Sequence[str]) -> int:
        """Delete the registry rows of ``ids``; answers how many."""

    @abc.abstractmethod
    def worker_list(self) -> list[R.WorkerRow]:
        """Every worker registry row."""

    @abc.abstractmethod
    def worker_reap(self, dead_before: int, keep: Sequence[str], now: int | None,
                    limit: int) -> R.Reaped:
        """End the live leases of up to ``limit`` workers silent since ``dead_before`` (except
        ``keep``) and delete their rows."""

    @abc.abstractmethod
    def job_release_lost(self, instance: str, keep: Sequence[str], now: int | None) -> list[str]:
        """Give back the leases stamped with ``instance`` except those of the jobs in ``keep`` (the
        ones its worker holds): pending again, one attempt fewer. Answers the ids released."""

    @abc.abstractmethod
    def job_expire_queued(self, now: int | None, error: str, limit: int) -> int:
        """Queued (pending/failed) jobs with ``keep_until <= now`` -> dead with ``error``."""

    @abc.abstractmethod
    def jobs_table_stats(self) -> R.TableStats | None:
        """The jobs table's statistics (:func:`tenure.table_care.health_of`); None: no upkeep."""

    @abc.abstractmethod
    def jobs_vacuum(self, cancel: threading.Event | None = None, *, analyze_only: bool = False) -> bool:
        """Vacuum (or analyze) the jobs table; a set ``cancel`` stops it at once and answers False."""

    @abc.abstractmethod
    def job_delete_settled(self, now: int | None, default_after_ms: int | None, limit: int,
                           mark: R.RetentionMark | None = None) -> int:
        """Delete up to ``limit`` settled jobs past their deletion horizon (``updated_at +
        delete_after_ms``, else ``+ default_after_ms``; None: only jobs with their own), with their
        checkpoints; answers how many. With ``mark`` (a walk of several batches at one ``now``),
        only rows at or past its keys are looked at, and it is advanced to the keys of the rows
        deleted."""

    # -- the read model (engine/<dialect>/insights.py) -----------------------------------------
    @abc.abstractmethod
    def insight_queue_counts(self, sample: float | None = None) -> list[R.QueueStateCount]:
        """Every queue and state that has rows, with its count; ``sample``: estimated from that % of pages."""

    @abc.abstractmethod
    def insight_size(self) -> R.TableSize | None:
        """The jobs table's rows (estimated) and pages, without reading it; None: no estimate."""

    @abc.abstractmethod
    def insight_queues(self) -> list[R.QueueSummaryRow]:
        """Every registered queue, by name."""

    @abc.abstractmethod
    def insight_rate_deferred(self, now: int) -> list[R.RateDeferred]:
        """Due jobs (pending or failed, ``run_at <= now``) that a closed rate
        window holds back at ``now`` (the queue's, or their group's), per rate-limited queue."""

    @abc.abstractmethod
    def insight_settled_buckets(self, since: int, until: int, bucket_ms: int) -> list[R.SettledBucket]:
        """Jobs whose latest settlement happened in ``[since, until)``, per bucket and state."""

    @abc.abstractmethod
    def insight_workers(self, limit: int) -> list[R.WorkerRow]:
        """Rows of the worker registry, most recent heartbeat first (JSON columns as text)."""

    @abc.abstractmethod
    def insight_queued_kinds(self, sample: float | None = None) -> list[QueuedKindRow]:
        """Queued jobs per queue, kind, copy-or-not, with the oldest ``created_at`` (or a sample's)."""

    @abc.abstractmethod
    def insight_schema_versions(self) -> list[R.SchemaVersion]:
        """Every applied migration."""
