"""Operator actions on jobs, written once above the engine: cancel (now or by request), requeue,
delete, the filtered bulk forms, redrive, sweep, and reading a run's checkpoints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _validate as v
from . import bulk_admin
from .engine.rows import DEFAULT_MAX_ATTEMPTS as DEFAULT_MAX_ATTEMPTS  # re-exported (tenure.queues)
from .errors import (
    HandlersLeftRunning,
    InvalidArgument,
    InvalidType,
    LeaseNotHeld,
    LeaseRequired,
)
from .fence import check_lease, refusal
from .job_control import request_cancel
from .job_rows import MAX_GENERATION, _loads
from .jobs_base import _JobsBase
from .records import Checkpoint, Lease, SweepResult

if TYPE_CHECKING:
    pass


SWEEP_BATCH = 1_000


class JobAdmin(_JobsBase):
    """The operator side of ``store.jobs`` (see the module docstring)."""

    def cancel(self, job_id: str, lease: Lease | None = None) -> bool:
        """Cancel a job. A queued one (pending, failed, or leased with an expired lease) needs no
        lease; a claimed one needs its CURRENT lease, and the local attempt holding it is told
        (``ctx.cancelled``) and waited for up to its worker's ``stop_grace``. True when this call
        cancelled it (and any local attempt wound up), False when it already was cancelled.
        :class:`HandlersLeftRunning` (TN2062) when the job IS cancelled but the local attempt was
        still running after the grace: a report, not a refusal (docs/spec.md D5)."""
        v.job_id(job_id)
        if lease is not None:
            lease = check_lease(lease, "cancel", ())
            if lease.job_id != job_id:
                raise InvalidArgument(f"the lease is for job {lease.job_id!r}, not {job_id!r}")
        store = self._store
        with self._session() as s:
            now = store._now()
            row = s.job_cancel(job_id, None if lease is None else lease.token, now)
            if row is None:
                current = s.job_get(job_id)
                if current is not None and current.state == "cancelled":
                    return False
                if lease is None:
                    if current is None:
                        raise LeaseNotHeld(f"cannot cancel job {job_id!r}: no such job")
                    if current.state == "leased":
                        raise LeaseRequired(f"job {job_id!r} is claimed (generation {current.lease_generation}): "
                                            "cancel(job_id, lease=...) needs its current lease")
                    raise LeaseNotHeld(f"cannot cancel job {job_id!r}: it is already settled "
                                       f"(state {current.state!r})")
                raise refusal(current, lease, store._now_or(s, now), "cancel") or LeaseNotHeld(
                    f"cannot cancel job {job_id!r}: the attempt already settled it")
        token = lease.token if lease is not None else None
        running = store._cancel_local(job_id, token)
        if running:
            grace = max(a.worker.stop_grace for a in running)
            raise HandlersLeftRunning(
                f"job {job_id!r} is cancelled, but its attempt in this process had not wound up (cancel "
                f"waits up to the worker's stop_grace, {grace:g} s, and not at all when called from that "
                "attempt's own handler or event loop): its handler is still running and can no longer "
                "settle the job", job_id=job_id, in_flight=len(running))
        return True

    def request_cancel(self, job_id: str) -> str:
        """Cancel a job from any process, running or not (:mod:`tenure.job_control`): a queued job
        is cancelled now (answers ``"cancelled"``); a running one is flagged, and its holder sets
        ``ctx.cancelled`` and settles it ``cancelled`` with its own lease within a second (answers
        ``"requested"``); ``"unchanged"`` when it already was cancelled. TN2065 for an unknown,
        done or dead job. ``cancel()`` keeps the rules of docs/spec.md (a running job needs its lease)."""
        return request_cancel(self._store, job_id)

    def requeue(self, job_id: str) -> bool:
        """Return a failed, dead, cancelled or lease-expired job to ``pending`` at now, keeping its
        attempt count (so ``max_attempts`` still bounds it). False when already pending."""
        v.job_id(job_id)
        store = self._store
        with self._session() as s:
            row = s.job_requeue(job_id, store._now())
            if row is None:
                current = s.job_get(job_id)
                if current is None:
                    raise LeaseNotHeld(f"cannot requeue job {job_id!r}: no such job")
                if current.state == "pending":
                    return False
                if current.state == "leased":
                    raise LeaseRequired(f"job {job_id!r} holds a live lease (generation {current.lease_generation}): "
                                        "requeue is not a steal; cancel it with its lease, or wait")
                raise LeaseNotHeld(f"cannot requeue job {job_id!r}: it is {current.state!r}")
        store._wake_local()
        return True

    def delete(self, job_id: str) -> bool:
        """Delete one job and its checkpoints, in any state but running: True when deleted, False
        when there was no such job; :class:`~tenure.errors.JobRunning` (TN2091) for a job holding a
        live lease (cancel it first with :meth:`request_cancel`)."""
        return bulk_admin.delete(self._store, job_id)

    def cancel_where(self, *, state: str | None = None, kind: str | None = None, queue: str | None = None,
                     tag: str | None = None, older_than: Any = None, dry_run: bool = False,
                     limit: int | None = None) -> int:
        """:meth:`request_cancel` every job the filter matches (``older_than``: seconds since
        creation), in bounded batches: queued ones are cancelled now, running ones flagged for
        their holders. Answers how many (with ``dry_run``, how many it would touch, writing
        nothing). At least one filter is required (:mod:`tenure.bulk_admin`)."""
        f = bulk_admin.job_filter(state=state, kind=kind, queue=queue, tag=tag, older_than=older_than)
        return bulk_admin.apply(self._store, "cancel", f, dry_run=dry_run, limit=limit)

    def requeue_where(self, *, state: str | None = None, kind: str | None = None, queue: str | None = None,
                      tag: str | None = None, older_than: Any = None, dry_run: bool = False,
                      limit: int | None = None) -> int:
        """:meth:`requeue` every failed, dead, cancelled or lease-expired job the filter matches,
        in bounded batches; answers how many (``dry_run``: would)."""
        f = bulk_admin.job_filter(state=state, kind=kind, queue=queue, tag=tag, older_than=older_than)
        return bulk_admin.apply(self._store, "requeue", f, dry_run=dry_run, limit=limit)

    def delete_where(self, *, state: str | None = None, kind: str | None = None, queue: str | None = None,
                     tag: str | None = None, older_than: Any = None, dry_run: bool = False,
                     limit: int | None = None) -> int:
        """Delete every job the filter matches except those holding a live lease, with their
        checkpoints, in bounded batches; answers how many (``dry_run``: would)."""
        f = bulk_admin.job_filter(state=state, kind=kind, queue=queue, tag=tag, older_than=older_than)
        return bulk_admin.apply(self._store, "delete", f, dry_run=dry_run, limit=limit)

    def redrive(self, queue: str, *, limit: int | None = None) -> int:
        """Move dead-lettered jobs in ``queue`` back to their origin queue; answers how many."""
        return self._store.queues.redrive(queue, limit=limit)

    def sweep(self, *, settled_before: Any = None, limit: int | None = None) -> SweepResult:
        """Delete done/dead/cancelled jobs last changed before ``settled_before`` (REQUIRED), oldest
        first, with their checkpoints, in bounded batches; a second identical sweep removes 0."""
        if settled_before is None:
            raise InvalidType("sweep() needs settled_before=<epoch ms>: a sweep without a horizon "
                              "would be a retention policy, which is the host's to choose")
        horizon = v.epoch_ms(settled_before, "settled_before")
        v.positive_int(limit, "limit", allow_none=True)
        removed = 0
        while limit is None or removed < limit:
            batch = SWEEP_BATCH if limit is None else min(SWEEP_BATCH, limit - removed)
            with self._session() as s:
                n = s.job_sweep(horizon, batch)
            removed += n
            if n < batch:
                break
        return SweepResult(removed)

    def checkpoints_of(self, job_id: str) -> list[Checkpoint]:
        """Read-only: every checkpoint row of a job (a workflow run), any generation, for
        inspection (``tenure runs show``, the dashboard). Saving needs the attempt's lease."""
        v.job_id(job_id)
        with self._session() as s:
            rows = s.checkpoint_list(job_id, MAX_GENERATION)  # every generation
        return [Checkpoint(job_id, r.node_id, None if r.value is None else _loads(r.value), r.generation)
                for r in rows]
