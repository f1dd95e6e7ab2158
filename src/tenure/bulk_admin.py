"""Admin at scale: delete one job, and cancel / requeue / delete every job a filter
matches, with a dry-run count (docs/operations.md, "Bulk cancel, requeue and delete").

A filter is any of ``state``, ``kind``, ``queue``, ``tag`` and ``older_than`` (seconds: created
before now minus that); at least one is required, so no call touches every job by accident.
Each operation walks the matching ids by id in bounded batches (:data:`BATCH`, one transaction
each) and applies to every id the same guarded statement its one-job form uses, so the rules
never differ from one job to many:

- **cancel** is ``request_cancel`` per job: a queued job (pending, failed, lease expired) is
  cancelled at once; a running one (a live lease) is flagged, and its holder settles it
  ``cancelled`` with its own lease. No path settles a leased job without its lease.
- **requeue** is ``requeue`` per job: failed, dead, cancelled or lease-expired jobs go back to
  ``pending`` at now, attempts kept. A live lease is skipped, never stolen.
- **delete** removes the job and its checkpoints, never one holding a live lease.

A ``dry_run`` walks the same batches with the same eligibility test and counts instead of writing,
so on a quiet store it answers exactly what the real call then touches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _validate as v
from . import durations
from .errors import InvalidArgument, JobRunning

if TYPE_CHECKING:
    from .engine.base import Session
    from .store import Store

#: Ids per batch: each batch is one read and one write transaction.
BATCH = 500
OPERATIONS = ("cancel", "requeue", "delete")


def job_filter(
    *,
    state: str | None = None,
    kind: str | None = None,
    queue: str | None = None,
    tag: str | None = None,
    older_than: Any = None,
) -> dict[str, Any]:
    """The validated filter (TN1001/TN1002 name the field); ``older_than`` in seconds (or a
    timedelta). Refuses an empty filter (TN1001)."""
    v.state(state)
    if kind is not None:
        v.name(kind, "kind")
    if queue is not None:
        v.name(queue, "queue")
    if tag is not None:
        v.text(tag, "tag", max_chars=v.MAX_TAG_CHARS, allow_empty=False)
    age_ms = durations.ms(older_than, "older_than")
    if age_ms is not None and age_ms < 0:
        raise InvalidArgument("older_than must not be negative")
    if state is None and kind is None and queue is None and tag is None and age_ms is None:
        raise InvalidArgument(
            "give at least one filter (state, kind, queue, tag or older_than): "
            "a bulk operation never touches every job by accident"
        )
    return {"state": state, "kind": kind, "queue": queue, "tag": tag, "age_ms": age_ms}


def apply(
    store: Store, operation: str, filters: dict[str, Any], *, dry_run: bool = False, limit: int | None = None
) -> int:
    """Run ``operation`` (cancel, requeue, delete) on the jobs ``filters`` matches, at most
    ``limit`` of them; answers how many it changed (or, with ``dry_run``, would change)."""
    if operation not in OPERATIONS:
        raise InvalidArgument(f"unknown bulk operation {operation!r}; one of {', '.join(OPERATIONS)}")
    v.positive_int(limit, "limit", allow_none=True)
    if not isinstance(dry_run, bool):
        raise InvalidArgument("dry_run must be True or False")
    act = _ACTIONS[operation]
    touched, after = 0, None
    while limit is None or touched < limit:
        want = BATCH if limit is None else min(BATCH, limit - touched)
        now = store._now()
        with store._session() as s:
            clock = now if now is not None else s.now_ms()
            query = {k: filters[k] for k in ("state", "kind", "queue", "tag")}
            query["before"] = None if filters["age_ms"] is None else clock - filters["age_ms"]
            ids = s.job_match(filters=query, eligible=operation, after=after, limit=want, now=now)
        if not ids:
            break
        after = ids[-1]
        if dry_run:
            touched += len(ids)
        else:
            with store._transaction_session() as s:
                touched += act(s, ids, store._now())
        if len(ids) < want:
            break
    if touched and not dry_run:
        store._wake_local()
    return touched


def _cancel(s: Session, ids: list[str], now: int | None) -> int:
    n = 0
    for job_id in ids:
        if s.job_cancel(job_id, None, now) is not None or s.job_request_cancel(job_id, now) is not None:
            n += 1
    return n


def _requeue(s: Session, ids: list[str], now: int | None) -> int:
    return sum(1 for job_id in ids if s.job_requeue(job_id, now) is not None)


def _delete(s: Session, ids: list[str], now: int | None) -> int:
    return len(s.job_delete(ids, now))


_ACTIONS: dict[str, Callable[[Session, list[str], int | None], int]] = {
    "cancel": _cancel,
    "requeue": _requeue,
    "delete": _delete,
}


def delete(store: Store, job_id: str) -> bool:
    """Delete one job and its checkpoints: True when this call deleted it, False when there was
    no such job. :class:`JobRunning` (TN2091) when it holds a live lease (nothing is deleted)."""
    v.job_id(job_id)
    with store._session() as s:
        now = store._now()
        if s.job_delete([job_id], now):
            return True
        row = s.job_get(job_id)
    if row is None:
        return False
    raise JobRunning(
        f"cannot delete job {job_id!r}: it is running (a live lease, generation {row.lease_generation}); "
        "cancel it first (jobs.request_cancel) or wait for it to settle",
        job_id=job_id,
    )
