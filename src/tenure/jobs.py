"""Queue semantics, written once above the engine boundary (JOBS-FORMAT §2-§5, §9, §10).

Every settling call is fenced: the engine runs one guarded statement, and when it matches nothing
this module reads the row and says *why* with a coded refusal (:func:`refusal`). Nothing here is
dialect-specific.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from . import _sanitize, bulk_admin, dependencies
from . import _validate as v
from .attempt_history import entry_json
from .engine.base import DEFAULT_MAX_ATTEMPTS as DEFAULT_MAX_ATTEMPTS  # re-exported (tenure.queues)
from .engine.base import RECLAIMED_INDEX, TOKEN_INDEX, JobRow, NewJob, Session, Settle
from .errors import (
    DeadlineExceeded,
    HandlersLeftRunning,
    InvalidArgument,
    InvalidType,
    LeaseExpired,
    LeaseNotHeld,
    LeaseRequired,
    LeaseSuperseded,
    PageCancelled,
    ScopeSettled,
    StorageError,
    StoreLimitExceeded,
    StoreUnavailable,
    TenureError,
    UnreadableJob,
    UnstorableValue,
)
from .handler_control import Discard, Retry
from .ids import new_job_id, new_job_ids
from .job_control import cancel_abandoned, request_cancel
from .records import Checkpoint, Claim, Dependency, Job, Lease, Page, Progress, SweepResult, Undecodable
from .tracing import enqueue_headers

if TYPE_CHECKING:
    from .store import Store
    from .worker import Worker

DEFAULT_LEASE_MS = 30_000
DEFAULT_BACKOFF_BASE_MS = 1_000
DEFAULT_BACKOFF_CAP_MS = 60_000
SWEEP_BATCH = 1_000
#: The largest lease generation a row can hold (an INTEGER column on both engines).
MAX_GENERATION = 2**31 - 1
#: From this many jobs on, ``enqueue_many`` streams jobs that cannot collide into the store
#: (``Queues.insert_fresh``); fewer go as one INSERT statement.
STREAM_MIN_JOBS = 64
#: An ``enqueue_many`` item with only these keys is built by ``_build_plain``.
_PLAIN_KEYS = frozenset({"kind", "payload", "queue", "priority"})


def _is_plain(spec: Any) -> bool:
    return type(spec) is dict and "kind" in spec and _PLAIN_KEYS.issuperset(spec)


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


def _check_names(kind: Any, queue: Any) -> None:
    """``v.name`` of a job's kind and queue, costing no call for a name already found valid."""
    if type(kind) is not str or kind not in _VALID_NAMES:
        _remember_name(v.name(kind, "kind"))
    if type(queue) is not str or queue not in _VALID_NAMES:
        _remember_name(v.name(queue, "queue"))


def _remember_name(name: str) -> None:
    if len(_VALID_NAMES) >= _VALID_NAMES_MAX:
        _VALID_NAMES.clear()
    _VALID_NAMES.add(name)


#: The keys of an ``enqueue_many`` item that are ``enqueue``'s own arguments; any other key is a
#: job option (docs/queues.md).
_SPEC_KEYS = frozenset({"kind", "payload", "id", "run_at", "delay", "max_attempts", "queue", "priority",
                        "timeout", "singleton_key", "singleton_for", "group_key", "tags", "meta"})
_loads = json.loads
log = logging.getLogger("tenure.jobs")

#: Pauses before each repeat of an enqueue whose connection broke under it (same ids; a repeat of
#: one that did commit changes nothing). Never inside the caller's transaction.
ENQUEUE_RETRY_PAUSES_S = (0.05, 0.25)


def _decoded(r: JobRow) -> Job:
    """The public record for an engine row: JSON decoded, token dropped. Raises what the decoder
    raises on a column that cannot be decoded."""
    p, res, h, e, t, m = r[2], r[11], r[21], r[22], r[24], r[25]
    return Job(r[0], r[1], None if p is None else _loads(p), r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10],
               None if res is None else _loads(res), r[12], r[13], r[14], r[15], r[16], r[17], r[18], r[19],
               r[20], None if h is None else _loads(h), [] if e is None else _loads(e), r[23],
               [] if t is None else _loads(t), {} if m is None else _loads(m), _progress(r[26]),
               r[27] or 0)


def _progress(text: str | None) -> Progress | None:
    """The stored progress column as a record; None when absent or unreadable (progress is a
    report, never a reason to hide the job)."""
    if text is None:
        return None
    try:
        d = _loads(text)
        return Progress(float(d["fraction"]), d.get("note"), d.get("at"), d.get("attempt"))
    except Exception:  # noqa: BLE001 - foreign text in a report column
        return None


def row_to_job(r: JobRow) -> Job:
    """The public record for an engine row: JSON decoded, token dropped. Never fails on what the
    row holds: a column that cannot be decoded reads as a :class:`~tenure.records.Undecodable`
    marker, so ``get()``, ``page()`` and every listing still show the job."""
    try:
        return _decoded(r)
    except Exception:  # noqa: BLE001 - RecursionError, ValueError: whatever foreign text holds
        return _tolerant(r)


def _tolerant(r: JobRow) -> Job:
    """:func:`_decoded`, each column that cannot be decoded read as an Undecodable marker."""
    dec = _sanitize.decode_column
    e, t, m = r[22], r[24], r[25]
    return Job(r[0], r[1], dec(r[2]), r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], dec(r[11]),
               r[12], r[13], r[14], r[15], r[16], r[17], r[18], r[19], r[20], dec(r[21]),
               [] if e is None else dec(e), r[23], [] if t is None else dec(t), {} if m is None else dec(m),
               _progress(r[26]), r[27] or 0)


def row_to_claim(r: JobRow) -> Claim:
    """The claim of a freshly leased row; :class:`UnreadableJob` (TN0008) when a column cannot be
    decoded (the caller settles that job dead alone, :meth:`Jobs._claims`)."""
    try:
        job = _decoded(r)
    except Exception as exc:
        job = _tolerant(r)
        bad = [(name, value) for name, value in (("payload", job.payload), ("result", job.result),
                                                 ("headers", job.headers)) if isinstance(value, Undecodable)]
        if bad or not isinstance(job.errors, Undecodable):  # an unreadable history alone still runs
            why = "; ".join(f"{name}: {val.reason}" for name, val in bad) or \
                f"{type(exc).__name__}: {_sanitize.message(exc)}"
            raise UnreadableJob(f"job {r[0]!r} cannot be decoded ({why}); it was settled dead without "
                                "running", job_id=r[0]) from exc
    assert job.lease_owner is not None and job.lease_until is not None  # a claimed row is leased
    return Claim(job, Lease(job.id, r[TOKEN_INDEX], job.lease_generation, job.attempts, job.lease_owner,
                            job.lease_until), bool(r[RECLAIMED_INDEX]))


def backoff_ms(attempt: int, rand: float, base_ms: int = DEFAULT_BACKOFF_BASE_MS,
               cap_ms: int = DEFAULT_BACKOFF_CAP_MS) -> int:
    """``min(cap, base * 2^(attempt-1)) * (0.5 + rand/2)`` (JOBS-FORMAT §4), in whole ms."""
    raw = min(cap_ms, base_ms * (2 ** max(attempt - 1, 0)))
    return int(raw * (0.5 + rand / 2))


def refusal(row: JobRow | None, lease: Lease, now: int, what: str) -> TenureError | None:
    """Why a fenced call on ``lease`` matched nothing; ``None`` means the same attempt already
    settled the job (a repeat settlement is idempotent, checklist decision 1)."""
    if row is None:
        return LeaseNotHeld(f"cannot {what} job {lease.job_id!r}: no such job (swept, or never enqueued)",
                            job_id=lease.job_id)
    state, generation, token, until = row[3], row[9], row[TOKEN_INDEX], row[7]
    if state == "leased":
        if token == lease.token and generation != lease.generation:
            return LeaseSuperseded(
                f"cannot {what} job {lease.job_id!r}: the lease says generation {lease.generation!r} but its "
                f"token is generation {generation}'s (a lease is used as claim or renew returned it)",
                job_id=lease.job_id, held=lease.generation, current=generation)
        if token == lease.token:
            return LeaseExpired(
                f"cannot {what} job {lease.job_id!r}: its lease (generation {generation}) expired "
                f"{now - until} ms ago", job_id=lease.job_id, overrun_ms=now - until)
        if generation != lease.generation:
            return LeaseSuperseded(
                f"cannot {what} job {lease.job_id!r}: the lease of generation {lease.generation} was "
                f"superseded by a newer claim, generation {generation}", job_id=lease.job_id,
                held=lease.generation, current=generation)
        return LeaseSuperseded(
            f"cannot {what} job {lease.job_id!r}: the lease of generation {lease.generation} was retired "
            f"by a renewal (the current lease is also generation {generation}; use the lease renew returned)",
            job_id=lease.job_id, held=lease.generation, current=generation)
    if token is not None and token == lease.token and generation == lease.generation and \
            state in ("done", "failed", "dead"):
        return None
    return LeaseNotHeld(f"cannot {what} job {lease.job_id!r}: it is not leased (state {state!r}, generation "
                        f"{generation}); another attempt or an operator settled it", job_id=lease.job_id,
                        state=state)


def _check_lease(lease: Any, what: str, extra: tuple) -> Lease:
    if isinstance(lease, Lease) and not extra:
        v.lease(lease, what)
        return lease
    if isinstance(lease, str):
        raise LeaseRequired(
            f"{what}({lease!r}, ...) is the pre-fence (id, owner) spelling: pass the Lease the claim "
            f"returned (claim.lease), e.g. jobs.{what}(claim.lease, ...)")
    if extra:
        raise LeaseRequired(f"{what}() takes the Lease and one value; got extra arguments {extra!r}")
    raise LeaseRequired(f"{what}() needs the Lease the claim returned (claim.lease), got "
                        f"{type(lease).__name__}")


def _first_of_each(items: Sequence[tuple[Lease, Any]]) -> tuple[Sequence[tuple[Lease, Any]], list[int] | None]:
    """One batch holding the SAME lease (job id and token) more than once: only the first item is
    sent to the store, and each later one is answered as that first one was (docs/spec.md D1: the
    first settlement from an attempt stands; a repeat changes nothing and is no error). Answers
    ``(items to send, position of each original item among them)``, the positions None when every
    lease is distinct (the common case, answered without a copy)."""
    keys = [(lease.job_id, lease.token) for lease, _ in items]
    if len(set(keys)) == len(keys):
        return items, None
    first: dict[tuple[str, str], int] = {}
    sent: list[tuple[Lease, Any]] = []
    where: list[int] = []
    for key, item in zip(keys, items, strict=True):
        at = first.get(key)
        if at is None:
            at = first[key] = len(sent)
            sent.append(item)
        where.append(at)
    return sent, where


def _as_met_before_claim(errors: list[TenureError | None], items: Sequence[tuple[Lease, Any]],
                         claimed: list[JobRow], now: int) -> list[TenureError | None]:
    """A completion refused in a settle-and-claim whose OWN claim then took the same job: the row
    read for the answer already shows that claim (generation + 1) and would call the lease
    superseded. That claim could take the job only because the lease had ended, so the answer is
    the refusal the completion met: expired (TN2067), as it is when the job is settled alone
    (docs/spec.md 6.13, D2)."""
    generations = {r[0]: r[9] for r in claimed}
    out = list(errors)
    for i, ((lease, _), err) in enumerate(zip(items, errors, strict=True)):
        if isinstance(err, LeaseSuperseded) and generations.get(lease.job_id) == lease.generation + 1 \
                and lease.expires_at <= now:
            out[i] = LeaseExpired(
                f"cannot complete job {lease.job_id!r}: its lease (generation {lease.generation}) expired "
                f"{now - lease.expires_at} ms ago", job_id=lease.job_id, overrun_ms=now - lease.expires_at)
    return out


def _spread(answers: list, where: list[int] | None) -> list:
    """Each original item's answer: its first occurrence's (see :func:`_first_of_each`)."""
    return answers if where is None else [answers[i] for i in where]


def _item_specific(exc: BaseException) -> bool:
    """Whether the database refused a settle batch for what an item holds (a data error, a
    trigger, text the driver cannot encode), rather than for being busy, unreachable or closed:
    only then is each item worth writing alone."""
    if isinstance(exc, TenureError):
        # the generic class, or a hard limit a value passed; busy/unavailable/full are not
        return type(exc) is StorageError or isinstance(exc, StoreLimitExceeded)
    return isinstance(exc, ValueError)  # UnicodeEncodeError, a driver's DataError spelt raw


def _merge(settled: list[TenureError | None], unstorable: dict[int, TenureError],
           n: int) -> list[TenureError | None]:
    """Answers in the caller's order: the settled items' answers around the unstorable ones."""
    if not unstorable:
        return settled
    it = iter(settled)
    return [unstorable[i] if i in unstorable else next(it) for i in range(n)]


def _check_items(items: Any, what: str) -> list:
    """``items`` as a list, each a ``(Lease, value)`` pair with the lease's fields in range."""
    items = list(items)
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise InvalidType(f"{what} takes (lease, value) pairs, got {item!r}")
        _check_lease(item[0], what, ())
    return items


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
        if len(specs) >= STREAM_MIN_JOBS and _streamable(specs):
            return self._insert_streamed(specs, minted, conn)
        build, plain = self._build_spec, self._build_plain
        built = [plain(spec, minted) if _is_plain(spec) else build(spec, minted) for spec in specs]
        if not built:
            return []
        return self._insert(built, conn)

    def _insert_streamed(self, specs: list[dict[str, Any]], minted: Iterator[str], conn: Any) -> list[str | None]:
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
                job = plain(spec, minted) if _is_plain(spec) else build(spec, minted)
                built.append(job)
                yield job

        source = each()
        queues = {spec.get("queue", "default") for spec in specs}
        ids: list[str] | None = None
        now = store._now()
        try:
            if conn is not None:
                try:
                    ids = store.queues.insert_fresh(store._adopt(conn), source, queues, now)
                except (TenureError, NotStreamable):
                    raise
                except Exception as exc:  # the caller's connection: still never a raw driver error
                    err = store.engine.classify(exc)
                    if err is exc:
                        raise
                    raise err from exc
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

    def _build_plain(self, spec: dict[str, Any], minted: Iterator[str]) -> NewJob:
        """:meth:`_build_spec` for an item with only ``kind``, ``payload``, ``queue`` and
        ``priority`` (the usual bulk item), without the general path's keyword plumbing: the
        same checks, the same record."""
        kind = spec["kind"]
        queue = spec.get("queue", "default")
        priority = spec.get("priority", 0)
        payload = spec.get("payload")
        _check_names(kind, queue)
        text = None if payload is None else v.dump_json(payload, "payload", self._store.max_payload_bytes)
        if type(priority) is not int or not v.INT4_MIN <= priority <= v.INT4_MAX:
            v.int4(priority, "priority")
        new = NewJob(next(minted), kind, text, queue, priority, None, 0, 0)
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
            try:
                return store.queues.insert(session, jobs, now)
            except TenureError:
                raise
            except Exception as exc:  # the caller's connection: still never a raw driver error
                err = store.engine.classify(exc)
                if err is exc:
                    raise
                raise err from exc
        # The connection may break under the insert: it may or may not have committed. The ids
        # were minted before it, so a repeat changes nothing if it did (an existing id answers
        # itself); at most ENQUEUE_RETRIES more times, each on a fresh connection after a short
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
            try:
                with session.dependency_atomic():
                    return dependencies.write(store, session, jobs, now)
            except TenureError:
                raise
            except Exception as exc:  # the caller's connection: still never a raw driver error
                err = store.engine.classify(exc)
                if err is exc:
                    raise
                raise err from exc
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
        """The fenced checkpoint store of one attempt (JOBS-FORMAT §7). ``lease`` may be a
        callable answering the attempt's CURRENT lease, so renewals do not strand it."""
        if not (isinstance(lease, Lease) or callable(lease)):
            raise LeaseRequired("checkpoints() needs the attempt's Lease")
        return Checkpoints(self, lease)


class Jobs(_JobsBase):
    """``store.jobs``: root calls, each its own transaction under the store gate."""

    #: When a rate limit that stopped the last claim (of any thread) allows a start again, in
    #: epoch ms on the store's clock; None when no rate limit stopped it (docs/queues.md, "Rate
    #: limits"). A hint for sleeping until then: the claim itself is what enforces the limit.
    rate_wake_at: int | None = None

    def __init__(self, store: Store) -> None:
        self._store = store

    def _session(self):
        return self._store._session()

    def _retriable(self, exc: StoreUnavailable) -> bool:
        return bool(exc.details.get("retriable"))

    def release_lost_claims(self, instance: str, *, keep: Iterable[str] = (),
                            cancel: threading.Event | None = None) -> list[str]:
        """Give back every lease stamped with worker ``instance`` except those of the job ids in
        ``keep``: each job returns to ``pending`` with the attempt the claim counted given back
        (no handler ever saw it). A worker calls this after a claim whose answer was lost (the
        connection broke mid-claim: it may have committed), with ``keep`` = the jobs it runs, so
        those jobs run again at once instead of idling for a whole lease. Answers the job ids."""
        if not isinstance(instance, str) or not instance:
            raise InvalidType("instance must be a non-empty string")
        held = [v.job_id(j) for j in keep]
        store = self._store
        with store._session(cancel) as s:
            ids = s.job_release_lost(instance, held, store._now())
        if ids:
            store._wake_local()
        return ids

    # -- claim ---------------------------------------------------------------------------------
    def claim(self, kinds: str | Sequence[str] | None, *, owner: str, lease_ms: int = DEFAULT_LEASE_MS,
              queues: str | Sequence[str] | None = None, instance: str | None = None) -> Claim | None:
        """Lease the next eligible job of ``kinds`` (priority, then run_at, created_at, id) in one
        guarded statement, or answer None. A kind not listed is never claimed."""
        got = self.claim_many(kinds, owner=owner, lease_ms=lease_ms, queues=queues, limit=1,
                              instance=instance)
        return got[0] if got else None

    def claim_many(self, kinds: str | Sequence[str] | None, *, owner: str, limit: int,
                   lease_ms: int = DEFAULT_LEASE_MS, queues: str | Sequence[str] | None = None,
                   cancel: threading.Event | None = None, instance: str | None = None) -> list[Claim]:
        """Lease up to ``limit`` jobs in one statement; each gets its own token and generation.
        A set ``cancel`` withdraws a claim still waiting for the store gate (nothing claimed).
        ``instance`` (a worker's unique per-process id, :attr:`tenure.worker.Worker.instance`) is
        stamped on each lease: the maintenance reaper and :meth:`release_lost_claims` match leases
        by it, never by ``owner`` (docs/guarantees.md, "Liveness: deadlines and lost connections")."""
        kinds_l = None if kinds is None else v.names(kinds, "kinds")
        queues_l = None if queues is None else v.names(queues, "queues")
        if not isinstance(owner, str) or not owner:
            raise InvalidType("owner must be a non-empty string (it is diagnostics, never a guard)")
        if instance is not None and (not isinstance(instance, str) or not instance):
            raise InvalidType("instance must be a non-empty string or None")
        v.text(owner, "owner", max_chars=v.MAX_ID)
        if instance is not None:
            v.text(instance, "instance", max_chars=v.MAX_ID)
        v.lease_ms(lease_ms)
        v.positive_int(limit, "limit", maximum=10_000)
        with self._store._session(cancel) as s:
            cancel_abandoned(self._store, s)
            rows = s.job_claim(kinds=kinds_l, queues=queues_l, owner=owner, lease_ms=lease_ms,
                               now=self._store._now(), limit=limit, instance=instance)
            self.rate_wake_at = s.rate_wake_at
        return self._claims(rows)

    def _claims(self, rows: Sequence[JobRow]) -> list[Claim]:
        """The claims of freshly leased rows. A row that cannot be decoded is never handed out
        (nor does it fail the claim or its batch-mates): it is settled ``dead`` alone, with
        TN0008 in ``last_error`` (docs/guarantees.md, "Liveness: every outcome settles")."""
        out: list[Claim] = []
        unreadable: list[tuple[Lease, UnreadableJob]] = []
        for r in rows:
            try:
                out.append(row_to_claim(r))
            except UnreadableJob as err:
                unreadable.append((Lease(r[0], r[TOKEN_INDEX], r[9], r[5], r[8], r[7]), err))
        if unreadable:
            try:
                self.fail_many(unreadable, dead=True)
            except Exception:  # its lease expires; the next claim settles it
                log.warning("settling %d undecodable job(s) dead failed", len(unreadable), exc_info=True)
        return out

    # -- settle --------------------------------------------------------------------------------
    def renew(self, lease: Lease, lease_ms: int | None = None, *extra: Any,
              cancel: threading.Event | None = None) -> Lease:
        """Move the expiry out; answers a NEW lease (new token, same generation) and retires the
        old one. Fenced like every settling call."""
        lease = _check_lease(lease, "renew", extra)
        ms = DEFAULT_LEASE_MS if lease_ms is None else v.lease_ms(lease_ms)
        store = self._store
        with store._session(cancel) as s:
            now = store._now()
            row = s.job_renew(lease.job_id, lease.token, ms, now)
            if row is None:
                raise refusal(s.job_get(lease.job_id), lease, store._now_or(s, now), "renew") or \
                    LeaseNotHeld(f"cannot renew job {lease.job_id!r}: the attempt already settled it")
        return Lease(lease.job_id, row[TOKEN_INDEX], row[9], row[5], lease.owner, row[7])

    def complete(self, lease: Lease, result: Any = None, *extra: Any) -> None:
        """Settle the attempt as done with ``result`` (JSON). Refused by code when the lease is
        not current; a repeat from the same attempt is a no-op. A result the store cannot hold
        is refused at the call (TN1002/TN1004; nothing written, the lease stays usable)."""
        lease = _check_lease(lease, "complete", extra)
        text = None if result is None else v.dump_json(result, "result", self._store.max_payload_bytes)
        err = self.complete_many([(lease, text)], encoded=True)[0]
        if err is not None:
            raise err

    def complete_many(self, items: Sequence[tuple[Lease, Any]], *, encoded: bool = False,
                      session: Session | None = None, cancel: threading.Event | None = None,
                      backoff_base_ms: int | None = None,
                      backoff_cap_ms: int | None = None) -> list[TenureError | None]:
        """Fenced completions in one transaction; answers, per item, None or the refusal.

        One item the store cannot hold never keeps the rest from settling: a result that cannot
        be encoded or stored (not JSON, a lone surrogate, nested past 100, or refused by the
        database when written) leaves the others to complete, and that attempt is then FAILED
        with :class:`~tenure.errors.UnstorableValue` (TN1004) as its error (retried within
        ``max_attempts`` like any failure, after ``backoff_*_ms`` as in :meth:`fail`); its answer is
        that error. With ``session`` (the caller's transaction) such an item is only answered,
        never failed here. The same lease
        twice in one batch: the first item's result stands, the later one is answered as the
        first was (docs/spec.md D1)."""
        items = _check_items(items, "complete_many")
        items, where = _first_of_each(items)
        batch, unstorable = self._completions(items, encoded)
        now = self._store._now()
        if session is not None:
            out = self._answers(session, session.job_complete(batch, now), batch, items, now) \
                if batch else []
            return _spread(_merge(out, unstorable, len(items)), where)
        out = self._complete_isolated(batch, [it for i, it in enumerate(items) if i not in unstorable],
                                      cancel, unstorable, [i for i in range(len(items)) if i not in unstorable])
        if unstorable:
            failed = self.fail_many([(items[i][0], err) for i, err in unstorable.items()], cancel=cancel,
                                    backoff_base_ms=backoff_base_ms, backoff_cap_ms=backoff_cap_ms)
            for (i, err), res in zip(list(unstorable.items()), failed, strict=True):
                unstorable[i] = res if isinstance(res, TenureError) else err
        return _spread(_merge(out, unstorable, len(items)), where)

    def _complete_locked(self, session: Session, lease: Lease, text: str | None, at: int) -> TenureError | None:
        """The handler transaction's completion (:mod:`tenure.worker.handler_tx`): the job row has been
        locked in ``session`` since the instant ``at`` (the block's open, where the fence was
        checked), so nothing else can have moved it, and its lease is judged at ``at``. Answers
        None, or the refusal (an unstorable result: :class:`~tenure.errors.UnstorableValue`)."""
        items = [(lease, text)]
        batch, unstorable = self._completions(items, True)
        if unstorable:
            return unstorable[0]
        return self._answers(session, session.job_complete(batch, at), batch, items, at)[0]

    def _complete_isolated(self, batch: list[Settle], items: list, cancel, unstorable: dict[int, TenureError],
                           positions: list[int]) -> list[TenureError | None]:
        """Complete ``batch`` in one transaction; when the database refuses it for what an item
        holds (not for being busy or unreachable), complete each item alone, and record each one
        that fails alone in ``unstorable`` (by its position in the caller's items)."""
        if not batch:
            return []
        store = self._store
        try:
            with store._session(cancel) as s:
                now = store._now()
                return self._answers(s, s.job_complete(batch, now), batch, items, now)
        except Exception as exc:
            if not _item_specific(exc):
                raise
            if len(batch) == 1:
                unstorable[positions[0]] = UnstorableValue(
                    f"the result of job {batch[0].job_id!r} could not be stored: {_sanitize.message(exc)}",
                    job_id=batch[0].job_id)
                return []
        out: list[TenureError | None] = []
        for one, item, pos in zip(batch, items, positions, strict=True):
            out.extend(self._complete_isolated([one], [item], cancel, unstorable, [pos]))
        return out

    def complete_and_claim(self, items: Sequence[tuple[Lease, Any]], kinds: Sequence[str] | None, *,
                           owner: str, limit: int, lease_ms: int, queues: Sequence[str] | None = None,
                           cancel: threading.Event | None = None, instance: str | None = None
                           ) -> tuple[list[TenureError | None], list[Claim]]:
        """The worker's settle-and-refill: fenced completions of ``items`` (results already JSON
        text) and a claim of up to ``limit`` more jobs, in ONE transaction, so a busy worker pays
        one commit and one trip to the store per cycle instead of two. Each completion is fenced
        exactly as in :meth:`complete_many` and answered the same way; the claim is
        :meth:`claim_many`'s (same statement, same order, same limits). Nothing lands if the
        transaction fails (the worker then settles the batch with :meth:`complete_many`, which
        isolates an item the database refuses). ``kinds``/``queues`` are trusted (the worker
        validated them). An item whose text cannot be stored is refused before anything is
        written (:class:`~tenure.errors.UnstorableValue`)."""
        items, where = _first_of_each(items)
        batch, unstorable = self._completions(items, True)
        if unstorable:
            raise next(iter(unstorable.values()))
        store = self._store
        with store._session(cancel) as s:
            cancel_abandoned(store, s)
            now = store._now()
            done, rows = s.job_complete_and_claim(batch, now, kinds=kinds, queues=queues, owner=owner,
                                                  lease_ms=lease_ms, limit=limit, instance=instance)
            self.rate_wake_at = s.rate_wake_at
            errors = self._answers(s, done, batch, items, now)
            if rows and any(errors):
                errors = _as_met_before_claim(errors, items, rows, store._now_or(s, now))
        return _spread(errors, where), self._claims(rows)

    def _completions(self, items: Sequence[tuple[Lease, Any]], encoded: bool
                     ) -> tuple[list[Settle], dict[int, TenureError]]:
        """The settlements of ``items`` whose result the store can hold, and, by position, the
        coded reason of each one it cannot (TN1004; TN1002/TN1001 wrapped in TN1004)."""
        limit = self._store.max_payload_bytes
        batch = []
        unstorable: dict[int, TenureError] = {}
        for i, (lease, result) in enumerate(items):
            try:
                if not encoded:
                    result = None if result is None else v.dump_json(result, "result", limit)
                elif result is not None:
                    if not isinstance(result, str):
                        raise InvalidType(f"an encoded result must be JSON text, got {type(result).__name__}")
                    _sanitize.storable_json(result, "result")
            except TenureError as exc:
                unstorable[i] = exc if isinstance(exc, UnstorableValue) else UnstorableValue(
                    f"the result of job {lease.job_id!r} cannot be stored: {exc}", job_id=lease.job_id)
                continue
            batch.append(Settle(lease.job_id, lease.token, result=result, generation=lease.generation))
        return batch, unstorable

    def _answers(self, s: Session, done: set[str], batch, items, now) -> list[TenureError | None]:
        """Per item: None when it settled, else its refusal, read from the row as it is now."""
        # Two leases of ONE job in a batch (a worker that reclaimed its own stalled attempt): the
        # settled id says nothing about WHICH lease won, so every item is classified by its token.
        shared = len({it.job_id for it in batch}) != len(batch)
        if len(done) == len(batch) and not shared:
            return [None] * len(batch)
        out: list[TenureError | None] = []
        for item in batch:
            if item.job_id in done and not shared:
                out.append(None)
            else:
                lease = Lease(item.job_id, item.token, item.generation, 0, "", 0)
                out.append(refusal(s.job_get(item.job_id), lease, self._store._now_or(s, now), "complete"))
        return out

    def fail(self, lease: Lease, error: Any, *extra: Any, backoff_base_ms: int | None = None,
             backoff_cap_ms: int | None = None, dead: bool = False) -> Job:
        """Record a failed attempt: ``failed`` with ``run_at = now + backoff`` while attempts
        remain, else ``dead`` (terminal; copied to the queue's dead-letter queue, if any). The
        message is kept in ``last_error``, made storable (NUL and lone surrogates escaped, at
        most 16 384 characters: :func:`tenure._sanitize.error_text`), and, with the exception's
        class path and traceback, as one more entry of ``Job.errors``
        (:mod:`tenure.attempt_history`). A :class:`tenure.Retry` error retries after its own
        delay; a :class:`tenure.Discard` is dead at once. Answers the settled record."""
        lease = _check_lease(lease, "fail", extra)
        out = self.fail_many([(lease, error)], backoff_base_ms=backoff_base_ms,
                             backoff_cap_ms=backoff_cap_ms, dead=dead)[0]
        if isinstance(out, TenureError):
            raise out
        return out

    def fail_many(self, items: Sequence[tuple[Lease, Any]], *, backoff_base_ms: int | None = None,
                  backoff_cap_ms: int | None = None, dead: bool = False,
                  cancel: threading.Event | None = None,
                  details: Sequence[dict[str, Any]] | None = None) -> list[Job | TenureError]:
        """Fenced failures in one transaction (see :meth:`fail`); answers, per item, the settled
        record or the refusal. The same lease twice in one batch: the first item's error stands,
        the later one is answered as the first was (docs/spec.md D1). ``details`` (one dict per
        item) are added to each item's error-history entry. When the database refuses the batch
        for what one item holds, each item is written alone, and one still refused is stored
        with a plain-ASCII TN1004 message instead of its own, so every failure settles."""
        items = _check_items(items, "fail_many")
        if details is not None:
            items = [(lease, (error, d)) for (lease, error), d in zip(items, details, strict=True)]
        items, where = _first_of_each(items)
        store = self._store
        base = v.backoff_ms(backoff_base_ms, "backoff_base_ms")  # None only when given None
        if base is None:
            base = DEFAULT_BACKOFF_BASE_MS
        cap = v.backoff_ms(backoff_cap_ms, "backoff_cap_ms")
        if cap is None:
            cap = DEFAULT_BACKOFF_CAP_MS
        batch = []
        now = store._now()
        for lease, error in items:
            detail: dict[str, Any] = {}
            if details is not None:
                error, detail = error
            rand = store._random()
            fixed = isinstance(error, Retry)
            batch.append(Settle(lease.job_id, lease.token, error=_sanitize.error_text(error),
                                delay_ms=error.delay_ms if fixed else backoff_ms(lease.attempt, rand, base, cap),
                                dead=dead or isinstance(error, Discard), generation=lease.generation,
                                jitter=0.5 + rand / 2, fixed_delay=fixed,
                                entry=entry_json(error, lease, now, **detail)))
        out = self._fail_isolated(batch, list(items), now, cancel)
        if any(isinstance(o, Job) for o in out):
            store._wake_local()
        return _spread(out, where)

    def _fail_isolated(self, batch: list[Settle], items: list, now, cancel) -> list[Job | TenureError]:
        """:meth:`_fail_batch`; when the database refuses the batch for what an item holds (see
        :func:`_item_specific`), each item alone, and one refused alone once more with a
        plain-ASCII TN1004 message (and history entry) in place of its own."""
        try:
            return self._fail_batch(batch, items, now, cancel)
        except Exception as exc:
            if not _item_specific(exc):
                raise
            if len(batch) > 1:
                out: list[Job | TenureError] = []
                for one, item in zip(batch, items, strict=True):
                    out.extend(self._fail_isolated([one], [item], now, cancel))
                return out
            one = batch[0]
            if one.error is not None and one.error.startswith(f"[{UnstorableValue.code}] the error of job"):
                raise  # already the plain replacement: the trouble is not the message
            one.error = str(UnstorableValue(
                f"the error of job {one.job_id!r} could not be stored ({ascii(_sanitize.message(exc))[:500]}); "
                f"it began: {ascii((one.error or '')[:500])}"))
            one.entry = _sanitize.plain_entry(one.entry, one.error)
            return self._fail_isolated([one], items, now, cancel)

    def _fail_batch(self, batch: list[Settle], items: list, now, cancel) -> list[Job | TenureError]:
        store = self._store
        with store._transaction_session(cancel) as s:
            rows = {r[0]: r for r in s.job_fail(batch, now)}
            dead_rows = [r for r in rows.values() if r[3] == "dead" and r[19]]
            if dead_rows:
                store.queues.dead_letter(s, dead_rows, now)
            shared = len({it.job_id for it in batch}) != len(batch)  # see _answers
            out: list[Job | TenureError] = []
            for lease, _ in items:
                row = None if shared else rows.get(lease.job_id)
                if row is not None:
                    out.append(row_to_job(row))
                    continue
                current = s.job_get(lease.job_id)
                err = refusal(current, lease, store._now_or(s, now), "fail")
                if err is None:
                    assert current is not None  # refusal() refuses a missing job
                    out.append(row_to_job(current))
                else:
                    out.append(err)
        return out

    def snooze(self, lease: Lease, delay: Any = 0) -> Job:
        """Put a claimed job back to ``pending`` at now + ``delay`` seconds WITHOUT using up a
        retry: the claim counted the attempt, so ``max_attempts`` grows by one (as Oban's snooze).
        Fenced like every settlement; answers the settled record. A handler raises
        :class:`tenure.Snooze` instead."""
        lease = _check_lease(lease, "snooze", ())
        delay_ms = v.duration_ms(delay, "delay", seconds=True) or 0
        store = self._store
        with self._session() as s:
            now = store._now()
            row = s.job_snooze(lease.job_id, lease.token, delay_ms, now)
            if row is None:
                raise refusal(s.job_get(lease.job_id), lease, store._now_or(s, now), "snooze") or \
                    LeaseNotHeld(f"cannot snooze job {lease.job_id!r}: the attempt already settled it",
                                 job_id=lease.job_id)
        if delay_ms == 0:
            store._wake_local()
        return row_to_job(row)

    def progress(self, lease: Lease, fraction: float, note: str | None = None) -> None:
        """Store the attempt's progress on its job (``Job.progress``): ``fraction`` in [0, 1],
        an optional ``note``. Fenced like a settlement: a stale lease writes nothing and gets the
        fence's refusal. Unthrottled; a handler calls ``ctx.progress`` (:mod:`tenure.progress`)."""
        from .progress import check

        lease = _check_lease(lease, "progress", ())
        f, note = check(fraction, note)
        store = self._store
        with self._session() as s:
            now = store._now()
            if not s.job_progress(lease.job_id, lease.token, f, note, lease.attempt, now):
                raise refusal(s.job_get(lease.job_id), lease, store._now_or(s, now), "report progress of") or \
                    LeaseNotHeld(f"cannot report progress of job {lease.job_id!r}: the attempt already settled it",
                                 job_id=lease.job_id)

    # -- administration (root only, §10) ------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Jobs per state: always the six keys."""
        with self._session() as s:
            raw = s.job_counts()
        return {k: int(raw.get(k, 0)) for k in ("pending", "leased", "done", "failed", "dead", "cancelled")}

    def page(self, state: str | None = None, kind: str | None = None, after: str | None = None,
             limit: int = 100, *, queue: str | None = None, tag: str | None = None, order: str = "id",
             cancel_event: threading.Event | None = None, deadline: int | None = None) -> Page:
        """A keyset page by job id: at most ``limit`` records (as ``get`` answers them) with id >
        ``after``, filtered by ``state``/``kind``/``queue`` and ``tag`` (jobs whose tags include
        it). ``next_after`` continues it.

        ``order="newest"`` walks the same keyset down (ids below ``after``): tenure's own ids are
        time-ordered (UUIDv7), so that is newest first. The default ``"id"`` is JOBS-FORMAT's
        ascending order (spec 10.2); ``"oldest"`` is the same as ``"id"``."""
        if order not in ("id", "oldest", "newest"):
            if not isinstance(order, str):
                raise InvalidType(f"order must be a string, got {type(order).__name__}")
            raise InvalidArgument(f"unknown order {order!r}; one of id, oldest, newest")
        v.state(state)
        if tag is not None:
            v.text(tag, "tag", max_chars=v.MAX_TAG_CHARS, allow_empty=False)
        if kind is not None:
            v.name(kind, "kind")
        if queue is not None:
            v.name(queue, "queue")
        if after is not None:
            v.job_id(after)
        v.positive_int(limit, "limit", maximum=10_000)
        if cancel_event is not None and cancel_event.is_set():
            raise PageCancelled("page() was cancelled before it read")
        if deadline is not None:
            v.epoch_ms(deadline, "deadline")
            now = self._store._now_wall()
            if now >= deadline:
                raise DeadlineExceeded(f"page() deadline passed {now - deadline} ms ago")
        with self._session() as s:
            rows = s.job_page(state=state, kind=kind, queue=queue, tag=tag, after=after, limit=limit + 1,
                              descending=order == "newest")
        if cancel_event is not None and cancel_event.is_set():
            raise PageCancelled("page() was cancelled while it read")
        more = len(rows) > limit
        items = [row_to_job(r) for r in rows[:limit]]
        return Page(items, items[-1].id if more and items else None)

    def cancel(self, job_id: str, lease: Lease | None = None) -> bool:
        """Cancel a job. A queued one (pending, failed, or leased with an expired lease) needs no
        lease; a claimed one needs its CURRENT lease, and the local attempt holding it is told
        (``ctx.cancelled``) and waited for up to its worker's ``stop_grace``. True when this call
        cancelled it (and any local attempt wound up), False when it already was cancelled.
        :class:`HandlersLeftRunning` (TN2062) when the job IS cancelled but the local attempt was
        still running after the grace: a report, not a refusal (docs/spec.md D5)."""
        v.job_id(job_id)
        if lease is not None:
            lease = _check_lease(lease, "cancel", ())
            if lease.job_id != job_id:
                raise InvalidArgument(f"the lease is for job {lease.job_id!r}, not {job_id!r}")
        store = self._store
        with self._session() as s:
            now = store._now()
            row = s.job_cancel(job_id, None if lease is None else lease.token, now)
            if row is None:
                current = s.job_get(job_id)
                if current is not None and current[3] == "cancelled":
                    return False
                if lease is None:
                    if current is None:
                        raise LeaseNotHeld(f"cannot cancel job {job_id!r}: no such job")
                    if current[3] == "leased":
                        raise LeaseRequired(f"job {job_id!r} is claimed (generation {current[9]}): "
                                            "cancel(job_id, lease=...) needs its current lease")
                    raise LeaseNotHeld(f"cannot cancel job {job_id!r}: it is already settled "
                                       f"(state {current[3]!r})")
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
        done or dead job. ``cancel()`` keeps JOBS-FORMAT's rules (a running job needs its lease)."""
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
                if current[3] == "pending":
                    return False
                if current[3] == "leased":
                    raise LeaseRequired(f"job {job_id!r} holds a live lease (generation {current[9]}): "
                                        "requeue is not a steal; cancel it with its lease, or wait")
                raise LeaseNotHeld(f"cannot requeue job {job_id!r}: it is {current[3]!r}")
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

    # -- composition (docs/composition.md) --------------------------------------------------
    def dependencies(self, job_id: str) -> list[Dependency]:
        """The parents of ``job_id`` (``enqueue(depends_on=...)``), in the order it listed them,
        each with its policy, whether it is met, and the parent's record."""
        return dependencies.edges_of(self._store, job_id, True)

    def dependents(self, job_id: str) -> list[Dependency]:
        """The jobs that depend on ``job_id``, by id, each with the dependent's record."""
        return dependencies.edges_of(self._store, job_id, False)

    def composition(self, job_id: str) -> list[Job]:
        """Every job connected to ``job_id`` by dependencies (a chain, a group with its chord
        callback, any DAG), itself included, parents before dependents; [] for an unknown id."""
        return dependencies.composition(self._store, job_id)

    def cancel_composition(self, job_id: str) -> dict[str, int]:
        """Cancel every unsettled job of ``job_id``'s composition, dependents first: queued ones
        now, running ones through their holders (``request_cancel``). Answers
        ``{"cancelled": n, "requested": n}``."""
        return dependencies.cancel_composition(self._store, job_id)

    def requeue_composition(self, job_id: str) -> int:
        """Requeue every failed, dead or cancelled job of ``job_id``'s composition; done steps
        keep their results, and each requeued dependent waits again for the parents it lacks.
        Answers how many were requeued."""
        return dependencies.requeue_composition(self._store, job_id)

    def checkpoints_of(self, job_id: str) -> list[Checkpoint]:
        """Read-only: every checkpoint row of a job (a workflow run), any generation, for
        inspection (``tenure runs show``, the dashboard). Saving needs the attempt's lease."""
        v.job_id(job_id)
        with self._session() as s:
            rows = s.checkpoint_list(job_id, MAX_GENERATION)  # every generation
        return [Checkpoint(job_id, n, None if val is None else _loads(val), g) for n, val, g in rows]

    def create_worker(self, handlers: dict[str, Callable[..., Any]], **options: Any) -> Worker:
        """A worker over this store (JOBS-FORMAT §6). Always root-owned."""
        from .worker import Worker

        return Worker(self._store, handlers, **options)


class TxJobs(_JobsBase):
    """``tx.jobs``: the transactional outbox. Runs in exactly its transaction; refused after it."""

    def __init__(self, store: Store, tx: Any) -> None:
        self._store = store
        self._tx = tx

    @contextmanager
    def _session(self) -> Iterator[Session]:
        # tenure's own statements in the transaction answer coded errors; the application's
        # (tx.execute) are its own and pass through store.transaction() unchanged.
        with self._tx._scoped_session() as s:
            try:
                yield s
            except TenureError:
                raise
            except Exception as exc:
                err = self._store.engine.classify(exc)
                if err is exc:
                    raise
                raise err from exc

    def _after_enqueue(self) -> None:
        self._tx._enqueued = True

    def _atomic_session(self):
        return self._session()

    def create_worker(self, handlers: dict[str, Callable[..., Any]], **options: Any) -> Worker:
        """A worker is root-owned even when created here: it is not bound to this transaction."""
        return self._store.jobs.create_worker(handlers, **options)


class Checkpoints:
    """The fenced checkpoint store of one attempt: node values saved under the job (run) id,
    stamped with the attempt's generation (JOBS-FORMAT §7)."""

    def __init__(self, view: _JobsBase, lease: Lease | Callable[[], Lease]) -> None:
        self._view = view
        self._lease = lease

    @property
    def lease(self) -> Lease:
        return self._lease() if callable(self._lease) else self._lease

    def save(self, node_id: str, value: Any) -> None:
        """Save one node's value; refused by code (and nothing written) when the lease is stale."""
        if not isinstance(node_id, str) or not node_id:
            raise InvalidType("node_id must be a non-empty string")
        v.text(node_id, "node_id", max_chars=v.MAX_ID)
        lease = self.lease
        store = self._view._store
        text = v.dump_json(value, "checkpoint value", store.max_payload_bytes)
        # The fence also matches the generation (docs/spec.md 2.13, 3.9): a lease whose generation is
        # not the row's (forged or garbled) is refused, so no row is ever stamped with it. One
        # that no column could hold matches nothing on either engine.
        gen = lease.generation
        if type(gen) is not int or not 0 <= gen <= MAX_GENERATION:
            gen = -1
        with self._view._session() as s:
            now = store._now()
            if not s.checkpoint_save(lease.job_id, node_id, text, gen, lease.token, now):
                raise refusal(s.job_get(lease.job_id), lease, store._now_or(s, now), "save a checkpoint of") \
                    or LeaseNotHeld(f"cannot save a checkpoint of job {lease.job_id!r}: the attempt settled it")

    def list(self) -> list[Checkpoint]:
        """Every node value of generations up to and including this attempt's."""
        lease = self.lease
        with self._view._session() as s:
            rows = s.checkpoint_list(lease.job_id, lease.generation)
        return [Checkpoint(lease.job_id, n, None if val is None else _loads(val), g) for n, val, g in rows]

    def load(self) -> dict[str, Any]:
        """``{node_id: value}`` for generations <= this attempt's (its predecessors' work)."""
        return {c.node_id: c.value for c in self.list()}


class Transaction:
    """``with store.transaction() as tx``: the application's SQL and tenure's outbox in one
    transaction. ``tx.execute`` runs app SQL; ``tx.jobs`` enqueues; both die with the block."""

    def __init__(self, store: Store, session: Session) -> None:
        self._store = store
        self._session_obj: Session | None = session
        self._enqueued = False
        self.jobs = TxJobs(store, self)

    def _scoped_session(self):
        from contextlib import nullcontext

        if self._session_obj is None:
            raise ScopeSettled("this transaction has committed or rolled back; its tx.jobs (and any "
                               "checkpoint store made from it) cannot be used any more")
        return nullcontext(self._session_obj)

    def execute(self, sql: str, params: Any = None) -> Any:
        """Run the application's own SQL in this transaction (the dialect's placeholders)."""
        with self._scoped_session() as s:
            return s.execute(sql, params)

    @property
    def connection(self) -> Any:
        """The driver connection of this transaction, to hand to the application's own code."""
        with self._scoped_session() as s:
            return s.connection

    def _settle(self) -> None:
        self._session_obj = None
