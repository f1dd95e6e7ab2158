"""The rows that cross the engine boundary, each a named record defined once here: a job
(:class:`JobRow`, whose fields give :data:`JOB_COLUMNS`), a queue, a schedule, a worker, the read
model's rows; going in, a new job (:class:`NewJob`) and one settlement (:class:`Settle`); and the
small constants both sides agree on. A dialect answers these records; the semantics above read
them by field name, never by position (tests/core/test_engine_contract.py keeps it so)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple


class JobRow(NamedTuple):
    """One job row as it crosses the boundary (JSON columns still as text). All fields but the
    last two are the public :class:`tenure.Job` fields, in field order; ``lease_token`` never
    leaves :mod:`tenure.jobs`."""

    id: str
    kind: str
    payload: str | None
    state: str
    run_at: int
    attempts: int
    max_attempts: int
    lease_until: int | None
    lease_owner: str | None
    lease_generation: int
    last_error: str | None
    result: str | None
    created_at: int
    updated_at: int
    queue: str
    priority: int
    timeout_ms: int | None
    singleton_key: str | None
    group_key: str | None
    dead_letter: str | None
    origin_id: str | None
    headers: str | None
    errors: str | None
    cancel_requested_at: int | None
    tags: str | None
    meta: str | None
    progress: str | None
    waiting_on: int | None
    lease_token: str | None
    #: On a row answered by a claim: true when the job was reclaimed from an expired lease (its
    #: previous attempt's worker was lost). Such a row is always answered alone
    #: (docs/guarantees.md, "Liveness: bounded reclaim and dead letters"). None on every other row.
    reclaimed: bool | None = None


_FIELDS = len(JobRow._fields)
_new = tuple.__new__


def job_row(r: Sequence[Any] | None) -> JobRow | None:
    """A driver row in :data:`JOB_COLUMNS` order (plus the claim's flag, if any) as a :class:`JobRow`."""
    if r is None:
        return None
    # A claim's row has every field: made at C speed (the claim path is hot), the others padded.
    return _new(JobRow, r) if len(r) == _FIELDS else JobRow(*r)


def job_rows(rows: Iterable[Sequence[Any]]) -> list[JobRow]:
    """:func:`job_row` of each driver row."""
    return [_new(JobRow, r) if len(r) == _FIELDS else JobRow(*r) for r in rows]


#: Column order of every job row the engines select (every :class:`JobRow` field but the claim's flag).
JOB_COLUMNS: tuple[str, ...] = JobRow._fields[:-1]
#: Positions of two :class:`JobRow` fields, for tests that build settlements from raw rows.
TOKEN_INDEX = JOB_COLUMNS.index("lease_token")
RECLAIMED_INDEX = len(JOB_COLUMNS)
#: How an engine hands over a TEXT value whose stored bytes are not UTF-8 (written by foreign SQL,
#: or by an older tenure): this prefix, then the text with U+FFFD for each bad byte. Never valid
#: JSON; the semantics layer shows it as a ``tenure.Undecodable`` value.
NOT_UTF8 = "\ufffe[not UTF-8] "
#: Error-history entries a failure keeps besides the first (``tenure.attempt_history.MAX_ENTRIES``
#: is this plus one); the engines trim ``errors`` to them inside the failing statement.
HISTORY_KEEP = 9
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


class QueueRow(NamedTuple):
    """A queue's registry row (``tenure_queues``); unset options are None, ``group_weights`` is
    JSON text."""

    name: str
    policy: str
    max_attempts: int | None
    retry_delay_ms: int | None
    retry_backoff: int | None
    retry_delay_max_ms: int | None
    timeout_ms: int | None
    retention_ms: int | None
    delete_after_ms: int | None
    dead_letter: str | None
    concurrency_limit: int | None
    group_limit: int | None
    paused: int
    created_at: int
    updated_at: int
    rate_limit: int | None
    rate_period_ms: int | None
    group_rate_limit: int | None
    group_rate_period_ms: int | None
    fairness: str | None
    group_weights: str | None


def queue_row(r: Sequence[Any] | None) -> QueueRow | None:
    """A driver row in :data:`QUEUE_COLUMNS` order as a :class:`QueueRow`."""
    return None if r is None else QueueRow(*r)


#: The columns of :class:`QueueRow`, as a dialect's SELECT lists them.
QUEUE_COLUMNS: tuple[str, ...] = QueueRow._fields


class QueueSummaryRow(NamedTuple):
    """A registered queue as the read model shows it (:meth:`Session.insight_queues`)."""

    name: str
    paused: int
    policy: str
    concurrency_limit: int | None
    group_limit: int | None
    dead_letter: str | None
    created_at: int
    updated_at: int
    rate_limit: int | None
    rate_period_ms: int | None
    group_rate_limit: int | None
    group_rate_period_ms: int | None
    fairness: str | None


class RateWindowRow(NamedTuple):
    """One rate window of a queue (``scope`` 0: the queue's own, 1: a group's); ``starts`` is
    JSON text of ``[[ms, count], ...]``."""

    scope: int
    group_key: str
    starts: str
    blocked_until: int
    turn: int


class RedriveRow(NamedTuple):
    """A dead-letter copy waiting in its queue, as redrive reads it."""

    id: str
    kind: str
    payload: str | None
    origin_queue: str
    origin_id: str | None
    priority: int
    singleton_key: str | None
    group_key: str | None
    created_at: int


class ScheduleRow(NamedTuple):
    """A schedule's row (``tenure_schedules``); ``payload`` and ``options`` are JSON text."""

    name: str
    key: str
    cron: str
    tz: str
    kind: str
    payload: str | None
    queue: str | None
    options: str | None
    catch_up: str
    last_fire_at: int | None
    next_fire_at: int | None
    created_at: int
    updated_at: int
    paused_at: int | None


#: The columns of :class:`ScheduleRow`, as a dialect's SELECT lists them.
SCHEDULE_COLUMNS: tuple[str, ...] = ScheduleRow._fields


class WorkerRow(NamedTuple):
    """A worker's registry row (``tenure_workers``); ``queues``, ``kinds`` and ``stats`` are JSON text."""

    id: str
    host: str
    pid: int
    queues: str | None
    kinds: str | None
    concurrency: int
    started_at: int
    heartbeat_at: int
    in_flight: int
    stats: str | None


#: The columns of :class:`WorkerRow`, as a dialect's SELECT lists them.
WORKER_COLUMNS: tuple[str, ...] = WorkerRow._fields


class LeaderRow(NamedTuple):
    """Who holds a leadership role, until when."""

    owner: str
    expires_at: int


class CheckpointRow(NamedTuple):
    """One saved node value of a run (JSON text) and the generation that saved it."""

    node_id: str
    value: str
    generation: int


class DependencyRow(NamedTuple):
    """One edge of a job as :meth:`Session.dependency_list` answers it: the job at the other end
    (a parent or a dependent), its place and policy, and its row (None once it is gone)."""

    other_id: str
    position: int
    policy: str
    released: bool
    job: JobRow | None


def dependency_row(r: Sequence[Any]) -> DependencyRow:
    """A driver row ``(other_id, position, policy, released, *JOB_COLUMNS)`` as a :class:`DependencyRow`."""
    return DependencyRow(r[0], r[1], r[2], bool(r[3]), None if r[4] is None else JobRow(*r[4:]))


class Inserted(NamedTuple):
    """One job of an insert: the id that answers it (a duplicate's: the EXISTING job's) and
    whether this call wrote it."""

    id: str
    inserted: bool


class SettledAndClaimed(NamedTuple):
    """What :meth:`Session.job_complete_and_claim` did: the ids it settled and the rows it claimed."""

    settled: set[str]
    claimed: list[JobRow]


class QueuePut(NamedTuple):
    """What :meth:`Session.queue_put` did: ``outcome`` ``"ok"``, ``"missing"`` or ``"busy"``, and
    the queue's row after it (None when missing)."""

    outcome: str
    row: QueueRow | None


class QueueDeleted(NamedTuple):
    """What :meth:`Session.queue_delete` did: ``outcome`` ``"deleted"`` (``jobs`` removed),
    ``"missing"`` (0) or ``"busy"`` (``jobs``: the live ones it holds)."""

    outcome: str
    jobs: int


class SubscriptionRow(NamedTuple):
    """One fan-out subscription: ``queue`` receives the jobs published as ``event``."""

    event: str
    queue: str


class SentSignal(NamedTuple):
    """A stored signal's id and when it was sent (epoch ms)."""

    id: int
    sent_at: int


class TakenSignal(NamedTuple):
    """A consumed signal's id and payload (JSON text or None)."""

    id: int
    payload: str | None


class Reaped(NamedTuple):
    """What one pass of :meth:`Session.worker_reap` ended: leases given back, worker rows deleted."""

    leases: int
    workers: int


class TableSize(NamedTuple):
    """The jobs table's size without reading it: its rows (the planner's estimate) and its pages."""

    rows: int
    pages: int


class TableStats(NamedTuple):
    """What the statistics collector says of the jobs table (PostgreSQL): dead tuples, live ones,
    rows inserted since its last vacuum, changed since its last analyze, whether autovacuum runs on
    the server, the server's autovacuum settings (``{name: text or None}``), and the table's own
    storage options (``name=value`` texts, or None)."""

    dead: int
    live: int
    inserted: int
    modified: int
    autovacuum_on: bool
    settings: dict[str, str | None]
    reloptions: list[str] | None


class QueueStateCount(NamedTuple):
    """How many jobs of ``queue`` are in ``state``."""

    queue: str
    state: str
    jobs: int


class SettledBucket(NamedTuple):
    """How many jobs reached ``state`` in the ``bucket``-th time bucket of a window."""

    bucket: int
    state: str
    jobs: int


class RateDeferred(NamedTuple):
    """Due jobs of ``queue`` that a closed rate window holds back."""

    queue: str
    jobs: int


class SchemaVersion(NamedTuple):
    """One applied migration."""

    version: int
    name: str
    applied_at: int


#: What a dependent does when a parent ends ``dead`` or ``cancelled`` (docs/composition.md): it is
#: cancelled (the default), it runs anyway once every other parent has settled, or it waits.
PARENT_FAILURE_POLICIES: tuple[str, ...] = ("cancel", "run", "wait")


@dataclass(slots=True)
class Edge:
    """One dependency to store: ``job_id`` waits for ``parent_id`` (its ``position``-th parent).
    ``released`` is True when the edge is already met at enqueue (the parent is done, or it
    failed and ``policy`` is ``run``)."""

    job_id: str
    parent_id: str
    position: int
    policy: str
    released: bool


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


#: One job of a plain bulk (``tenure.plain_bulk``): (id, kind, payload JSON or None, queue,
#: priority); every other column comes from its queue's template (``Session.job_insert_plain``).
PlainRow = tuple[str, str, str | None, str, int]


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


@dataclass(slots=True)
class RetentionMark:
    """Where one walk of the retention statements has got to, for the next batch to start there
    (keyset): each deleted batch leaves dead entries at the head of its index until a vacuum, and
    a batch started from the index's first key walks them all again. ``custom`` and ``custom_id``
    are the highest ``(updated_at + delete_after_ms, id)`` among the rows deleted so far,
    ``default`` and ``default_id`` the highest ``(updated_at, id)`` of those with no horizon of
    their own; None: nothing deleted yet. The next batch starts just past ``(custom, custom_id)``
    and ``(default, default_id)`` (PostgreSQL: neither walks again the dead entries of rows tied
    with the last one deleted; SQLite, which leaves no dead entries, AT ``custom`` and
    ``default``, its ids staying None), so a tie cut by the limit is still found. Meaningful only with the
    same ``now`` for the whole walk (a row settles with ``updated_at`` = the clock, never behind a
    fixed horizon); a row skipped because another transaction held it is left to the next walk."""

    custom: int | None = None
    custom_id: str | None = None
    default: int | None = None
    default_id: str | None = None


def iter_chunks(seq: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]
