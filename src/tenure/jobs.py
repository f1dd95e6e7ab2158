"""Queue semantics, written once above the engine boundary: ``store.jobs`` (spec §2-§5, §9, §10).

This module holds claims, renewals and settlement (complete, fail, snooze, progress, their
batches and settle-and-claim); beside it, each concern in its own module: enqueue and reading
(:mod:`tenure.jobs_base`), operator actions (:mod:`tenure.job_admin`), the fence's refusals
(:mod:`tenure.fence`), rows to records (:mod:`tenure.job_rows`), a settlement batch's bookkeeping
(:mod:`tenure.settle_batch`), checkpoints (:mod:`tenure.checkpoints`) and ``store.transaction()``
(:mod:`tenure.transaction`).

Every settling call is fenced: the engine runs one guarded statement, and when it matches nothing
the row is read to say *why* with a coded refusal (:func:`tenure.fence.refusal`). Nothing here is
dialect-specific.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from . import _sanitize, dependencies, durations
from . import _validate as v
from .attempt_history import entry_json
from .engine.base import Session
from .engine.rows import DEFAULT_MAX_ATTEMPTS as DEFAULT_MAX_ATTEMPTS  # re-exported (tenure.queues)
from .engine.rows import JobRow, Settle
from .errors import (
    DeadlineExceeded,
    InvalidArgument,
    InvalidType,
    LeaseNotHeld,
    PageCancelled,
    StoreUnavailable,
    TenureError,
    UnreadableJob,
    UnstorableValue,
)
from .fence import check_lease, refusal
from .handler_control import Discard, Retry
from .job_admin import JobAdmin
from .job_control import abandoned_due, cancel_abandoned
from .job_rows import lease_of, row_to_claim, row_to_job
from .records import Claim, Dependency, Job, Lease, Page
from .settle_batch import as_met_before_claim, check_items, first_of_each, item_specific, merge, spread

if TYPE_CHECKING:
    from .store import Store
    from .worker import Worker, WorkerConfig

DEFAULT_LEASE_MS = 30_000
DEFAULT_BACKOFF_BASE_MS = 1_000
DEFAULT_BACKOFF_CAP_MS = 60_000


log = logging.getLogger("tenure.jobs")


def backoff_ms(attempt: int, rand: float, base_ms: int = DEFAULT_BACKOFF_BASE_MS,
               cap_ms: int = DEFAULT_BACKOFF_CAP_MS) -> int:
    """``min(cap, base * 2^(attempt-1)) * (0.5 + rand/2)`` (spec §4), in whole ms."""
    raw = min(cap_ms, base_ms * (2 ** max(attempt - 1, 0)))
    return int(raw * (0.5 + rand / 2))


class Jobs(JobAdmin):
    """``store.jobs``: root calls, each its own transaction under the store gate."""

    #: When a rate limit that stopped the last claim (of any thread) allows a start again, in
    #: epoch ms on the store's clock; None when no rate limit stopped it (docs/queues.md, "Rate
    #: limits"). A hint for sleeping until then: the claim itself is what enforces the limit.
    rate_wake_at: int | None = None

    def __init__(self, store: Store) -> None:
        self._store = store
        self._held = threading.local()

    @property
    def limit_held(self) -> bool:
        """Whether the last claim made by the calling thread came back short having tried a queue
        whose limits or policy can hold a job back while another job's lease stands
        (:attr:`tenure.engine.base.Session.limit_held`): a lease settling may then make a job
        claimable. Per thread, so a worker's dispatcher and settlers each read their own claim's."""
        return getattr(self._held, "value", False)

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
                   cancel: threading.Event | None = None, instance: str | None = None,
                   sweep: bool = True) -> list[Claim]:
        """Lease up to ``limit`` jobs in one statement; each gets its own token and generation.
        A set ``cancel`` withdraws a claim still waiting for the store gate (nothing claimed).
        ``instance`` (a worker's unique per-process id, :attr:`tenure.worker.Worker.instance`) is
        stamped on each lease: the maintenance reaper and :meth:`release_lost_claims` match leases
        by it, never by ``owner`` (docs/guarantees.md, "Liveness: deadlines and lost connections").
        ``sweep=False``: leave the once-a-second clean-up of abandoned cancel requests (run first
        otherwise) to the caller's :meth:`sweep_abandoned`, after it has started what it claimed."""
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
            if sweep:
                cancel_abandoned(self._store, s)
            rows = s.job_claim(kinds=kinds_l, queues=queues_l, owner=owner, lease_ms=lease_ms,
                               now=self._store._now(), limit=limit, instance=instance)
            self.rate_wake_at = s.rate_wake_at
            self._held.value = s.limit_held
        return self._claims(rows)

    def sweep_abandoned(self, cancel: threading.Event | None = None) -> None:
        """The claim's clean-up on its own, when due (at most once a second per process): settle
        ``cancelled`` the flagged jobs whose holder is gone. A worker runs it after starting what
        its claim leased, so that job never waits for the clean-up's trip to the store."""
        if not abandoned_due(self._store):
            return
        with self._store._session(cancel) as s:
            cancel_abandoned(self._store, s)

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
                unreadable.append((lease_of(r), err))
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
        lease = check_lease(lease, "renew", extra)
        ms = DEFAULT_LEASE_MS if lease_ms is None else v.lease_ms(lease_ms)
        store = self._store
        with store._session(cancel) as s:
            now = store._now()
            row = s.job_renew(lease.job_id, lease.token, ms, now)
            if row is None:
                raise refusal(s.job_get(lease.job_id), lease, store._now_or(s, now), "renew") or \
                    LeaseNotHeld(f"cannot renew job {lease.job_id!r}: the attempt already settled it")
        return lease_of(row, lease.owner)

    def complete(self, lease: Lease, result: Any = None, *extra: Any) -> None:
        """Settle the attempt as done with ``result`` (JSON). Refused by code when the lease is
        not current; a repeat from the same attempt is a no-op. A result the store cannot hold
        is refused at the call (TN1002/TN1004; nothing written, the lease stays usable)."""
        lease = check_lease(lease, "complete", extra)
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
        items = check_items(items, "complete_many")
        items, where = first_of_each(items)
        batch, unstorable = self._completions(items, encoded)
        now = self._store._now()
        if session is not None:
            out = self._answers(session, session.job_complete(batch, now), batch, items, now) \
                if batch else []
            return spread(merge(out, unstorable, len(items)), where)
        out = self._complete_isolated(batch, [it for i, it in enumerate(items) if i not in unstorable],
                                      cancel, unstorable, [i for i in range(len(items)) if i not in unstorable])
        if unstorable:
            failed = self.fail_many([(items[i][0], err) for i, err in unstorable.items()], cancel=cancel,
                                    backoff_base_ms=backoff_base_ms, backoff_cap_ms=backoff_cap_ms)
            for (i, err), res in zip(list(unstorable.items()), failed, strict=True):
                unstorable[i] = res if isinstance(res, TenureError) else err
        return spread(merge(out, unstorable, len(items)), where)

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
            if not item_specific(exc):
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
        items, where = first_of_each(items)
        batch, unstorable = self._completions(items, True)
        if unstorable:
            raise next(iter(unstorable.values()))
        store = self._store
        with store._session(cancel) as s:
            cancel_abandoned(store, s)
            now = store._now()
            got = s.job_complete_and_claim(batch, now, kinds=kinds, queues=queues, owner=owner,
                                           lease_ms=lease_ms, limit=limit, instance=instance)
            done, rows = got.settled, got.claimed
            self.rate_wake_at = s.rate_wake_at
            self._held.value = s.limit_held
            errors = self._answers(s, done, batch, items, now)
            if rows and any(errors):
                errors = as_met_before_claim(errors, items, rows, store._now_or(s, now))
        return spread(errors, where), self._claims(rows)

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
        lease = check_lease(lease, "fail", extra)
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
        items = check_items(items, "fail_many")
        if details is not None:
            items = [(lease, (error, d)) for (lease, error), d in zip(items, details, strict=True)]
        items, where = first_of_each(items)
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
        return spread(out, where)

    def _fail_isolated(self, batch: list[Settle], items: list, now, cancel) -> list[Job | TenureError]:
        """:meth:`_fail_batch`; when the database refuses the batch for what an item holds (see
        :func:`item_specific`), each item alone, and one refused alone once more with a
        plain-ASCII TN1004 message (and history entry) in place of its own."""
        try:
            return self._fail_batch(batch, items, now, cancel)
        except Exception as exc:
            if not item_specific(exc):
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
            rows = {r.id: r for r in s.job_fail(batch, now)}
            dead_rows = [r for r in rows.values() if r.state == "dead" and r.dead_letter]
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
        lease = check_lease(lease, "snooze", ())
        delay_ms = durations.ms(delay, "delay") or 0
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

        lease = check_lease(lease, "progress", ())
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
        time-ordered (UUIDv7), so that is newest first. The default ``"id"`` is docs/spec.md's
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

    def create_worker(self, handlers: dict[str, Callable[..., Any]], config: WorkerConfig | None = None,
                      **options: Any) -> Worker:
        """A worker over this store (spec §6), not yet started. Its settings are ``config`` (a
        :class:`tenure.WorkerConfig`) with the keyword ``options`` applied, each a field of it,
        validated before anything is made (docs/operations.md, "Units"). Always root-owned."""
        return self._store._create_worker(handlers, config, options)


