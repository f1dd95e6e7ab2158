"""The engine boundary: what a database must do for tenure, and nothing about queue semantics.

An :class:`Engine` owns connections, migrations and wake-up; a :class:`Session` is one
connection (inside or outside a transaction) with Noun+Verb methods, one per query. The
semantics (the fence's classification, backoff, dead letters, policies) live above, in
:mod:`tenure.jobs`, written once for every engine.

Rows cross the boundary as the named records of :mod:`tenure.engine.rows` (JSON columns still
as text), so the semantics layer never sees a driver type nor reads a column by position. ``now`` is an epoch-ms int or
``None``; ``None`` means "the database's clock" (PostgreSQL) or the wall clock (SQLite).
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from ..errors import StorageError
from . import rows as R
from .rows import Edge, JobRow, NewJob, QueuedKindRow, Settle


class Session(abc.ABC):
    """One connection's worth of queries. Not thread-safe; obtained from an :class:`Engine`.

    Every method a dialect must provide is declared here, with its types; each dialect's
    session implements the job methods itself and the rest in its queues, maintenance and
    insights mixins."""

    dialect: str

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

    def dependency_atomic(self) -> AbstractContextManager[None]:
        """One transaction for an enqueue with dependencies (its rows appear together or not at
        all), joining the caller's open one."""
        return self.queue_atomic()

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

    # -- queues (engine/<dialect>/queues.py) ---------------------------------------------------
    @abc.abstractmethod
    def queue_atomic(self) -> AbstractContextManager[None]:
        """One transaction for several statements (joins the caller's open one; never commits an
        adopted connection's)."""

    @abc.abstractmethod
    def queue_get(self, name: str) -> R.QueueRow | None:
        """The registry row of queue ``name``, or None."""

    @abc.abstractmethod
    def queue_lock_dead_letters(self) -> None:
        """Serialise changes to the dead-letter graph until the caller's transaction ends, so two
        concurrent updates cannot each close half of a cycle."""

    @abc.abstractmethod
    def queue_list(self) -> list[R.QueueRow]:
        """Every registry row, by name."""

    @abc.abstractmethod
    def queue_defaults(self, names: Sequence[str]) -> dict[str, R.QueueRow]:
        """The registry rows of ``names`` that exist, by name."""

    @abc.abstractmethod
    def queue_put(self, name: str, settings: dict[str, Any], now: int | None, *,
                  create: bool) -> R.QueuePut:
        """Set ``settings`` on queue ``name`` (creating it first when ``create``). Answers ``ok``
        with the row, ``missing``, or ``busy`` with the row (a policy change refused because the
        queue holds live jobs)."""

    @abc.abstractmethod
    def queue_rate_windows(self, name: str, limit: int) -> list[R.RateWindowRow]:
        """The queue's window rows, the queue scope first, then groups by key; at most ``limit``."""

    @abc.abstractmethod
    def queue_pause(self, name: str, paused: bool, now: int | None) -> R.QueueRow | None:
        """Set the queue's ``paused`` flag; answers its row, or None when it does not exist."""

    @abc.abstractmethod
    def queue_delete(self, name: str, force: bool) -> R.QueueDeleted:
        """Delete the queue, its jobs (live ones only when ``force``), their checkpoints and its
        subscriptions, in one transaction."""

    @abc.abstractmethod
    def queue_find_duplicate(self, j: NewJob, debounce: bool) -> str | None:
        """The live job ``j`` collided with under its uniqueness rules, or None."""

    @abc.abstractmethod
    def queue_debounce(self, j: NewJob, debounce_ms: int, now: int | None) -> R.Inserted | None:
        """Move the pending debounced job of ``j``'s (queue, kind, key) to ``j``'s payload and
        run_at (answers ``(its id, False)``), else insert ``j`` (``(j.id, True)``); None when
        another uniqueness rule (or a racing insert) refused the insert."""

    @abc.abstractmethod
    def queue_dead_letter(self, pairs: Sequence[tuple[str, str]], default_max_attempts: int,
                          now: int | None) -> int:
        """Copy each dead job (``pairs`` of ``(dead_id, copy_id)``) into its dead-letter queue."""

    @abc.abstractmethod
    def queue_redrive_select(self, queue: str, limit: int, after: tuple[int, str] | None) -> list[R.RedriveRow]:
        """Up to ``limit`` dead-letter copies waiting in ``queue`` after ``(created_at, id)``."""

    @abc.abstractmethod
    def queue_redrive_settle(self, pairs: Sequence[tuple[str, str]], now: int | None) -> int:
        """Settle the redriven copies of ``pairs``; answers how many."""

    @abc.abstractmethod
    def subscription_add(self, event: str, queue: str, now: int | None) -> bool:
        """Subscribe ``queue`` to ``event``; False when it already was."""

    @abc.abstractmethod
    def subscription_remove(self, event: str, queue: str) -> bool:
        """Unsubscribe ``queue`` from ``event``; False when it was not subscribed."""

    @abc.abstractmethod
    def subscription_queues(self, event: str) -> list[str]:
        """The queues subscribed to ``event``."""

    @abc.abstractmethod
    def subscription_list(self, event: str | None) -> list[R.SubscriptionRow]:
        """The subscriptions, of ``event`` only unless None."""

    # -- schedules, leadership, workers, retention (engine/<dialect>/maintenance.py) -------------
    @abc.abstractmethod
    def schedule_upsert(self, row: dict[str, Any], now: int | None) -> R.ScheduleRow | None:
        """Insert or change one schedule; answers the row, or None when nothing changed."""

    @abc.abstractmethod
    def schedule_get(self, name: str, key: str) -> R.ScheduleRow | None:
        """One schedule's row, or None."""

    @abc.abstractmethod
    def schedule_list(self, name: str | None) -> list[R.ScheduleRow]:
        """The schedules (of ``name`` only unless None)."""

    @abc.abstractmethod
    def schedule_delete(self, name: str, key: str) -> bool:
        """Delete one schedule; False when it did not exist."""

    @abc.abstractmethod
    def schedule_due(self, now: int, limit: int) -> list[R.ScheduleRow]:
        """Up to ``limit`` schedules whose next fire time is at or before ``now``."""

    @abc.abstractmethod
    def schedule_advance(self, *, name: str, key: str, cron: str, tz: str, expected: int,
                         last_fire_at: int | None, next_fire_at: int | None, now: int) -> bool:
        """Compare-and-set: move the schedule from ``expected`` on; False when another caller did."""

    @abc.abstractmethod
    def schedule_pause(self, name: str, key: str, paused: bool, next_fire_at: int | None,
                       now: int) -> R.ScheduleRow | None:
        """Pause one schedule, or resume it planned to ``next_fire_at``; its row, or None when absent."""

    @abc.abstractmethod
    def leader_acquire(self, name: str, owner: str, ttl_ms: int, now: int | None) -> int | None:
        """Take or renew the lease on role ``name``; answers its expiry, or None when another
        owner holds an unexpired lease."""

    @abc.abstractmethod
    def leader_release(self, name: str, owner: str) -> bool:
        """Give up role ``name`` if ``owner`` holds it; False when it did not."""

    @abc.abstractmethod
    def leader_get(self, name: str) -> R.LeaderRow | None:
        """The holder row of role ``name``, or None."""

    @abc.abstractmethod
    def worker_heartbeat(self, rows: Sequence[dict[str, Any]], now: int | None) -> None:
        """Insert or refresh the registry rows of this process's workers."""

    @abc.abstractmethod
    def worker_remove(self, ids: Sequence[str]) -> int:
        """Delete the registry rows of ``ids``; answers how many."""

    @abc.abstractmethod
    def worker_list(self) -> list[R.WorkerRow]:
        """Every worker registry row."""

    @abc.abstractmethod
    def worker_reap(self, dead_before: int, keep: Sequence[str], now: int | None,
                    limit: int) -> R.Reaped:
        """End the live leases of up to ``limit`` workers silent since ``dead_before`` (except
        ``keep``) and delete their rows."""

    @abc.abstractmethod
    def job_release_lost(self, instance: str, keep: Sequence[str], now: int | None) -> list[str]:
        """Give back the leases stamped with ``instance`` except those of the jobs in ``keep`` (the
        ones its worker holds): pending again, one attempt fewer. Answers the ids released."""

    @abc.abstractmethod
    def job_expire_queued(self, now: int | None, error: str, limit: int) -> int:
        """Queued (pending/failed) jobs with ``keep_until <= now`` -> dead with ``error``."""

    @abc.abstractmethod
    def jobs_table_stats(self) -> R.TableStats | None:
        """The jobs table's statistics (:func:`tenure.table_care.health_of`); None: no upkeep."""

    @abc.abstractmethod
    def jobs_vacuum(self, cancel: threading.Event | None = None, *, analyze_only: bool = False) -> bool:
        """Vacuum (or analyze) the jobs table; a set ``cancel`` stops it at once and answers False."""

    @abc.abstractmethod
    def job_delete_settled(self, now: int | None, default_after_ms: int | None, limit: int) -> int:
        """Delete up to ``limit`` settled jobs past their deletion horizon (``updated_at +
        delete_after_ms``, else ``+ default_after_ms``; None: only jobs with their own), with their
        checkpoints; answers how many."""

    # -- the read model (engine/<dialect>/insights.py) -----------------------------------------
    @abc.abstractmethod
    def insight_queue_counts(self, sample: float | None = None) -> list[R.QueueStateCount]:
        """Every queue and state that has rows, with its count; ``sample``: estimated from that % of pages."""

    @abc.abstractmethod
    def insight_size(self) -> R.TableSize | None:
        """The jobs table's rows (estimated) and pages, without reading it; None: no estimate."""

    @abc.abstractmethod
    def insight_queues(self) -> list[R.QueueSummaryRow]:
        """Every registered queue, by name."""

    @abc.abstractmethod
    def insight_rate_deferred(self, now: int) -> list[R.RateDeferred]:
        """Due jobs (pending or failed, ``run_at <= now``) that a closed rate
        window holds back at ``now`` (the queue's, or their group's), per rate-limited queue."""

    @abc.abstractmethod
    def insight_settled_buckets(self, since: int, until: int, bucket_ms: int) -> list[R.SettledBucket]:
        """Jobs whose latest settlement happened in ``[since, until)``, per bucket and state."""

    @abc.abstractmethod
    def insight_workers(self, limit: int) -> list[R.WorkerRow]:
        """Rows of the worker registry, most recent heartbeat first (JSON columns as text)."""

    @abc.abstractmethod
    def insight_queued_kinds(self, sample: float | None = None) -> list[QueuedKindRow]:
        """Queued jobs per queue, kind, copy-or-not, with the oldest ``created_at`` (or a sample's)."""

    @abc.abstractmethod
    def insight_schema_versions(self) -> list[R.SchemaVersion]:
        """Every applied migration."""

    # -- application SQL (outbox, handler transactions) ----------------------------------------
    @abc.abstractmethod
    def execute(self, sql: str, params: Any = None) -> Any:
        """Run the application's own SQL on this session's connection; answers the cursor."""

    @property
    @abc.abstractmethod
    def connection(self) -> Any:
        """The driver connection (sqlite3.Connection / psycopg.Connection) for user code."""


class Watcher(abc.ABC):
    """Cross-process wake-up: blocks until the jobs table may have new eligible work."""

    @abc.abstractmethod
    def wait(self, timeout: float) -> bool:
        """True when woken by a change, False on timeout."""

    @abc.abstractmethod
    def close(self) -> None: ...


class Engine(abc.ABC):
    """A database tenure can run on. Subclasses live in ``tenure.engine.<dialect>``."""

    dialect: str
    #: True when root calls must wait for an open application transaction in this process
    #: (SQLite: one writer; the store gate serialises). False on PostgreSQL (MVCC).
    exclusive_gate: bool

    @abc.abstractmethod
    def open(self) -> None:
        """Connect and migrate (under a lock where several processes may race)."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def session(self, cancel: threading.Event | None = None) -> AbstractContextManager[Session]:
        """A session for one root call, autocommitting each statement. While it waits for a
        connection (or the gate), a set ``cancel`` withdraws it with
        :class:`tenure.errors.OperationWithdrawn` before anything runs."""

    @abc.abstractmethod
    def transaction(self, cancel: threading.Event | None = None) -> AbstractContextManager[Session]:
        """A session inside one write transaction: committed on normal exit, rolled back on error."""

    @abc.abstractmethod
    def adopt(self, connection: Any) -> Session:
        """A session over the caller's own driver connection (the outbox ``conn=`` form); the
        caller owns its transaction."""

    @abc.abstractmethod
    def watcher(self) -> Watcher:
        """A new cross-process wake-up watcher."""

    @abc.abstractmethod
    def reset_for_tests(self) -> None:
        """Empty every tenure table (tests only)."""

    @abc.abstractmethod
    def classify(self, exc: BaseException) -> BaseException:
        """Map a driver exception to a coded :class:`tenure.errors.StorageError` (or return
        ``exc`` unchanged when it is already coded or not a driver error)."""

    @contextmanager
    def coded_errors(self, *, keep_statement_errors: bool = False) -> Iterator[None]:
        """Inside this block a driver exception leaves as its coded error (:meth:`classify`),
        chained to it; any other exception leaves as itself. With ``keep_statement_errors`` (the
        application's own SQL), an error :meth:`classify` can only call a plain
        :class:`~tenure.errors.StorageError` — the statement's own fault: a constraint, a syntax
        error — leaves as the driver raised it; a verdict on the database (lost connection, full
        disk, hard limit, corrupt file, busy, read-only) is still coded."""
        try:
            yield
        except Exception as exc:
            err = self.classify(exc)
            if err is exc or (keep_statement_errors and type(err) is StorageError):
                raise
            raise err from exc

    def cancel_watcher(self) -> Watcher | None:
        """A watcher woken when a cancel request is flagged (``jobs.request_cancel``) in any
        process, or None when the engine has none (the holders then poll; :mod:`tenure.worker.cancel_watch`)."""
        return None

    def describe(self) -> str:
        """A human description with no secret in it (for banners and logs)."""
        return self.dialect

    def deadline(self, seconds: float | None, group: Any = None) -> AbstractContextManager[None]:
        """Within the block, each call this thread makes must answer within ``seconds`` (None:
        no deadline); :meth:`interrupt` cuts the calls of ``group`` at once. Engines whose calls
        can hang on a network (PostgreSQL) enforce it; the default does nothing (SQLite is local)."""
        return nullcontext()

    def interrupt(self, group: Any) -> int:
        """Cut the calls of ``group`` in flight now; answers how many (default: none)."""
        return 0
