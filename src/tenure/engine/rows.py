"""The rows that cross the engine boundary: the job row's column order (:data:`JOB_COLUMNS`), a new
job (:class:`NewJob`), one settlement (:class:`Settle`), and the small constants both sides agree
on. A dialect answers rows in these layouts; the semantics above read them by name."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

#: Column order of every job row that crosses the boundary. All but the last are the public
#: :class:`tenure.Job` fields, in field order; ``lease_token`` is last and never leaves
#: :mod:`tenure.jobs`.
JOB_COLUMNS: tuple[str, ...] = (
    "id", "kind", "payload", "state", "run_at", "attempts", "max_attempts", "lease_until",
    "lease_owner", "lease_generation", "last_error", "result", "created_at", "updated_at",
    "queue", "priority", "timeout_ms", "singleton_key", "group_key", "dead_letter", "origin_id",
    "headers", "errors", "cancel_requested_at", "tags", "meta", "progress", "waiting_on", "lease_token",
)
TOKEN_INDEX = len(JOB_COLUMNS) - 1
#: How an engine hands over a TEXT value whose stored bytes are not UTF-8 (written by foreign SQL,
#: or by an older tenure): this prefix, then the text with U+FFFD for each bad byte. Never valid
#: JSON; the semantics layer shows it as a ``tenure.Undecodable`` value.
NOT_UTF8 = "\ufffe[not UTF-8] "
#: Error-history entries a failure keeps besides the first (``tenure.attempt_history.MAX_ENTRIES``
#: is this plus one); the engines trim ``errors`` to them inside the failing statement.
HISTORY_KEEP = 9
#: A row answered by a claim carries one element more, here: true when the job was reclaimed from
#: an expired lease (its previous attempt's worker was lost). Such a row is always answered alone
#: (docs/guarantees.md, "Liveness: bounded reclaim and dead letters").
RECLAIMED_INDEX = len(JOB_COLUMNS)
JobRow = tuple  # a row in JOB_COLUMNS order
#: The attempts a job (and a dead-letter copy, failing every other default) gets when nobody set any.
DEFAULT_MAX_ATTEMPTS = 5


class QueuedKindRow(NamedTuple):
    """Queued jobs (pending, or failed and waiting for a retry) of one kind in one queue, counted
    by :meth:`Session.insight_queued_kinds`; ``copies`` separates dead-letter copies (jobs with an
    ``origin_queue``), which only a claim naming their queue takes (docs/queues.md)."""

    queue: str
    kind: str
    copies: bool
    #: How many (named ``jobs``, not ``count``: a tuple already has a ``count`` method).
    jobs: int
    oldest_created_at: int


@dataclass(slots=True)
class NewJob:
    """One row to insert. ``run_at`` None means ``now + delay_ms`` on the engine's clock."""

    id: str
    kind: str
    payload: str | None
    queue: str
    priority: int
    run_at: int | None
    delay_ms: int
    max_attempts: int
    timeout_ms: int | None = None
    singleton_key: str | None = None
    singleton_on: int | None = None
    policy: str = "standard"
    group_key: str | None = None
    dead_letter: str | None = None
    origin_id: str | None = None
    retry_delay_ms: int | None = None
    retry_backoff: bool | None = None
    retry_delay_max_ms: int | None = None
    keep_until: int | None = None
    delete_after_ms: int | None = None
    last_error: str | None = None
    #: JSON text of propagation headers (the OpenTelemetry trace context of the enqueue), or None.
    headers: str | None = None
    #: JSON text of the job's tags (a list of short strings) and meta (an object), or None.
    tags: str | None = None
    meta: str | None = None
    #: The job's parents (ids, in order) and what it does when one fails: written by
    #: :meth:`Session.dependency_add` in the enqueue's transaction, never by the INSERT itself.
    depends_on: tuple[str, ...] = ()
    on_parent_failure: str = "cancel"


def new_job_params(j: NewJob, now: int | None) -> dict[str, Any]:
    """The named parameters of one insert, shared by every dialect's INSERT statement."""
    return {
        "id": j.id, "kind": j.kind, "payload": j.payload, "run_at": j.run_at, "delay_ms": j.delay_ms,
        "now": now, "max_attempts": j.max_attempts, "queue": j.queue, "priority": j.priority,
        "timeout_ms": j.timeout_ms, "singleton_key": j.singleton_key, "singleton_on": j.singleton_on,
        "policy": j.policy, "group_key": j.group_key, "dead_letter": j.dead_letter,
        "origin_id": j.origin_id, "retry_delay_ms": j.retry_delay_ms,
        "retry_backoff": None if j.retry_backoff is None else int(j.retry_backoff),
        "retry_delay_max_ms": j.retry_delay_max_ms, "keep_until": j.keep_until,
        "delete_after_ms": j.delete_after_ms, "last_error": j.last_error, "headers": j.headers,
        "tags": j.tags, "meta": j.meta,
    }


@dataclass(slots=True)
class Settle:
    """One fenced settlement in a batch: complete (``result``) or fail (``error``, ``delay_ms``).

    For a failure, ``delay_ms`` is the backoff before the next eligible claim; the engine turns the
    row ``dead`` instead when ``attempts >= max_attempts`` (or ``dead`` is True).
    """

    job_id: str
    token: str
    result: str | None = None
    error: str | None = None
    delay_ms: int = 0
    dead: bool = False
    generation: int = 0
    #: ``0.5 + random/2``: applied by the engine to a queue's own exponential retry policy.
    jitter: float = 1.0
    #: A failure's error-history entry (JSON text of one object), appended to the row's ``errors``
    #: keeping the first entry and the most recent (see :mod:`tenure.attempt_history`).
    entry: str | None = None
    #: A failure whose ``delay_ms`` the handler chose (``tenure.Retry``): it wins over the
    #: queue's own retry policy.
    fixed_delay: bool = False


def iter_chunks(seq: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]
