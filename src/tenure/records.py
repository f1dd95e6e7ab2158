"""Public, frozen record types: what tenure hands out and what callers hand back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STATES: tuple[str, ...] = ("pending", "leased", "done", "failed", "dead", "cancelled")
SETTLED_STATES: tuple[str, ...] = ("done", "dead", "cancelled")


@dataclass(frozen=True, slots=True)
class Progress:
    """What an attempt last reported with ``ctx.progress(fraction, note=...)``: ``fraction`` in
    [0, 1], an optional ``note``, ``at`` (epoch ms, the store's clock) when it was written, and the
    ``attempt`` that wrote it."""

    fraction: float
    note: str | None = None
    at: int | None = None
    attempt: int | None = None


@dataclass(frozen=True, slots=True)
class Job:
    """A job as the store holds it. Never carries the lease token (spec §3)."""

    id: str
    kind: str
    payload: Any
    state: str
    run_at: int
    attempts: int
    max_attempts: int
    lease_until: int | None
    lease_owner: str | None
    lease_generation: int
    last_error: str | None
    result: Any
    created_at: int
    updated_at: int
    queue: str = "default"
    priority: int = 0
    timeout_ms: int | None = None
    singleton_key: str | None = None
    group_key: str | None = None
    dead_letter: str | None = None
    origin_id: str | None = None
    #: Propagation headers carried from the enqueue (e.g. the OpenTelemetry ``traceparent``).
    headers: dict[str, str] | None = None
    #: The error history: one entry per failed attempt, oldest first, each a dict with
    #: ``attempt``, ``at`` (epoch ms), ``type`` (the exception's class path), ``message``,
    #: ``traceback`` (bounded) and ``owner``; at most :data:`tenure.attempt_history.MAX_ENTRIES`
    #: (the first and the most recent). ``last_error`` still holds the last message.
    errors: list[dict[str, Any]] = field(default_factory=list)
    #: When an operator asked to cancel the job while it ran (``jobs.request_cancel``), else None.
    cancel_requested_at: int | None = None
    #: The tags given at enqueue (short strings; ``page(tag=...)`` filters by one), else ``[]``.
    tags: list[str] = field(default_factory=list)
    #: The meta object given at enqueue (JSON, size-capped; never read by tenure), else ``{}``.
    meta: dict[str, Any] = field(default_factory=dict)
    #: What the running (or last) attempt reported with ``ctx.progress``, else None.
    progress: Progress | None = None
    #: How many of its parents (``enqueue(depends_on=...)``) still hold this job back; a
    #: ``pending`` job is eligible only at 0 (docs/composition.md).
    waiting_on: int = 0


@dataclass(frozen=True, slots=True)
class Dependency:
    """One edge of a composition: ``job_id`` depends on ``parent_id`` (its ``position``-th
    parent, counted from 0), with ``on_parent_failure`` its policy. ``met`` is True once the edge no
    longer holds the dependent back (the parent is done, or failed under the ``run`` policy).
    ``job`` is the record at the OTHER end (the parent in ``jobs.dependencies(id)``, the
    dependent in ``jobs.dependents(id)``), None when that job was deleted."""

    job_id: str
    parent_id: str
    position: int
    on_parent_failure: str
    met: bool
    job: Job | None


@dataclass(frozen=True, slots=True)
class Lease:
    """The capability to settle one attempt. Immutable: ``renew`` returns a new one.

    ``token`` is the fence; it is excluded from ``repr`` so it does not leak into logs.
    """

    job_id: str
    token: str = field(repr=False)
    generation: int
    attempt: int
    owner: str
    expires_at: int


@dataclass(frozen=True, slots=True)
class Claim:
    """What ``claim`` answers: the claimed record and the lease that settles it. ``reclaimed`` is
    True when the job was taken from an expired lease (its previous attempt's worker was lost);
    such a claim comes alone, never in a batch (docs/guarantees.md, "Liveness")."""

    job: Job
    lease: Lease
    reclaimed: bool = False


@dataclass(frozen=True, slots=True)
class Page:
    """One keyset page of jobs; pass ``next_after`` as ``after`` to continue (None at the end)."""

    items: list[Job]
    next_after: str | None


@dataclass(frozen=True, slots=True)
class SweepResult:
    """How many settled jobs a sweep removed."""

    removed: int


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One saved workflow node value, stamped with the generation of the attempt that wrote it."""

    run_id: str
    node_id: str
    value: Any
    generation: int


@dataclass(frozen=True, slots=True)
class Undecodable:
    """Stands in for a stored value that cannot be decoded (a payload written by foreign SQL,
    say), so ``get()``, ``page()`` and every listing still show the job. ``text`` is the start of
    the stored text, ``reason`` why it did not decode. A claim never runs such a job: it settles
    it ``dead`` with TN0008 (docs/guarantees.md, "Liveness: every outcome settles")."""

    text: str
    reason: str
