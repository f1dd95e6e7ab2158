"""The single table of tenure's errors.

Every error tenure raises on purpose is a :class:`TenureError` with a stable
``code``. Codes keep the docs/spec.md seed's numbers under tenure's prefix
(the seed's ``JD2066`` is ``TN2066``), so each one traces back to a row of
docs/spec.md. ``docs/errors.md`` documents the same table.

Argument errors subclass both :class:`TenureError` and the built-in
``TypeError``/``ValueError`` so ``except ValueError`` keeps working.
"""

from __future__ import annotations

__all__ = [
    "TenureError",
    "InvalidArgument",
    "InvalidType",
    "ForeignConnection",
    "PayloadTooLarge",
    "UnstorableValue",
    "LeaseNotHeld",
    "LeaseSuperseded",
    "LeaseExpired",
    "LeaseRequired",
    "ResumeMismatch",
    "ScopeSettled",
    "NestedRootCall",
    "HandlersLeftRunning",
    "OperationWithdrawn",
    "StoreClosed",
    "ReadOnlyStore",
    "StorageError",
    "StoreBusy",
    "StorageFull",
    "StoreUnavailable",
    "StoreLimitExceeded",
    "StoreCorrupt",
    "SchemaTooNew",
    "InvalidURL",
    "UnreadableJob",
    "PageCancelled",
    "DeadlineExceeded",
    "QueueNotFound",
    "QueueNotEmpty",
    "InvalidSchedule",
    "JobDead",
    "WorkerLost",
    "DeadLetterCycle",
    "InvalidRateLimit",
    "JobCancelled",
    "ResultTimeout",
    "WorkerUnhealthy",
    "JobRunning",
    "SignalTimeout",
    "ChildFailed",
    "UnknownParent",
    "DependencyCycle",
    "ParentFailed",
    "FENCE_CODES",
    "ERROR_TABLE",
]


class TenureError(Exception):
    """Base class of every coded tenure error. ``code`` never changes between releases."""

    code: str = "TN0000"

    def __init__(self, message: str = "", **details: object) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}" if self.message else self.code

    def __reduce__(self):  # survive pickling across processes
        return (_rebuild, (type(self), self.message, self.details))


def _rebuild(cls: type[TenureError], message: str, details: dict) -> TenureError:
    return cls(message, **details)


# --- arguments -------------------------------------------------------------------------------


class InvalidArgument(TenureError, ValueError):
    """A value of the right type that tenure cannot accept (NaN ``run_at``, ``max_attempts=0``)."""

    code = "TN1001"


class InvalidType(TenureError, TypeError):
    """An argument of the wrong type (a non-string kind, a handler that is not callable)."""

    code = "TN1002"


class PayloadTooLarge(InvalidArgument):
    """A payload or result larger than the store's documented limit (1 MiB of JSON by default)."""

    code = "TN1003"


class UnstorableValue(InvalidArgument):
    """A value the store cannot hold or read back: a string with a lone surrogate (not UTF-8),
    a handler's result that cannot be encoded as JSON, an item of a settle batch the database
    refused. Refused at the call for a payload; a handler's result fails its attempt with this
    code (retried like any failure, dead after ``max_attempts``), never loops (docs/guarantees.md,
    "Liveness: every outcome settles")."""

    code = "TN1004"


class ForeignConnection(InvalidArgument):
    """``conn=`` (the outbox form: a driver, SQLAlchemy or Django connection) is connected to
    another database than the store's: a job written through it would land where none of the
    store's workers look. Refused before anything is written."""

    code = "TN1010"


# --- the fence (spec §3, §9) -----------------------------------------------------------


class LeaseNotHeld(TenureError):
    """The job is not leased: unknown, or already settled by someone else (seed JD2065)."""

    code = "TN2065"


class LeaseSuperseded(TenureError):
    """A newer claim or renewal holds the job; the message names both generations (seed JD2066)."""

    code = "TN2066"


class LeaseExpired(TenureError):
    """The lease expired before the call; the message says by how long (seed JD2067)."""

    code = "TN2067"


class LeaseRequired(TenureError, TypeError):
    """A settling call without the lease: the pre-fence ``(id, owner)`` spelling, a cancel of a
    claimed job without its lease, or a requeue of a live lease (seed JD2068)."""

    code = "TN2068"


class ResumeMismatch(TenureError):
    """A workflow resume disagrees with the revision, input hash or task versions it was
    checkpointed under, or a legacy run has values but no task identity (seed JD2069)."""

    code = "TN2069"


class ScopeSettled(TenureError):
    """A transaction-scoped view (``tx.jobs``, a tx-bound checkpoint store) used after its
    transaction committed or rolled back (seed JD2070)."""

    code = "TN2070"


class NestedRootCall(TenureError):
    """A root ``store.jobs`` call made inside the same thread's open ``store.transaction()``:
    it would wait forever for a commit that cannot come. Use ``tx.jobs`` instead. Caught, it
    still keeps that transaction from committing (rolled back, TN2071 at the block's end)."""

    code = "TN2071"


class OperationWithdrawn(TenureError):
    """A call still waiting for the store gate was withdrawn by its caller's cancellation (a worker
    stopping): nothing ran and nothing was written."""

    code = "TN2073"


class HandlersLeftRunning(TenureError):
    """``store.close(grace)`` closed the store but handlers were still running (seed JD2062), or
    ``jobs.cancel(id, lease)`` cancelled the job but its local attempt did not wind up within the
    worker's ``stop_grace``. Raised after the close or the cancel has happened: a report, not a
    refusal."""

    code = "TN2062"


class StoreClosed(TenureError):
    """Any call on a store after ``close()`` (seed JD2063)."""

    code = "TN2063"


# --- storage classification -------------------------------------------------------------------


class StorageError(TenureError):
    """A storage failure tenure classified (never a raw driver exception)."""

    code = "TN0001"


class ReadOnlyStore(StorageError):
    """The database cannot be written (read-only file or role), found at first use (seed JD0002)."""

    code = "TN0002"


class StoreBusy(StorageError):
    """The database stayed locked past the store's bounded busy timeout."""

    code = "TN0003"


class StorageFull(StorageError):
    """The disk (or the database's quota) is full; nothing from the failed call was written."""

    code = "TN0004"


class StoreUnavailable(StorageError):
    """The database could not be reached, or the connection was lost mid-call."""

    code = "TN0005"


class StoreLimitExceeded(StorageError):
    """A value or statement passed one of the database's own hard limits (PostgreSQL SQLSTATE
    class 54, such as an index entry larger than a page; SQLite's ``SQLITE_TOOBIG``). Permanent:
    retrying the same call fails the same way, unlike :class:`StoreUnavailable`. Nothing from the
    failed call was written."""

    code = "TN0009"


class StoreCorrupt(StorageError):
    """The SQLite file failed its integrity check at open (a corrupt page): tenure refuses to read
    or write it. Restore a backup, or salvage it with ``sqlite3 file .recover``; ``?quick_check=0``
    in the URL skips the check."""

    code = "TN0010"


class SchemaTooNew(StorageError):
    """The database was migrated by a newer tenure than this one; refuse rather than guess."""

    code = "TN0006"


class InvalidURL(TenureError, ValueError):
    """The store URL names no engine tenure knows, or is malformed."""

    code = "TN0007"


class UnreadableJob(StorageError):
    """A stored job whose payload (or result, or headers) cannot be decoded, e.g. text written
    by foreign SQL. A claim that meets one settles that job alone ``dead`` with this code in
    ``last_error`` and never fails; listings show it with a :class:`tenure.Undecodable` value."""

    code = "TN0008"


# --- paging ------------------------------------------------------------------------------------


class PageCancelled(TenureError):
    """A page read stopped by its cancellation event (seed JD2072)."""

    code = "TN2072"


class DeadlineExceeded(TenureError):
    """A page read whose deadline had passed (seed JD2075)."""

    code = "TN2075"


# --- queues, schedules, results ---------------------------------------------------------------


class QueueNotFound(TenureError):
    """The named queue does not exist."""

    code = "TN3001"


class QueueNotEmpty(TenureError):
    """``queues.delete`` refused: the queue still has live jobs (pass ``force=True``)."""

    code = "TN3002"


class DeadLetterCycle(TenureError, ValueError):
    """``queues.create``/``update`` refused: the dead-letter queues would form a cycle (``a -> b ->
    a``, of any length), along which one job's copies could run forever."""

    code = "TN3003"


class InvalidRateLimit(TenureError, ValueError):
    """A ``rate_limit`` or ``group_rate_limit`` that is not "N per period" (``"100/s"``,
    ``"6000/min"``, ``"10/h"``), or whose count or period is out of range; nothing is written."""

    code = "TN3004"


class InvalidSchedule(TenureError, ValueError):
    """A cron expression or time zone that cannot be used; the message names the bad field."""

    code = "TN4001"


class JobDead(TenureError):
    """``handle.result()`` on a job whose attempts ran out; carries the last error."""

    code = "TN2080"


class WorkerLost(TenureError):
    """A job whose worker was lost (its lease expired) on its final attempt: the next claim settled
    it ``dead`` instead of running it again. Never raised by a call: it is the code that opens
    such a job's ``last_error`` (docs/guarantees.md, "Liveness: bounded reclaim and dead letters")."""

    code = "TN2084"


class JobCancelled(TenureError):
    """``handle.result()`` on a cancelled job."""

    code = "TN2081"


class ResultTimeout(TenureError, TimeoutError):
    """``handle.result(timeout=...)`` gave up before the job settled."""

    code = "TN2082"


# --- worker liveness ---------------------------------------------------------------------------


class WorkerUnhealthy(TenureError):
    """A worker whose zombie slots (handlers still running past their timeout or cancellation)
    reached its ``zombie_share`` of the slots: ``App.run_worker`` stops it and raises this, and
    ``tenure worker`` exits with status 75 so a supervisor replaces the process."""

    code = "TN2090"


# --- administration ----------------------------------------------------------------------------


class JobRunning(TenureError):
    """``jobs.delete(id)`` of a job that holds a live lease: deleting it would pull the row from
    under its running attempt. Cancel it first (``jobs.request_cancel``), or wait; a bulk
    ``delete_where`` skips such jobs instead."""

    code = "TN2091"


# --- durable workflows (tenure.durable, docs/workflows.md) -------------------------------------


class SignalTimeout(TenureError, TimeoutError):
    """``ctx.wait_for_signal(key, timeout=...)`` reached its timeout before a signal of ``key``
    arrived. Recorded in the run's checkpoints: a resumed run meets the same timeout at the same
    step (``details``: ``key``, ``job_id``, ``until``). Catch it to take the no-signal path."""

    code = "TN5001"


class ChildFailed(TenureError):
    """A child job started with ``ctx.map`` / ``ctx.call`` ended ``dead`` or ``cancelled``, so
    the join cannot return every result. Recorded in the run's checkpoints (a resumed run meets
    the same failure); ``details["failed"]`` lists ``{"id", "state", "last_error"}`` of each."""

    code = "TN5002"
# --- composition (docs/composition.md) -----------------------------------------------------------


class UnknownParent(TenureError, ValueError):
    """``enqueue(..., depends_on=[...])`` names a job that neither exists nor is enqueued in the
    same call (``enqueue_many``, a canvas): nothing is written. ``details["missing"]`` lists them."""

    code = "TN2101"


class DependencyCycle(TenureError, ValueError):
    """``depends_on`` that can never be met: a job that depends on itself, or jobs of one
    ``enqueue_many`` (or canvas) that depend on each other in a cycle. Nothing is written;
    ``details["cycle"]`` names the jobs in it."""

    code = "TN2102"


class ParentFailed(TenureError):
    """A dependent cancelled because a parent ended ``dead`` or ``cancelled`` and its
    ``on_parent_failure`` policy is ``cancel`` (the default). Never raised by a call: it is the code
    that opens such a job's ``last_error`` ("TN2103: parent ... ended dead, ...")."""

    code = "TN2103"


FENCE_CODES = frozenset({LeaseNotHeld.code, LeaseSuperseded.code, LeaseExpired.code})

ERROR_TABLE: dict[str, type[TenureError]] = {
    cls.code: cls
    for cls in [
        InvalidArgument, InvalidType, PayloadTooLarge, UnstorableValue, ForeignConnection, LeaseNotHeld, LeaseSuperseded, LeaseExpired,
        LeaseRequired, ResumeMismatch, ScopeSettled, NestedRootCall, OperationWithdrawn, HandlersLeftRunning, StoreClosed,
        StorageError, ReadOnlyStore, StoreBusy, StorageFull, StoreUnavailable, StoreLimitExceeded,
        StoreCorrupt, SchemaTooNew, InvalidURL, UnreadableJob,
        PageCancelled, DeadlineExceeded, QueueNotFound, QueueNotEmpty, InvalidSchedule, JobDead,
        JobCancelled, ResultTimeout, WorkerUnhealthy, WorkerLost, DeadLetterCycle, InvalidRateLimit, JobRunning,
        SignalTimeout, ChildFailed,
        UnknownParent, DependencyCycle, ParentFailed,
    ]
}
