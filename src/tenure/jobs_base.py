"""What both job views offer: ``store.jobs`` (:class:`tenure.jobs.Jobs`) and a transaction's
``tx.jobs`` (:class:`tenure.transaction.TxJobs`): enqueue, enqueue_many, get, checkpoints."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from . import _validate as v
from . import dependencies
from . import enqueue_options as eo
from .checkpoints import Checkpoints
from .engine.rows import NewJob
from .enqueue_options import VALID_NAMES, checked_name
from .errors import (
    InvalidArgument,
    InvalidType,
    LeaseRequired,
    StoreUnavailable,
)
from .ids import new_job_id, new_job_ids
from .job_rows import row_to_job
from .plain_bulk import PLAIN_KEYS, plain_chunks, plain_queues
from .records import Job, Lease
from .tracing import enqueue_headers, tracing_now

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .enqueue_options import EnqueueOptions
    from .store import Store

T = TypeVar("T")

#: An ``enqueue_many`` item with only these keys is built by ``_build_plain`` (a fast path over
#: a subset of the table's ``enqueue_many`` options; tests/core/test_enqueue_options.py): the
#: plain bulk path's keys.
_PLAIN_KEYS = PLAIN_KEYS

def _is_plain(spec: Any) -> bool:
    return type(spec) is dict and "kind" in spec and _PLAIN_KEYS.issuperset(spec)

def _check_names(kind: Any, queue: Any) -> None:
    """``v.name`` of a job's kind and queue, costing no call for a name already found valid."""
    if type(kind) is not str or kind not in VALID_NAMES:
        checked_name(kind, "kind")
    if type(queue) is not str or queue not in VALID_NAMES:
        checked_name(queue, "queue")

#: Pauses before each repeat of an enqueue whose connection broke under it (same ids; a repeat of
#: one that did commit changes nothing). Never inside the caller's transaction.
ENQUEUE_RETRY_PAUSES_S = (0.05, 0.25)

log = logging.getLogger("tenure.jobs")

#: From this many jobs on, ``enqueue_many`` streams jobs that cannot collide into the store
#: (``Queues.insert_fresh``); fewer go as one INSERT statement.
STREAM_MIN_JOBS = 64


#: An ``enqueue_many`` item with one of these keys may collide with a stored job, or is written
#: with its dependency edges in one transaction (tenure.dependencies), which streaming does not
#: do: it takes the path that answers the job it collided with (the table's ``streams=False``).
_COLLIDING_KEYS = frozenset(name for name, o in eo.on(eo.MANY).items() if not o.streams)


class NotStreamable(Exception):
    """A job handed to ``Queues.insert_fresh`` that it cannot stream (its queue not among those
    announced, or a uniqueness key): ``enqueue_many`` inserts the jobs the other way instead."""


def _streamable(specs: list[Any]) -> bool:
    """Whether every item is a dict that cannot collide with a stored job (its id is minted, it
    has no uniqueness option) and names its queue by a string (or not at all)."""
    for spec in specs:
        if type(spec) is not dict or not _COLLIDING_KEYS.isdisjoint(spec):
            return False
        q = spec.get("queue", "default")
        if type(q) is not str:
            return False
    return True


#: The columns of options that :meth:`tenure.queues.Queues.apply_job_options` applies (they
#: are not :class:`NewJob` columns of their own, or have rules across options).
_QUEUED_COLUMNS = frozenset({"retry_delay_ms", "retry_backoff", "retry_delay_max_ms", "retention_ms",
                             "delete_after_ms", "dead_letter", "debounce_ms", "singleton_next_slot"})


class _JobsBase:
    """What both the root view (``store.jobs``) and a transaction's view (``tx.jobs``) offer."""

    _store: Store

    def _session(self):  # pragma: no cover - overridden
        raise NotImplementedError

    # -- enqueue -------------------------------------------------------------------------------
    def enqueue(self, kind: str, payload: Any = None, *, conn: Any = None,
                **options: Unpack[EnqueueOptions]) -> str | None:
        """Store one job and answer its id. A caller-supplied ``id`` makes this idempotent: an
        existing id changes nothing and is answered as is. A duplicate under a queue's uniqueness
        policy answers the EXISTING job's id (never an integrity error). ``delay`` and ``timeout``
        are seconds (or timedeltas); ``run_at`` is epoch ms or a datetime. With ``conn=`` (a driver
        connection), the job is written in the caller's own transaction (the outbox).

        Every option, its type and where else it is accepted: docs/enqueue-options.md (the table
        :mod:`tenure.enqueue_options`); an unknown one is TN1001 with the nearest name.

        Queue options (each overrides the queue's default; see ``docs/queues.md``): ``retry_delay``,
        ``retry_backoff``, ``retry_delay_max``, ``retention``, ``delete_after`` (seconds),
        ``dead_letter`` (a queue name) and ``debounce`` (seconds: a later enqueue of the same
        queue, kind and ``singleton_key`` while this one is pending replaces its payload and
        pushes its run time, answering its id).

        ``tags`` (a list of short strings, filterable: ``page(tag=...)``) and ``meta`` (a JSON
        object of at most 4 KiB) are stored on the job as given (docs/operations.md, "Tags and
        meta"); a bad one is TN1001/TN1002 naming the field."""
        new = self._build(kind, payload, options)
        return self._insert([new], conn)[0]

    async def enqueue_async(self, kind: str, payload: Any = None, *, conn: Any = None,
                            **options: Unpack[EnqueueOptions]) -> str | None:
        """``enqueue`` for async code (the same keywords, typed by the same table): runs on a
        worker thread, so the event loop never blocks on the database (SQLite's gate, a
        PostgreSQL round-trip)."""
        import asyncio

        return await asyncio.to_thread(self.enqueue, kind, payload, conn=conn, **options)

    async def enqueue_many_async(self, jobs: Iterable[dict[str, Any]], **options: Any) -> list[str | None]:
        """``enqueue_many`` without blocking the event loop."""
        import asyncio

        return await asyncio.to_thread(self.enqueue_many, list(jobs), **options)

    def enqueue_many(self, jobs: Iterable[dict[str, Any]], *, conn: Any = None) -> list[str | None]:
        """Store many jobs in one transaction; each item is ``enqueue``'s keywords as a dict
        (``kind`` required). All are validated before anything is written."""
        if isinstance(jobs, dict | str | bytes) or not isinstance(jobs, Iterable):
            raise InvalidType(f"enqueue_many takes an iterable of dicts of enqueue arguments, got "
                              f"{type(jobs).__name__}")
        specs = jobs if isinstance(jobs, list) else list(jobs)
        fresh = new_job_ids(len(specs))  # one clock read and one urandom for the batch
        minted = iter(fresh)
        traced = tracing_now()  # one look at the current trace for the batch
        queues = plain_queues(specs) if len(specs) >= STREAM_MIN_JOBS and not traced else None
        if queues is not None and self._insert_plain(specs, fresh, queues, conn):
            return list(fresh)
        # Not written plain: a policy queue, an id present, or a lost connection that may have
        # committed them; the resolving path answers each (never the COPY stream: it would
        # collide with rows that did commit).
        if queues is None and len(specs) >= STREAM_MIN_JOBS and _streamable(specs):
            return self._insert_streamed(specs, minted, conn, traced)
        build, plain = self._build_spec, self._build_plain
        built = [plain(spec, minted, traced) if _is_plain(spec) else build(spec, minted) for spec in specs]
        if not built:
            return []
        return self._insert(built, conn)

    def _insert_streamed(self, specs: list[dict[str, Any]], minted: Iterator[str], conn: Any,
                         traced: bool = True) -> list[str | None]:
        """``enqueue_many`` of jobs that cannot collide (see :func:`_streamable`): each is built
        (validated) and handed to the store as the previous ones are being written
        (``Queues.insert_fresh``: COPY on PostgreSQL), so the database inserts while Python
        validates. A bad item undoes the lot, as on the other path. Where the store cannot stream
        (SQLite, a queue with a policy), or the write was interrupted by a lost connection, the
        rest is built and everything goes through :meth:`_insert`."""
        store = self._store
        built: list[NewJob] = []

        build, plain = self._build_spec, self._build_plain

        def each() -> Iterator[NewJob]:
            for spec in specs:
                job = plain(spec, minted, traced) if _is_plain(spec) else build(spec, minted)
                built.append(job)
                yield job

        source = each()
        queues = {spec.get("queue", "default") for spec in specs}
        ids: list[str] | None = None
        now = store._now()
        try:
            ids = self._write(conn, lambda s: store.queues.insert_fresh(s, source, queues, now))
        except NotStreamable:
            ids = None
        except StoreUnavailable as exc:
            if conn is not None or not self._retriable(exc):
                raise
            ids = None  # it may have committed: _insert answers an existing id as itself
        if ids is None:
            for _ in source:  # build (validate) the rest: each() appends every job to built
                pass
            return self._insert(built, conn)
        self._after_enqueue()
        return list(ids)

    def _insert_plain(self, specs: list[dict[str, Any]], ids: list[str], queues: set[str], conn: Any) -> bool:
        """``enqueue_many`` of plain items (``tenure.plain_bulk``: only kind, payload, queue and
        priority, no trace current), checked chunk by chunk as the store writes the chunk
        before. A bad item undoes the lot. False when nothing was written and the general path
        is to insert them with the same ids: a queue with a policy, an id already present, or
        a connection lost during the write (it may have committed: an existing id then answers
        itself)."""
        store = self._store
        chunks = plain_chunks(specs, ids, store.max_payload_bytes)
        now = store._now()
        try:
            written = self._write(conn, lambda s: store.queues.insert_plain(s, chunks, queues, now))
        except StoreUnavailable as exc:
            if conn is not None or not self._retriable(exc):
                raise
            return False
        if written:
            self._after_enqueue()
        return written

    def _build_spec(self, spec: Any, minted: Iterator[str] | None = None) -> NewJob:
        """One ``enqueue_many`` item, validated and encoded (nothing is written). ``minted``
        supplies the id of an item that has none."""
        if not isinstance(spec, dict):
            raise InvalidType(f"enqueue_many takes dicts of enqueue arguments, got {type(spec).__name__}")
        if "kind" not in spec:
            raise InvalidArgument("every enqueue_many item needs a 'kind'")
        return self._build(spec["kind"], spec.get("payload"), spec, eo.MANY, minted)

    def _build_plain(self, spec: dict[str, Any], minted: Iterator[str], traced: bool = True) -> NewJob:
        """:meth:`_build_spec` for an item with only ``kind``, ``payload``, ``queue`` and
        ``priority`` (the usual bulk item), without the general path's keyword plumbing: the
        same checks, the same record. ``traced``: False when no trace is current (then it stores
        no headers without asking the tracer per job)."""
        kind = spec["kind"]
        queue = spec.get("queue", "default")
        priority = spec.get("priority", 0)
        payload = spec.get("payload")
        _check_names(kind, queue)
        text = None if payload is None else v.dump_json(payload, "payload", self._store.max_payload_bytes)
        if type(priority) is not int or not v.INT4_MIN <= priority <= v.INT4_MAX:
            v.int4(priority, "priority")
        new = NewJob(next(minted), kind, text, queue, priority, None, 0, 0)
        if traced:
            new.headers = enqueue_headers(kind, queue)
        return new

    def _build(self, kind: Any, payload: Any, options: Mapping[str, Any], surface: str = eo.ENQUEUE,
               minted: Iterator[str] | None = None) -> NewJob:
        """One job validated and encoded (nothing is written): ``options`` as ``surface`` takes
        them, each by its verdict in :mod:`tenure.enqueue_options`, then the rules across options.
        ``minted`` supplies the id when none is given."""
        store = self._store
        if type(kind) is not str or kind not in VALID_NAMES:  # a name seen valid costs no call
            checked_name(kind, "kind")
        text = None if payload is None else v.dump_json(payload, "payload", store.max_payload_bytes)
        if not options:  # the common case: no option, no further call
            new = NewJob(new_job_id() if minted is None else next(minted), kind, text, "default", 0, None, 0, 0)
            new.headers = enqueue_headers(kind, "default")
            return new
        values = eo.checked(options, surface)
        get = values.get
        job_id = get("id")
        if job_id is None:
            job_id = new_job_id() if minted is None else next(minted)
        queue = get("queue", "default")
        at, delay_ms = get("run_at"), get("delay_ms") or 0
        if at is not None and delay_ms:
            raise InvalidArgument("give run_at or delay, not both")
        singleton_key = get("singleton_key")
        new = NewJob(id=job_id, kind=kind, payload=text, queue=queue, priority=get("priority", 0), run_at=at,
                     delay_ms=delay_ms, max_attempts=get("max_attempts") or 0, timeout_ms=get("timeout_ms"),
                     singleton_key=singleton_key, group_key=get("group_key"), tags=get("tags"),
                     meta=get("meta"))
        singleton_ms = get("singleton_on")
        if singleton_ms:
            if singleton_key is None:
                new.singleton_key = ""
            new.singleton_on = singleton_ms  # resolved to a bucket against the clock at insert
        queued = _QUEUED_COLUMNS.intersection(values)
        if queued:
            new = store.queues.apply_job_options(new, {c: values[c] for c in queued})
        new.headers = enqueue_headers(kind, queue)
        parents = get("depends_on")
        if parents:
            new.depends_on, new.on_parent_failure = parents, get("on_parent_failure") or "cancel"
        return new

    def _insert(self, jobs: list[NewJob], conn: Any) -> list[str | None]:
        store = self._store
        if any(j.depends_on for j in jobs):
            return self._insert_dependent(jobs, conn)
        now = store._now()
        if conn is not None:
            session = store._adopt(conn)
            with store.engine.coded_errors():  # the caller's connection: never a raw driver error
                return store.queues.insert(session, jobs, now)
        # The connection may break under the insert: it may or may not have committed. The ids
        # were minted before it, so a repeat changes nothing if it did (an existing id answers
        # itself); once per pause in ENQUEUE_RETRY_PAUSES_S, each on a fresh connection after a short
        # pause (docs/guarantees.md, "Liveness"). One retry was not enough on a loaded machine
        # whose connections were being terminated five times a second.
        for retry, pause in enumerate((*ENQUEUE_RETRY_PAUSES_S, None)):
            try:
                with self._session() as s:
                    ids = store.queues.insert(s, jobs, now)
                break
            except StoreUnavailable as exc:
                if pause is None or not self._retriable(exc):
                    raise
                log.info("enqueue: connection lost (%s); retry %d of %d with the same ids",
                         exc, retry + 1, len(ENQUEUE_RETRY_PAUSES_S))
                time.sleep(pause)
        self._after_enqueue()
        return ids

    def _insert_dependent(self, jobs: list[NewJob], conn: Any) -> list[str | None]:
        """:meth:`_insert` of jobs with ``depends_on``: the jobs, their edges and counts in ONE
        transaction (the caller's with ``conn=`` or ``tx.jobs``), so a dependent never shows up
        without what holds it back (:mod:`tenure.dependencies`)."""
        store = self._store
        dependencies.check_graph(jobs)  # refused before a connection is taken
        now = store._now()
        if conn is not None:
            session = store._adopt(conn)
            with store.engine.coded_errors(), session.dependency_atomic():
                return dependencies.write(store, session, jobs, now)
        with self._atomic_session() as s:
            ids = dependencies.write(store, s, jobs, now)
        self._after_enqueue()
        return ids

    def _write(self, conn: Any, call: Callable[[Any], T]) -> T:
        """``call(session)`` once: on the caller's connection (``conn=``; its driver errors
        answered as coded errors), else in a session of the store's own."""
        if conn is not None:
            with self._store.engine.coded_errors():  # the caller's connection: never a raw driver error
                return call(self._store._adopt(conn))
        with self._session() as s:
            return call(s)

    def _atomic_session(self):
        """A session inside one transaction: the root's own, or the caller's (``tx.jobs``)."""
        return self._store._transaction_session()

    def _retriable(self, exc: StoreUnavailable) -> bool:
        """A root enqueue retries when the connection was lost mid-call (never inside the
        caller's transaction, where a repeat is not ours to make)."""
        return False

    def _after_enqueue(self) -> None:
        self._store._wake_local()

    # -- read ----------------------------------------------------------------------------------
    def get(self, job_id: str, *, conn: Any = None) -> Job | None:
        """The frozen record, or None. It carries ``lease_generation`` but never the token.
        ``conn`` (the outbox form, as for :meth:`enqueue`) reads through the caller's own
        connection, so a job enqueued in its still-open transaction is seen."""
        v.job_id(job_id)
        if conn is not None:
            row = self._store._adopt(conn).job_get(job_id)
        else:
            with self._session() as s:
                row = s.job_get(job_id)
        return None if row is None else row_to_job(row)

    def checkpoints(self, lease: Lease | Callable[[], Lease]) -> Checkpoints:
        """The fenced checkpoint store of one attempt (spec §7). ``lease`` may be a
        callable answering the attempt's CURRENT lease, so renewals do not strand it."""
        if not (isinstance(lease, Lease) or callable(lease)):
            raise LeaseRequired("checkpoints() needs the attempt's Lease")
        return Checkpoints(self, lease)
