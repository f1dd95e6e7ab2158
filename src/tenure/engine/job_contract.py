"""The job half of the engine contract: what a session does for one job's life.

The clock, inserting, claiming, renewing and settling jobs (the fenced calls), reading and
deleting them, their dependencies, checkpoints, signals, waits and children. The other half
(queues, schedules, leadership, workers, retention, the read model) is
:class:`tenure.engine.admin_contract.AdminContract`; :class:`tenure.engine.base.Session` is both.
Types and conventions as in :mod:`tenure.engine.base`.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from typing import Any

from . import rows as R
from .rows import Edge, JobRow, NewJob, Settle


class JobContract(abc.ABC):
    """The session methods of a job's life (see the module docstring). Declared here, implemented
    by each dialect's session (``engine/<dialect>/session.py``, signals in ``signals.py``)."""

    # -- clock --------------------------------------------------------------------------------
    @abc.abstractmethod
    def now_ms(self) -> int:
        """The engine's clock in epoch ms (the database's own clock on PostgreSQL)."""

    # -- jobs ----------------------------------------------------------------------------------
    @abc.abstractmethod
    def job_insert(self, jobs: Sequence[NewJob], now: int | None) -> list[R.Inserted]:
        """Insert jobs; an existing id (or a unique-policy duplicate) changes nothing.
        Answers one :class:`~tenure.engine.rows.Inserted` per input (a duplicate: the EXISTING id)."""

    #: True when :meth:`job_insert_resolved` resolves queue defaults inside its INSERT (one
    #: round trip). Engines without it (SQLite: an in-process call costs microseconds) keep the
    #: registry read + INSERT path.
    resolves_queue_defaults: bool = False

    def job_insert_resolved(self, job: NewJob, retention_ms: int | None, now: int | None) -> str | None:
        """Insert ONE job with its queue's registry defaults resolved in the same statement, exactly
        as :meth:`tenure.queues.QueueRegistry.insert` would resolve them (job option, then queue
        default, then built-in; the queue's policy and queue-wide key; retention into
        ``keep_until``; ``singleton_on`` rounded on the statement's clock). ``job`` is not
        modified. Answers the id when the row was written, None when it was not (an existing id
        or a uniqueness duplicate: the caller then takes the full path, which answers it)."""
        raise NotImplementedError

    #: True when :meth:`job_copy` streams rows into the store (PostgreSQL: COPY). Others insert
    #: a bulk with :meth:`job_insert`.
    copies_jobs: bool = False

    def job_copy(self, jobs: Iterable[NewJob], now: int) -> list[str]:
        """Write every job of ``jobs`` as it comes from the iterable, all or nothing (in a
        transaction of its own, or a savepoint inside the caller's); answers their ids in order.
        Only for jobs that cannot collide: ids minted for this call, no uniqueness key, every
        queue default already resolved. ``now`` is the clock of every row (created_at, and
        run_at = now + delay_ms). An exception raised by the iterable undoes everything and
        propagates as it is."""
        raise NotImplementedError

    def job_insert_plain(self, chunks: Iterable[Sequence[R.PlainRow]], templates: dict[str, NewJob],
                         now: int) -> bool:
        """Write the rows of ``chunks`` (fresh ids), each job's other columns those of
        ``templates[queue]`` (its defaults resolved; id, kind, payload, priority unused), as
        :meth:`job_insert` would (``now``: created_at, run_at = now + delay_ms), all or nothing
        in a transaction of its own or a savepoint in the caller's. An exception from ``chunks``
        undoes everything and propagates. True when every row was written; False when nothing
        was (an id was present: the caller takes the general path)."""
        raise NotImplementedError

    @abc.abstractmethod
    def job_get(self, job_id: str) -> JobRow | None:
        """The row (with its token) or None."""

    #: After a claim: when a rate limit that stopped it allows a start again (epoch ms, the
    #: claim's clock), or None (no rate limit stopped it). A worker sleeps until then.
    rate_wake_at: int | None = None
    #: After a claim: True when it came back short having tried a queue whose concurrency or
    #: group limit or whose policy (singleton, stately, strict_fifo) can hold a job back while
    #: another job's lease stands, so that a lease settling may make a job claimable. A worker
    #: claims again when one of its own attempts settles only then (or after a full claim).
    limit_held: bool = False

    @abc.abstractmethod
    def job_claim(
        self, *, kinds: Sequence[str] | None, queues: Sequence[str] | None, owner: str,
        lease_ms: int, now: int | None, limit: int, instance: str | None = None,
    ) -> list[JobRow]:
        """Lease up to ``limit`` eligible jobs, minting a token each, ``generation+1``,
        ``attempts+1``; order ``priority DESC, run_at, created_at, id``. Eligible: pending/failed
        with ``run_at <= now``, or leased with ``lease_until <= now``; kind in ``kinds`` (None:
        any); queue in ``queues`` (None: any) and not paused; queue and group concurrency limits,
        rate limits, fairness and the claim-time policies respected (:mod:`tenure.engine.limited`). Each leased row's ``lease_instance`` is stamped with ``instance`` (the claiming
        worker's per-process identity, or None). Each row carries the :data:`RECLAIMED_INDEX` flag.

        Bounded reclaim: an expired lease whose job has used its last attempt is settled ``dead``
        (``last_error`` opening with TN2084, dead-lettered in the same transaction) instead of
        being leased; and an expired lease that is leased again is answered ALONE, never in a
        batch with other jobs."""

    @abc.abstractmethod
    def job_renew(self, job_id: str, token: str, lease_ms: int, now: int | None) -> JobRow | None:
        """Fenced: new token and expiry, same generation. None when the fence refuses."""

    @abc.abstractmethod
    def job_lock(self, job_id: str, token: str, now: int | None) -> bool:
        """Inside a transaction: check the fence (and on PostgreSQL lock the row, ``FOR UPDATE``)
        so a handler transaction fails fast; the completion re-checks it at commit."""

    @abc.abstractmethod
    def job_complete(self, items: Sequence[Settle], now: int | None) -> set[str]:
        """Fenced completions; answers the ids that settled. Prunes each settled job's
        checkpoints of generations <= the settling one, in the same transaction."""

    @abc.abstractmethod
    def job_complete_and_claim(
        self, items: Sequence[Settle], now: int | None, *, kinds: Sequence[str] | None,
        queues: Sequence[str] | None, owner: str, lease_ms: int, limit: int,
        instance: str | None = None,
    ) -> R.SettledAndClaimed:
        """The worker's settle-and-refill: :meth:`job_complete` of ``items``, then
        :meth:`job_claim` of up to ``limit`` jobs (none when 0), atomically (in the caller's
        transaction, or in one of its own)."""

    @abc.abstractmethod
    def job_fail(self, items: Sequence[Settle], now: int | None) -> list[JobRow]:
        """Fenced failures; answers the settled rows (state ``failed`` or ``dead``)."""

    @abc.abstractmethod
    def job_snooze(self, job_id: str, token: str, delay_ms: int, now: int | None) -> JobRow | None:
        """Fenced: back to ``pending`` at now + ``delay_ms`` with ``max_attempts + 1`` (a snooze
        does not use up a retry). None when the fence refuses."""

    @abc.abstractmethod
    def job_cancel(self, job_id: str, token: str | None, now: int | None) -> JobRow | None:
        """With a token: fenced cancel of the claimed job. Without: cancel a queued job
        (pending, failed, or leased with an expired lease). None when nothing matched."""

    @abc.abstractmethod
    def job_release(self, job_id: str, token: str, now: int | None) -> JobRow | None:
        """Fenced: an abandoned attempt's job back to ``pending`` now, with ``max_attempts + 1``
        (an immediate shutdown does not use up a retry). None when the fence refuses."""

    @abc.abstractmethod
    def job_request_cancel(self, job_id: str, now: int | None) -> JobRow | None:
        """Flag a job with a LIVE lease for its holder (``cancel_requested_at``, kept if set);
        None when it is not leased or its lease expired."""

    @abc.abstractmethod
    def job_cancel_abandoned(self, now: int | None) -> list[JobRow]:
        """Cancel the flagged jobs whose lease expired (their holder is gone); answers them."""

    @abc.abstractmethod
    def job_cancel_flagged(self) -> list[str]:
        """Ids of the flagged jobs that are still leased (what holders watch for)."""

    @abc.abstractmethod
    def job_requeue(self, job_id: str, now: int | None) -> JobRow | None:
        """failed/dead/cancelled/expired-leased -> pending at now, token cleared; None otherwise."""

    @abc.abstractmethod
    def job_counts(self) -> dict[str, int]:
        """Rows per state (states with no rows may be missing)."""

    @abc.abstractmethod
    def job_page(self, *, state: str | None, kind: str | None, queue: str | None, after: str | None,
                 limit: int, tag: str | None = None, descending: bool = False) -> list[JobRow]:
        """Keyset page by id ascending (``descending``: by id descending, ``after`` then meaning
        "below"); ``tag`` keeps the jobs whose tags include it."""

    @abc.abstractmethod
    def job_progress(self, job_id: str, token: str, fraction: float, note: str | None, attempt: int,
                     now: int | None) -> bool:
        """Fenced: store the attempt's progress report; False when the fence refuses."""

    @abc.abstractmethod
    def job_match(self, *, filters: dict[str, Any], eligible: str, after: str | None, limit: int,
                  now: int | None) -> list[str]:
        """Up to ``limit`` ids by id ascending (past ``after``) of the jobs matching ``filters``
        (``state``, ``kind``, ``queue``, ``tag``, ``before``: created before that epoch ms; None
        means any) that the operation ``eligible`` (cancel, requeue or delete) may touch."""

    @abc.abstractmethod
    def job_delete(self, job_ids: Sequence[str], now: int | None) -> list[str]:
        """Delete these jobs, with their checkpoints, except any holding a live lease; answers
        the ids deleted."""

    @abc.abstractmethod
    def job_sweep(self, settled_before: int, limit: int) -> int:
        """Delete up to ``limit`` done/dead/cancelled jobs with ``updated_at < settled_before``,
        oldest first, with their checkpoints, in one transaction; answers how many."""

    # -- dependencies (docs/composition.md) ---------------------------------------------------
    @abc.abstractmethod
    def job_states(self, job_ids: Sequence[str]) -> dict[str, str]:
        """``{id: state}`` of the jobs of ``job_ids`` that exist (a plain read)."""

    @abc.abstractmethod
    def dependency_mark_parents(self, job_ids: Sequence[str]) -> dict[str, str]:
        """Mark these jobs as parents (``has_dependents``) and answer ``{id: state}`` of those that
        exist, as of now: on PostgreSQL the row update locks each parent until the caller's
        transaction ends, so a concurrent settlement of it waits and then sees the new edges."""

    @abc.abstractmethod
    def dependency_add(self, edges: Sequence[Edge], waiting: dict[str, int],
                       cancelled: Sequence[tuple[str, str]], now: int | None) -> None:
        """In the caller's transaction: store ``edges``, set each dependent's ``waiting_on`` to
        ``waiting[id]``, then cancel each ``(id, last_error)`` of ``cancelled`` still pending (a
        parent had already failed under the ``cancel`` policy; the settlement triggers carry that
        on to its own dependents)."""

    @abc.abstractmethod
    def dependency_list(self, job_id: str, parents: bool) -> list[R.DependencyRow]:
        """The edges of ``job_id``: its parents (``parents``) or its dependents, parents by
        position, dependents by id."""

    # -- checkpoints ---------------------------------------------------------------------------
    @abc.abstractmethod
    def checkpoint_save(self, run_id: str, node_id: str, value: str, generation: int, token: str,
                        now: int | None) -> bool:
        """Fenced upsert of one node value; False when the fence refuses (nothing written)."""

    @abc.abstractmethod
    def checkpoint_list(self, run_id: str, max_generation: int) -> list[R.CheckpointRow]:
        """The node values of generations <= ``max_generation``."""

    # -- signals, waits and children (engine/<dialect>/signals.py; tenure.durable) -------------
    @abc.abstractmethod
    def signal_lock(self, key: str) -> None:
        """Inside a write transaction: serialise every send, receive and park on ``key`` until
        the transaction ends (PostgreSQL: an advisory lock; SQLite's write transaction already
        serialises everything)."""

    @abc.abstractmethod
    def signal_insert(self, key: str, payload: str | None, now: int | None) -> R.SentSignal:
        """Store one unconsumed signal."""

    @abc.abstractmethod
    def signal_wake(self, key: str, now: int | None) -> list[str]:
        """Make every ``pending`` job waiting for ``key`` (``tenure_waits``) eligible now;
        answers their ids."""

    @abc.abstractmethod
    def signal_take(self, key: str, job_id: str, now: int | None) -> R.TakenSignal | None:
        """Consume the oldest unconsumed signal of ``key`` for ``job_id``; None when there is none."""

    @abc.abstractmethod
    def signal_count(self, key: str) -> int:
        """How many signals of ``key`` are not consumed yet."""

    @abc.abstractmethod
    def wait_add(self, job_id: str, key: str) -> None:
        """Record that ``job_id`` waits for signal ``key`` (kept if already recorded)."""

    @abc.abstractmethod
    def wait_remove(self, job_id: str, key: str | None) -> None:
        """Forget ``job_id``'s wait for ``key`` (every wait of the job when ``key`` is None)."""

    @abc.abstractmethod
    def job_set_wake_parent(self, job_ids: Sequence[str], parent_id: str, each: bool = False) -> int:
        """Mark these jobs as children of ``parent_id``: when the last unsettled one settles (with
        ``each``: when any of them settles), the parent (if ``pending``) is made eligible; when the
        parent is cancelled, they are too (migrations 0012, 0014). Answers how many."""

    @abc.abstractmethod
    def job_children_open(self, parent_id: str) -> int:
        """How many children of ``parent_id`` are not settled (not done, dead or cancelled)."""

    @abc.abstractmethod
    def job_get_many(self, job_ids: Sequence[str]) -> list[JobRow]:
        """The rows of these jobs that exist, in no particular order."""

    @abc.abstractmethod
    def job_wake(self, job_id: str, now: int | None) -> bool:
        """A ``pending`` job whose ``run_at`` is later made eligible now; True when it was."""
