"""Cancel a job from anywhere: ``store.jobs.request_cancel(id)`` (D11).

``jobs.cancel()`` keeps the rules of docs/spec.md exactly: a claimed job needs its current lease
(TN2068), and across processes lease expiry remains the timeout (§8.6). ``request_cancel`` is a
separate request that any process may make, and no path it opens settles a leased job without
that job's current lease:

- a **queued** job (pending, failed, or leased with an expired lease) is cancelled at once, in
  one write, exactly as ``cancel(id)`` does;
- a **running** job (a live lease) is flagged (``cancel_requested_at``). Its holder sees the flag
  within a second (:mod:`tenure.worker.cancel_watch`: PostgreSQL ``NOTIFY tenure_cancel``, a poll of
  the flagged rows on SQLite), sets ``ctx.cancelled`` (reason: :data:`CANCEL_REQUESTED`) and
  settles the attempt ``cancelled`` with its own lease;
- if the holder is gone (killed), its lease expires; the claim never takes a flagged job back
  (one line in the claim's expired branch), and the next claim of any worker settles it
  ``cancelled`` instead (:func:`cancel_abandoned`), under the same condition ``cancel(id)`` uses
  for an expired lease.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from . import _validate as v
from .errors import LeaseNotHeld, TenureError
from .fence import refusal
from .records import Lease

if TYPE_CHECKING:
    from .engine.base import Session
    from .engine.rows import JobRow
    from .store import Store

#: What :func:`request_cancel` answers.
CANCELLED = "cancelled"  # this call cancelled the (queued) job
REQUESTED = "requested"  # the job runs: its holder was asked to stop and settle it cancelled
UNCHANGED = "unchanged"  # it already was cancelled
#: At most this often (seconds) a process's claims also settle abandoned flagged jobs cancelled.
ABANDONED_EVERY = 1.0


class CancelRequested:
    """The ``ctx.cancelled.reason`` of an attempt an operator asked to cancel
    (``jobs.request_cancel``): ``code`` is ``"cancel_requested"``."""

    code = "cancel_requested"

    def __repr__(self) -> str:
        return "cancel requested"

    __str__ = __repr__


CANCEL_REQUESTED = CancelRequested()


def request_cancel(store: Store, job_id: str) -> str:
    """Cancel ``job_id`` from any process. Answers :data:`CANCELLED` (it was queued: cancelled now),
    :data:`REQUESTED` (it runs: its holder stops it and settles it cancelled, within a second) or
    :data:`UNCHANGED` (already cancelled). Raises :class:`LeaseNotHeld` (TN2065) for an unknown
    job or one already done or dead."""
    v.job_id(job_id)
    for _ in range(5):  # a lease may expire (or a job be requeued) between the two statements
        with store._session() as s:
            now = store._now()
            if s.job_cancel(job_id, None, now) is not None:
                outcome = CANCELLED
                break
            if s.job_request_cancel(job_id, now) is not None:
                outcome = REQUESTED
                break
            current = s.job_get(job_id)
        if current is None:
            raise LeaseNotHeld(f"cannot cancel job {job_id!r}: no such job", job_id=job_id)
        if current.state == "cancelled":
            return UNCHANGED
        if current.state in ("done", "dead"):
            raise LeaseNotHeld(
                f"cannot cancel job {job_id!r}: it is already settled (state {current.state!r})",
                job_id=job_id,
                state=current.state,
            )
    else:  # pragma: no cover - five races in a row
        raise LeaseNotHeld(f"cannot cancel job {job_id!r}: its state kept changing; try again", job_id=job_id)
    if outcome == REQUESTED:
        store._cancel_requested_local(job_id)
    else:
        store._cancel_local(job_id, None)
    return outcome


def settle_requested(store: Store, lease: Lease) -> TenureError | None:
    """The holder's settlement of a requested cancel: fenced by its CURRENT lease (the same
    statement as ``cancel(id, lease)``). Answers None when it settled, else the refusal."""
    with store._session() as s:
        now = store._now()
        if s.job_cancel(lease.job_id, lease.token, now) is not None:
            return None
        return refusal(s.job_get(lease.job_id), lease, store._now_or(s, now), "cancel") or LeaseNotHeld(
            f"job {lease.job_id!r}: the attempt already settled it", job_id=lease.job_id
        )


def abandoned_due(store: Store) -> bool:
    """Whether this process's next :func:`cancel_abandoned` would run (not just returned)."""
    return time.monotonic() >= getattr(store, "_abandoned_next", 0.0)


def cancel_abandoned(store: Store, session: Session) -> list[JobRow]:
    """Settle ``cancelled`` the flagged jobs whose holder is gone (lease expired), at most every
    :data:`ABANDONED_EVERY` seconds per process; called by the claim, before it claims (a
    worker's dispatcher: after, see :meth:`tenure.jobs.Jobs.sweep_abandoned`)."""
    due = time.monotonic()
    if due < getattr(store, "_abandoned_next", 0.0):
        return []
    store._abandoned_next = due + ABANDONED_EVERY  # type: ignore[attr-defined]
    return session.job_cancel_abandoned(store._now())


def release(store: Store, leases: list[Lease]) -> list[str]:
    """Release the jobs of attempts abandoned by an immediate shutdown (the grace ran out, or a
    second signal) at once, instead of leaving them leased until their lease expires: each goes
    back to ``pending`` now with its retries left unchanged (``max_attempts + 1``, as a snooze),
    fenced by its CURRENT lease. Answers the ids released (a lease that is no longer current is
    skipped: someone else has the job)."""
    released = []
    with store._session() as s:
        for lease in leases:
            if s.job_release(lease.job_id, lease.token, store._now()) is not None:
                released.append(lease.job_id)
    if released:
        store._wake_local()
    return released
