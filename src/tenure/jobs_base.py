"""What both job views offer: ``store.jobs`` (:class:`tenure.jobs.Jobs`) and a transaction's
``tx.jobs`` (:class:`tenure.transaction.TxJobs`): enqueue, enqueue_many, get, checkpoints."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from . import _validate as v
from . import dependencies
from .checkpoints import Checkpoints
from .engine.rows import NewJob
from .errors import (
    InvalidArgument,
    InvalidType,
    LeaseRequired,
    StoreUnavailable,
)
from .ids import new_job_id, new_job_ids
from .job_rows import row_to_job
from .records import Job, Lease
from .tracing import enqueue_headers, tracing_now

if TYPE_CHECKING:
    from .store import Store


#: An ``enqueue_many`` item with only these keys is built by ``_build_plain``.
_PLAIN_KEYS = frozenset({"kind", "payload", "queue", "priority"})

def _is_plain(spec: Any) -> bool:
    return type(spec) is dict and "kind" in spec and _PLAIN_KEYS.issuperset(spec)

def _check_names(kind: Any, queue: Any) -> None:
    """``v.name`` of a job's kind and queue, costing no call for a name already found valid."""
    if type(kind) is not str or kind not in _VALID_NAMES:
        _remember_name(v.name(kind, "kind"))
    if type(queue) is not str or queue not in _VALID_NAMES:
        _remember_name(v.name(queue, "queue"))

#: Pauses before each repeat of an enqueue whose connection broke under it (same ids; a repeat of
#: one that did commit changes nothing). Never inside the caller's transaction.
ENQUEUE_RETRY_PAUSES_S = (0.05, 0.25)

log = logging.getLogger("tenure.jobs")

#: From this many jobs on, ``enqueue_many`` streams jobs that cannot collide into the store
#: (``Queues.insert_fresh``); fewer go as one INSERT statement.
STREAM_MIN_JOBS = 64


#: An ``enqueue_many`` item with one of these keys may collide with a stored job: it takes the
#: path that answers the job it collided with.
_COLLIDING_KEYS = frozenset({"id", "singleton_key", "singleton_for", "debounce",
                             # not a collision, but written with its edges in one transaction
                             # (tenure.dependencies), which streaming does not do
                             "depends_on", "on_parent_failure"})


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


#: Kind and queue names already found valid (v.name), so a bulk enqueue checks each name once.
_VALID_NAMES: set[str] = set()


_VALID_NAMES_MAX = 10_000


def _remember_name(name: str) -> None:
    if len(_VALID_NAMES) >= _VALID_NAMES_MAX:
        _VALID_NAMES.clear()
    _VALID_NAMES.add(name)


#: The keys of an ``enqueue_many`` item that are ``enqueue``'s own arguments; any other key is a
#: job option (docs/queues.md).
_SPEC_KEYS = frozenset({"kind", "payload", "id", "run_at", "delay", "max_attempts", "queue", "priority",
                        "timeout", "singleton_key", "singleton_for", "group_key", "tags", "meta"})


class _JobsBase:
    """What both the root view (``store.jobs``) and a transaction's view (``tx.jobs``) offer."""

    _store: Store

    def _session(self):  # pragma: no cover - overridden
        raise NotImplementedError

    # -- enqueue -------------------------------------------------------------------------------
    def enqueue(self, kind: str, payload: Any = None, *, id: str | None = None, run_at: Any = None,
                delay: Any = None, max_attempts: int | None = None, queue: str = "default",
                priority: int = 0, timeout: Any = None, singleton_key: str | None = None,
                singleton_for: Any = None, group_key: str | None = None, conn: Any = None,
                tags: Sequence[str] | None = None, meta: dict[str, Any] | None = None,
                **options: Any) -> str | None:
        """Store one job and answer its id. A caller-supplied ``id`` makes this idempotent: an
        existing id changes nothing and is answered as is. A duplicate under a queue's uniqueness
        policy answers the EXISTING job's id (never an integrity error). ``delay`` and ``timeout``
        are seconds (or timedeltas); ``run_at`` is epoch ms or a datetime. With ``conn=`` (a driver
        connection), the job is written in the caller's own transaction (the outbox).

        Queue options (each overrides the queue's default; see ``docs/queues.md``): ``retry_delay``,
        ``retry_backoff``, ``retry_delay_max``, ``retention``, ``delete_after`` (seconds),
        ``dead_letter`` (a queue name) and ``debounce`` (seconds: a later enqueue of the same
        queue, kind and ``singleton_key`` while this one is pending replaces its payload and
        pushes its run time, answering its id).

        ``tags`` (a list of short strings, filterable: ``page(tag=...)``) and ``meta`` (a JSON
        object of at most 4 KiB) are stored on the job as given (docs/operations.md, "Tags and
        meta"); a bad one is TN1001/TN1002 naming the field."""
        new = self._build(kind, payload, id=id, run_at=run_at, delay=delay, max_attempts=max_attempts,
                          queue=queue, priority=priority, timeout=timeout, singleton_key=singleton_key,
                          singleton_for=singleton_for, group_key=group_key, options=options, tags=tags,
                          meta=meta)
        return self._insert([new], conn)[0]

    async def enqueue_async(self, kind: str, payload: Any = None, **options: Any) -> str | None:
        """``enqueue`` for async code: runs on a worker thread, so the event loop never blocks on
        the database (SQLite's gate, a PostgreSQL round-trip)."""
        import asyncio

        return await asyncio.to_thread(self.enqueue, kind, payload, **options)

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
        minted = iter(new_job_ids(len(specs)))  # one clock read and one urandom for the batch
        traced = tracing_now()  # one look at the current trace for the batch
        if len(specs) >= STREAM_MIN_JOBS and _streamable(specs):
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
            if conn is not None:
                with store.engine.coded_errors():  # the caller's connection: never a raw driver error
                    ids = store.queues.insert_fresh(store._adopt(conn), source, queues, now)
            else:
                with self._session() as s:
                    ids = store.queues.insert_fresh(s, source, queues, now)
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

    def _build_spec(self, spec: Any, minted: Iterator[str] | None = None) -> NewJob:
        """One ``enqueue_many`` item, validated and encoded (nothing is written). ``minted``
        supplies the id of an item that has none."""
        if not isinstance(spec, dict):
            raise InvalidType(f"enqueue_many takes dicts of enqueue arguments, got {type(spec).__name__}")
        if "kind" not in spec:
            raise InvalidArgument("every enqueue_many item needs a 'kind'")
        get = spec.get
        extra = spec.keys() - _SPEC_KEYS
        opts = {k: spec[k] for k in extra} if extra else None
        return self._build(spec["kind"], get("payload"), id=get("id"), run_at=get("run_at"), delay=get("delay"),
                           max_attempts=get("max_attempts"), queue=get("queue", "default"),
                           priority=get("priority", 0), timeout=get("timeout"),
                           singleton_key=get("singleton_key"), singleton_for=get("singleton_for"),
                           group_key=get("group_key"), options=opts, tags=get("tags"), meta=get("meta"),
                           minted=minted)

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

    def _build(self, kind, payload, *, id, run_at, delay, max_attempts, queue, priority, timeout,
               singleton_key, singleton_for, group_key, options, tags=None, meta=None,
               minted: Iterator[str] | None = None) -> NewJob:
        store = self._store
        # The common case costs no call: a name seen valid before, and absent options (None).
        _check_names(kind, queue)
        if id is not None:
            job_id = v.job_id(id)
        else:
            job_id = new_job_id() if minted is None else next(minted)
        text = None if payload is None else v.dump_json(payload, "payload", store.max_payload_bytes)
        at = None if run_at is None else v.epoch_ms(run_at, "run_at")
        delay_ms = 0 if delay is None else v.duration_ms(delay, "delay", seconds=True) or 0
        if at is not None and delay:
            raise InvalidArgument("give run_at or delay, not both")
        if max_attempts is not None:
            v.positive_int(max_attempts, "max_attempts", maximum=v.MAX_ATTEMPTS_LIMIT)
        if type(priority) is not int or not v.INT4_MIN <= priority <= v.INT4_MAX:
            v.int4(priority, "priority")
        timeout_ms = None if timeout is None else v.duration_ms(timeout, "timeout", seconds=True, positive=True)
        if singleton_key is not None:
            v.key(singleton_key, "singleton_key")
        if group_key is not None:
            v.key(group_key, "group_key")
        singleton_ms = (None if singleton_for is None
                        else v.duration_ms(singleton_for, "singleton_for", seconds=True, positive=True))
        tags_text = None if tags is None else v.tags(tags)
        meta_text = None if meta is None else v.meta(meta)
        parents, on_failure, options = dependencies.split_options(options)
        store_options: dict[str, Any] | None = None
        if options:
            store_options = store.queues.job_options(options) if hasattr(store, "queues") else None
            if store_options is None:
                raise InvalidArgument(f"unknown enqueue options: {', '.join(sorted(options))}")
        new = NewJob(id=job_id, kind=kind, payload=text, queue=queue, priority=priority, run_at=at,
                     delay_ms=delay_ms, max_attempts=max_attempts or 0, timeout_ms=timeout_ms,
                     singleton_key=singleton_key, group_key=group_key, tags=tags_text, meta=meta_text)
        if singleton_ms:
            if singleton_key is None:
                new.singleton_key = ""
            new.singleton_on = singleton_ms  # resolved to a bucket against the clock at insert
        if store_options is not None:  # given exactly when options were
            new = store.queues.apply_job_options(new, store_options)
        new.headers = enqueue_headers(kind, queue)
        if parents:
            new.depends_on, new.on_parent_failure = parents, on_failure
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
