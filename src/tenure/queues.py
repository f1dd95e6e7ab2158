"""Queues as first-class objects: the registry, defaults resolved at enqueue, uniqueness policies,
debounce, dead letters, redrive and fan-out (user guide: ``docs/queues.md``).

The semantics are written once here; each engine answers the same small set of queries
(``queue_*`` and ``subscription_*`` methods of its session, in ``engine/<dialect>/queues.py``).
Everything that must hold across processes is enforced by the database: partial unique indexes
with ``ON CONFLICT DO NOTHING`` for the policies, throttling and debounce; the claim statement for
``singleton``/``stately`` and the concurrency limits; one transaction for a failure and its
dead-letter copy, for a redrive, and for a publish.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from . import _validate as v
from . import enqueue_options as eo
from .engine.base import Session
from .engine.rows import JobRow, NewJob, PlainRow, QueueRow
from .errors import InvalidArgument, QueueNotEmpty, QueueNotFound
from .ids import new_job_id
from .jobs import DEFAULT_MAX_ATTEMPTS
from .jobs_base import NotStreamable
from .queue_settings import _flag, _refuse_cycle
from .rate_window import GROUP_SCOPE, QUEUE_SCOPE, in_window, load, parse_rate, stored_rate_text

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .enqueue_options import QueueOptions
    from .store import Store

#: Rows per transaction of a redrive.
REDRIVE_BATCH = 1_000
#: How often an insert that collided with a job that then moved on is retried.
_DUPLICATE_RETRIES = 3


@dataclass(frozen=True, slots=True)
class Queue:
    """A queue's registry record: its policy, its defaults (``None``: the built-in one) and its
    limits. Durations are milliseconds, as on :class:`tenure.Job`."""

    name: str
    policy: str
    max_attempts: int | None
    retry_delay_ms: int | None
    retry_backoff: bool | None
    retry_delay_max_ms: int | None
    timeout_ms: int | None
    retention_ms: int | None
    delete_after_ms: int | None
    dead_letter: str | None
    concurrency_limit: int | None
    group_limit: int | None
    paused: bool
    created_at: int
    updated_at: int
    #: Starts allowed per period, as text (``"50/s"``, ``"6000/min"``), for the queue as a whole.
    rate_limit: str | None = None
    #: The same, for each ``group_key`` of the queue separately.
    group_rate_limit: str | None = None
    #: ``"round_robin"``: the claim serves the group keys in turn (None: in claim order).
    fairness: str | None = None
    #: Round-robin weights by group key (a group of weight w is served w times as often); others 1.
    group_weights: dict[str, int] | None = None


def _queue(row: QueueRow) -> Queue:
    r = row
    return Queue(r.name, r.policy, r.max_attempts, r.retry_delay_ms,
                 None if r.retry_backoff is None else bool(r.retry_backoff), r.retry_delay_max_ms, r.timeout_ms,
                 r.retention_ms, r.delete_after_ms, r.dead_letter, r.concurrency_limit, r.group_limit,
                 bool(r.paused), r.created_at, r.updated_at,
                 stored_rate_text(r.rate_limit, r.rate_period_ms), stored_rate_text(r.group_rate_limit, r.group_rate_period_ms),
                 r.fairness, None if r.group_weights is None else json.loads(r.group_weights))


@dataclass(frozen=True, slots=True)
class RateWindowState:
    """One rate window of a queue as it stands (``queues.windows``): the queue's own
    (``group_key`` None) or one group's; how many recorded starts count against a start now, of
    ``limit`` (None: no rate applies to it, the row only keeps the group's fairness turn); when it
    allows a start again (None: now); and the group's fairness turn."""

    group_key: str | None
    limit: int | None
    period_ms: int | None
    in_window: int
    blocked_until: int | None
    turn: int


@dataclass(slots=True)
class QueuedJob(NewJob):
    """A :class:`NewJob` carrying the enqueue options that are not columns of their own:
    ``retention_ms`` (turned into ``keep_until`` at insert), ``debounce_ms`` and
    ``singleton_next_slot``."""

    retention_ms: int | None = None
    debounce_ms: int | None = None
    #: ``singleton_next_slot``: a job whose ``singleton_for`` bucket is taken goes to the next
    #: bucket (its size in ms here), as pg-boss's ``singletonNextSlot``.
    singleton_next_slot: bool = False
    next_slot_ms: int | None = None


_NEW_JOB_FIELDS = tuple(f.name for f in fields(NewJob))


def _queue_settings(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Validated ``{column: value}`` for the options given, by the verdicts of
    :mod:`tenure.enqueue_options` (a name a queue does not take: TN1001)."""
    out = eo.queue_columns(options)
    if out.get("dead_letter") == name:
        raise InvalidArgument(f"queue {name!r} cannot be its own dead-letter queue")
    return out


def _apply_defaults(j: NewJob, q: QueueRow | None, current: Callable[[], int]) -> bool:
    """Fill ``j``'s options from its queue's registry row ``q`` (None: no row) in place: job
    option, then queue default, then built-in (docs/queues.md). True when ``j`` has a uniqueness
    key. ``current`` answers the clock (read only when a retention or a throttle needs it)."""
    retention = getattr(j, "retention_ms", None)
    if q is not None:
        if q.policy != "standard":
            j.policy = q.policy
            if j.singleton_key is None:
                j.singleton_key = ""  # the queue-wide key, as pg-boss does
        if not j.max_attempts:
            j.max_attempts = q.max_attempts or DEFAULT_MAX_ATTEMPTS
        if j.retry_delay_ms is None:
            j.retry_delay_ms = q.retry_delay_ms
        if j.retry_backoff is None and q.retry_backoff is not None:
            j.retry_backoff = bool(q.retry_backoff)
        if j.retry_delay_max_ms is None:
            j.retry_delay_max_ms = q.retry_delay_max_ms
        if j.timeout_ms is None:
            j.timeout_ms = q.timeout_ms
        if retention is None:
            retention = q.retention_ms
        if j.delete_after_ms is None:
            j.delete_after_ms = q.delete_after_ms
        if j.dead_letter is None and q.dead_letter != j.queue:
            j.dead_letter = q.dead_letter
    elif not j.max_attempts:
        j.max_attempts = DEFAULT_MAX_ATTEMPTS
    if retention is not None:
        j.keep_until = (j.run_at if j.run_at is not None else current() + j.delay_ms) + retention
    if j.singleton_on:
        t = current()
        j.singleton_on = t - t % j.singleton_on
    return j.singleton_key is not None


class Queues:
    """``store.queues``: the queue registry, and the queue semantics ``store.jobs`` relies on."""

    def __init__(self, store: Store) -> None:
        self._store = store

    # -- the registry ---------------------------------------------------------------------------
    def create(self, name: str, **options: Unpack[QueueOptions]) -> Queue:
        """Create queue ``name``, or set the given options on it if it exists (options not given
        are left as they are; pass ``None`` to clear one back to the built-in default). Answers
        the record. Durations are seconds (or timedeltas). The options: the ``queue`` column of
        docs/enqueue-options.md; any other name is TN1001 with the nearest one.

        ``policy`` is one of :data:`tenure.queue_settings.POLICIES` and may change only while the queue holds no live
        (pending, leased or failed) job: :class:`QueueNotEmpty` otherwise."""
        return self._put(name, _queue_settings(v.name(name, "queue"), options), create=True)

    def update(self, name: str, **options: Unpack[QueueOptions]) -> Queue:
        """Change the given options of an existing queue (``None`` clears one); answers the new
        record. :class:`QueueNotFound` when there is no such queue. New values apply to jobs
        enqueued from now on, and the limits to the next claim."""
        return self._put(name, _queue_settings(v.name(name, "queue"), options), create=False)

    def _put(self, name: str, settings: dict[str, Any], *, create: bool) -> Queue:
        store = self._store
        if settings.get("dead_letter") is None:
            with store._session() as s:
                put = s.queue_put(name, settings, store._now(), create=create)
        else:  # read the dead-letter graph, refuse a cycle and write, in one transaction
            with store._transaction_session() as s:
                s.queue_lock_dead_letters()
                graph = {r.name: r.dead_letter for r in s.queue_list()}
                graph[name] = settings["dead_letter"]
                _refuse_cycle(name, graph)
                put = s.queue_put(name, settings, store._now(), create=create)
        outcome, row = put.outcome, put.row
        if outcome == "missing":
            raise QueueNotFound(f"no queue named {name!r} (queues.create makes one; enqueue does too)",
                                queue=name)
        assert row is not None  # "ok" and "busy" answer the queue's row
        if outcome == "busy":
            raise QueueNotEmpty(
                f"queue {name!r} holds live jobs under policy {row.policy!r}: its policy can change only while "
                f"it has no pending, leased or failed job (pause it and let it drain, or delete(force=True))",
                queue=name)
        return _queue(row)

    def get(self, name: str) -> Queue:
        """The queue's record; :class:`QueueNotFound` when there is none."""
        v.name(name, "queue")
        with self._store._session() as s:
            row = s.queue_get(name)
        if row is None:
            raise QueueNotFound(f"no queue named {name!r}", queue=name)
        return _queue(row)

    def list(self) -> list[Queue]:
        """Every queue, by name (including those created by an enqueue)."""
        with self._store._session() as s:
            return [_queue(r) for r in s.queue_list()]

    def delete(self, name: str, *, force: bool = False) -> int:
        """Delete the queue with its jobs, their checkpoints and its subscriptions, in one
        transaction; answers how many jobs went. Refused with :class:`QueueNotEmpty` while it
        holds live (pending, leased or failed) jobs, unless ``force`` (which deletes them too: a
        worker holding one then gets a refusal when it settles). A later enqueue to the same name
        creates the queue afresh, with the built-in defaults."""
        v.name(name, "queue")
        _flag(force, "force")
        with self._store._session() as s:
            deleted = s.queue_delete(name, bool(force))
        outcome, n = deleted.outcome, deleted.jobs
        if outcome == "missing":
            raise QueueNotFound(f"no queue named {name!r}", queue=name)
        if outcome == "busy":
            raise QueueNotEmpty(f"queue {name!r} still has {n} live job(s) (pending, leased or failed): "
                                "let them settle, or delete(name, force=True) to drop them", queue=name, live=n)
        return n

    def windows(self, name: str, *, limit: int = 100) -> builtins.list[RateWindowState]:
        """The queue's rate windows as they stand now (docs/queues.md, "Rate limits"): the queue's
        own first, then up to ``limit`` groups by key. [] for a queue without rate limits or
        fairness, or that has not started a job under them yet. :class:`QueueNotFound` when there
        is no such queue."""
        v.name(name, "queue")
        v.positive_int(limit, "limit", maximum=100_000)
        store = self._store
        with store._session() as s:
            row = s.queue_get(name)
            if row is None:
                raise QueueNotFound(f"no queue named {name!r}", queue=name)
            rows = s.queue_rate_windows(name, limit + 1)
            now = store._now_or(s, store._now())
        q = _queue(row)
        rates = {QUEUE_SCOPE: parse_rate(q.rate_limit), GROUP_SCOPE: parse_rate(q.group_rate_limit)}
        out = []
        for w in rows:
            rate = rates.get(w.scope)
            pairs = load(w.starts)
            out.append(RateWindowState(
                None if w.scope == QUEUE_SCOPE else w.group_key, None if rate is None else rate.limit,
                None if rate is None else rate.period_ms, 0 if rate is None else in_window(pairs, now, rate.period_ms),
                w.blocked_until if rate is not None and w.blocked_until > now else None, w.turn))
        return out

    def pause(self, name: str) -> Queue:
        """Stop every process from claiming from this queue (enqueues still land; leased jobs
        finish). Takes effect at each claimer's next claim."""
        return self._pause(name, True)

    def resume(self, name: str) -> Queue:
        """Let claims take from this queue again."""
        return self._pause(name, False)

    def _pause(self, name: str, paused: bool) -> Queue:
        v.name(name, "queue")
        store = self._store
        with store._session() as s:
            row = s.queue_pause(name, paused, store._now())
        if row is None:
            raise QueueNotFound(f"no queue named {name!r}", queue=name)
        if not paused:
            store._wake_local()
        return _queue(row)

    # -- enqueue-time resolution (called by tenure.jobs) ----------------------------------------
    def apply_job_options(self, new: NewJob, options: dict[str, Any]) -> QueuedJob:
        """``new`` with the options checked by :func:`tenure.enqueue_options.checked` that are not
        columns of :class:`NewJob` itself (``{column: value}``) applied, and their rules together."""
        job = QueuedJob(**{f: getattr(new, f) for f in _NEW_JOB_FIELDS})
        for column, value in options.items():
            if value is not None:
                setattr(job, column, value)
        if job.dead_letter is not None and job.dead_letter == job.queue:
            raise InvalidArgument(f"a job cannot dead-letter to its own queue {job.queue!r}")
        if job.singleton_next_slot:
            if not job.singleton_on:
                raise InvalidArgument("singleton_next_slot moves a throttled job to the next singleton_for "
                                      "bucket: give singleton_for too")
            job.next_slot_ms = job.singleton_on  # the bucket's size (resolved to its start at insert)
        if job.debounce_ms:
            if job.run_at is not None or job.delay_ms:
                raise InvalidArgument("debounce sets the run time itself (now + debounce): give no run_at or delay")
            if job.singleton_on:
                raise InvalidArgument("give debounce or singleton_for, not both")
            job.delay_ms = job.debounce_ms
            if job.singleton_key is None:
                job.singleton_key = ""
        return job

    def insert(
        self, session: Session, jobs: builtins.list[NewJob], now: int | None
    ) -> builtins.list[str | None]:
        """Resolve each job's options (job option -> queue default -> built-in) and insert them;
        answers one id per job. A duplicate under a uniqueness rule answers the id of the job it
        collided with (a debounced one, the job it updated); None only if that job settled and
        a retry still could not insert (a race lost three times over)."""
        if not jobs:
            return []
        if len(jobs) == 1 and session.resolves_queue_defaults and not getattr(jobs[0], "debounce_ms", None):
            # One round trip: the defaults are resolved inside the INSERT. Only a row it did not
            # write (an existing id, a uniqueness duplicate: rare) takes the full path below,
            # which resolves again and answers the id it collided with.
            jid = session.job_insert_resolved(jobs[0], getattr(jobs[0], "retention_ms", None), now)
            if jid is not None:
                return [jid]
        if not self._resolve(session, jobs, now):
            return [got.id for got in session.job_insert(jobs, now)]
        if len(jobs) == 1:  # one insert (and, for a duplicate, reads): no transaction to pay for
            return self._insert_unique(session, jobs, now)
        with session.queue_atomic():  # several statements, one all-or-nothing enqueue_many
            return self._insert_unique(session, jobs, now)

    def _resolve(self, session: Session, jobs: Sequence[NewJob], now: int | None) -> bool:
        """Fill each job's defaults in place; True when one has a uniqueness key."""
        names = {j.queue for j in jobs}
        registry = session.queue_defaults(list(names))
        clock: list[int | None] = [now]

        def current() -> int:
            t = clock[0]
            if t is None:
                t = clock[0] = session.now_ms()
            return t

        keyed = False
        for j in jobs:
            if _apply_defaults(j, registry.get(j.queue), current):
                keyed = True
        return keyed

    def insert_fresh(self, session: Session, jobs: Iterable[NewJob], queues: set[str],
                     now: int | None) -> builtins.list[str] | None:
        """Stream ``jobs`` into the store as they come (``Session.job_copy``: COPY on
        PostgreSQL), each job's defaults resolved as :meth:`insert` resolves them. For jobs
        whose ids were all minted for this call and that carry no uniqueness option (no
        ``singleton_key``, ``singleton_for`` or ``debounce``), all in ``queues``. Answers their
        ids, or None without taking a job when it cannot stream: the engine does not copy, or
        one of ``queues`` has a policy (which gives every job the queue-wide key). All or
        nothing; an error raised while taking the jobs (a validation) undoes the lot, and a job
        that breaks the terms above raises :class:`NotStreamable` (nothing written)."""
        if not session.copies_jobs:
            return None
        registry = session.queue_defaults(builtins.list(queues))
        if any(q.policy != "standard" for q in registry.values()):
            return None
        t = session.now_ms() if now is None else now

        def clock() -> int:
            return t

        def resolved() -> Iterator[NewJob]:
            for j in jobs:
                if j.queue not in queues or _apply_defaults(j, registry.get(j.queue), clock):
                    raise NotStreamable(j.id)
                yield j

        return session.job_copy(resolved(), t)

    def insert_plain(self, session: Session, chunks: Iterable[Sequence[PlainRow]], queues: set[str],
                     now: int | None) -> bool:
        """Write plain rows (``tenure.plain_bulk``: fresh ids, no option) of ``queues``, all or
        nothing (``Session.job_insert_plain``), every other column resolved once per queue as
        :meth:`insert` resolves it for such a job (a plain job's resolution depends on its queue
        alone). False, with nothing taken from ``chunks``, when one of ``queues`` has a policy
        (it gives every job the queue-wide key: the resolving path answers the duplicates), or
        when the engine wrote nothing (an id was present)."""
        registry = session.queue_defaults(builtins.list(queues))
        if any(q.policy != "standard" for q in registry.values()):
            return False
        t = session.now_ms() if now is None else now
        templates: dict[str, NewJob] = {}
        for name in queues:
            j = templates[name] = NewJob("", "", None, name, 0, None, 0, 0)
            _apply_defaults(j, registry.get(name), lambda: t)
        return session.job_insert_plain(chunks, templates, t)

    def _insert_unique(
        self, session: Session, jobs: builtins.list[NewJob], now: int | None
    ) -> builtins.list[str | None]:
        plain = [j for j in jobs if not getattr(j, "debounce_ms", None)]
        answers: dict[int, str | None] = {}
        if plain:
            for j, got in zip(plain, session.job_insert(plain, now), strict=True):
                if got.inserted or j.singleton_key is None:
                    answers[id(j)] = got.id
                elif getattr(j, "next_slot_ms", None):
                    answers[id(j)] = self._next_slot(session, j, now)
                else:
                    answers[id(j)] = self._duplicate(session, j, now)
        for j in jobs:
            debounce_ms = getattr(j, "debounce_ms", None)  # a QueuedJob's (apply_job_options)
            if debounce_ms:
                answers[id(j)] = self._debounce(session, j, debounce_ms, now)
        return [answers[id(j)] for j in jobs]

    def _next_slot(self, session: Session, j: NewJob, now: int | None) -> str | None:
        """A ``singleton_next_slot`` job whose bucket was taken: inserted in the NEXT bucket, due
        no sooner than that bucket's start (pg-boss's ``singletonNextSlot``). If that bucket is
        taken too, the answer is the job holding it (as for any duplicate)."""
        if session.job_get(j.id) is not None:
            return j.id  # its own id exists: an idempotent repeat, not a throttled send
        size = getattr(j, "next_slot_ms", None) or 0
        assert j.singleton_on is not None
        current = now if now is not None else session.now_ms()
        due = j.run_at if j.run_at is not None else current + j.delay_ms
        j.singleton_on += size
        j.run_at = max(due, j.singleton_on)
        if j.keep_until is not None:
            j.keep_until += j.run_at - due
        (got,) = session.job_insert([j], now)
        return got.id if got.inserted else self._duplicate(session, j, now)

    def _duplicate(self, session: Session, j: NewJob, now: int | None) -> str | None:
        """The answer for a keyed job the insert did not write."""
        for _ in range(_DUPLICATE_RETRIES):
            if session.job_get(j.id) is not None:
                return j.id  # its own id exists: written now, or an idempotent repeat
            dup = session.queue_find_duplicate(j, False)
            if dup is not None:
                return dup
            # The job it collided with left the colliding state meanwhile: try again.
            (got,) = session.job_insert([j], now)
            if got.inserted:
                return got.id
        return None

    def _debounce(self, session: Session, j: NewJob, debounce_ms: int, now: int | None) -> str | None:
        """Update the pending debounced job of j's (queue, kind, key), or insert j."""
        for _ in range(_DUPLICATE_RETRIES):
            got = session.queue_debounce(j, debounce_ms, now)
            if got is not None:
                return got.id
            if session.job_get(j.id) is not None:
                return j.id
            dup = session.queue_find_duplicate(j, False)  # refused by a policy or throttle index
            if dup is not None:
                return dup
            # else: a concurrent debounce inserted first; the next update finds its job
        return session.queue_find_duplicate(j, True)

    # -- dead letters ---------------------------------------------------------------------------
    def dead_letter(self, session: Session, rows: builtins.list[JobRow], now: int | None) -> None:
        """Copy the newly dead ``rows`` that name a dead-letter queue into it, in the caller's
        transaction: same kind, payload, priority and keys, ``last_error`` kept, ``origin_id`` the
        dead job's id; attempts and retry settings from the dead-letter queue's defaults."""
        pairs = [(r.id, new_job_id()) for r in rows if r.state == "dead" and r.dead_letter and r.dead_letter != r.queue]
        if pairs:
            session.queue_dead_letter(pairs, DEFAULT_MAX_ATTEMPTS, now)

    def redrive(self, queue: str, *, limit: int | None = None) -> int:
        """Move the dead-letter copies waiting in ``queue`` (pending or failed) back to the queues
        they died in, oldest first: each becomes a fresh pending job there (attempts 0, that
        queue's current defaults, ``origin_id`` the job that died), and the copy is settled as
        ``cancelled`` with ``result == {"redriven_as": new_id}``, in one transaction per batch.
        A copy the origin queue's policy refuses (its key is taken) stays where it is. Answers how
        many moved."""
        v.name(queue, "queue")
        v.positive_int(limit, "limit", allow_none=True)
        store = self._store
        moved = 0
        after: tuple[int, str] | None = None
        first = True
        while limit is None or moved < limit:
            want = REDRIVE_BATCH if limit is None else min(REDRIVE_BATCH, limit - moved)
            now = store._now()
            with store._transaction_session() as s:
                if first and s.queue_get(queue) is None:
                    raise QueueNotFound(f"no queue named {queue!r}", queue=queue)
                first = False
                rows = s.queue_redrive_select(queue, want, after)
                if not rows:
                    break
                fresh = [NewJob(id=new_job_id(), kind=r.kind, payload=r.payload, queue=r.origin_queue,
                                priority=r.priority, run_at=None, delay_ms=0, max_attempts=0,
                                singleton_key=r.singleton_key, group_key=r.group_key, origin_id=r.origin_id)
                         for r in rows]
                ids = self.insert(s, fresh, now)
                pairs = [(r.id, j.id) for r, j, got in zip(rows, fresh, ids, strict=True) if got == j.id]
                if pairs:
                    s.queue_redrive_settle(pairs, now)
                after = (rows[-1].created_at, rows[-1].id)
            moved += len(pairs)
            if pairs:
                store._wake_local()
            if len(rows) < want:
                break
        return moved

    # -- fan-out --------------------------------------------------------------------------------
    def subscribe(self, event: str, queue: str) -> bool:
        """Subscribe ``queue`` to ``event`` (creating the queue if needed): each publish of the
        event enqueues one job on it. True when the subscription is new."""
        v.name(event, "event")
        v.name(queue, "queue")
        store = self._store
        with store._session() as s:
            return s.subscription_add(event, queue, store._now())

    def unsubscribe(self, event: str, queue: str) -> bool:
        """Remove one subscription; True when it existed."""
        v.name(event, "event")
        v.name(queue, "queue")
        with self._store._session() as s:
            return s.subscription_remove(event, queue)

    def subscriptions(self, event: str | None = None) -> builtins.list[tuple[str, str]]:
        """``(event, queue)`` pairs, by event then queue (only ``event``'s when given)."""
        if event is not None:
            v.name(event, "event")
        with self._store._session() as s:
            return [(r.event, r.queue) for r in s.subscription_list(event)]

    def publish(
        self, event: str, payload: Any = None, *, conn: Any = None, **options: Any
    ) -> builtins.list[str | None]:
        """Enqueue one job of kind ``event`` with ``payload`` on every queue subscribed to
        ``event``, in one transaction; answers the ids in queue-name order ([] when nothing is
        subscribed). ``options`` are the ``publish`` column of docs/enqueue-options.md (each queue's defaults still apply);
        ``conn=`` writes in the caller's own transaction (the outbox)."""
        v.name(event, "event")
        eo.refuse(options, eo.PUBLISH)
        store = self._store
        view = store.jobs

        def build(queues: list[str]) -> list[NewJob]:
            return [view._build(event, payload, {**options, "queue": q}) for q in queues]

        now = store._now()
        if conn is not None:
            s = store._adopt(conn)
            return self.insert(s, build(s.subscription_queues(event)), now)
        with store._transaction_session() as s:
            queues = s.subscription_queues(event)
            ids = self.insert(s, build(queues), now) if queues else []
        if ids:
            store._wake_local()
        return ids
