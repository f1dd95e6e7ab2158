"""Durable steps inside a job: sleep, wait for a signal, start children and join them — WITHOUT
holding a worker slot or a lease meanwhile (docs/workflows.md "Sleeping, signals and
children").

A handler (``ctx`` is a :class:`tenure.worker.JobContext`) or a workflow task (a
:class:`tenure.flow.TaskContext`) calls::

    ctx.sleep(seconds)                         # or ctx.sleep_until(epoch_ms_or_datetime)
    payload = ctx.wait_for_signal(key, timeout=None)   # raises tenure.errors.SignalTimeout
    results = ctx.map(kind, [payload, ...])    # N child jobs; their results in order
    result = ctx.call(kind, payload)           # one child job (e.g. another flow's run)

Each call is a numbered **step** of the attempt (1, 2, ... in call order; per node in a flow).
When a step cannot finish now, it raises :class:`Park`, a :class:`tenure.Snooze`: the worker
settles the attempt back to ``pending`` at the step's due time (the sleep's end, the wait's
timeout, or a re-check :data:`RECHECK_MS` later), with the step's record saved as a checkpoint
and its wake condition registered in the SAME fenced transaction; the slot and the lease are
free while it is parked. A signal's send, or the settlement of the last child, makes it eligible
at once. The job is then claimed again and the handler runs **from the start**: steps already
recorded answer from their checkpoints (a finished sleep does not sleep again, a received
signal answers its payload, a join answers its results) and the handler goes on past them.

So a handler that uses steps must reach them in the same order on every attempt, and whatever it
does before a step runs again on each wake: keep such work idempotent, or put it after the
step, or in a flow node of its own (whose value is checkpointed). A step whose recorded kind or
key differs from the call that replays it is refused with :class:`~tenure.errors.ResumeMismatch`
(TN2069). Parking counts as a snooze: it does not use up a retry (``max_attempts`` grows by one,
``attempts`` counts every run).

Times come from the store's injected clock when it has one, else from the engine's clock (the
database's on PostgreSQL, as for every lease).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from . import _validate as v
from . import durations
from .errors import ChildFailed, InvalidArgument, InvalidType, LeaseNotHeld, ResumeMismatch, SignalTimeout
from .handler_control import Control, Snooze
from .signals import check_key, load_payload

if TYPE_CHECKING:
    from .engine.base import Session
    from .jobs import Jobs
    from .records import Job, Lease
    from .store import Store

#: A parked step with no earlier due time (a wait without timeout, a join) is looked at again
#: after this many ms even if nothing woke it: a bound on any wake-up that was lost (a child
#: deleted before it settled, a signal row removed by hand).
RECHECK_MS = 15 * 60_000
#: Checkpoint node ids of steps start with this (reserved: a flow never reads them as node values).
STEP_PREFIX = "__tenure_step:"
#: Job states in which a child counts as settled.
SETTLED = ("done", "dead", "cancelled")


class Park(Snooze):
    """Raised by a step that must wait: the worker parks the job (see the module docstring).

    ``until_ms``: when the job becomes eligible at the latest (epoch ms). ``signals``: keys whose
    send wakes it earlier. ``children``: the settlement of its last child wakes it earlier.
    ``saves``: ``(checkpoint node id, value)`` pairs saved in the parking transaction.
    ``any_of``: child job ids (started with ``each`` wake-ups) of which the first to settle wakes
    it (a distributed flow's node jobs). Not meant to be caught, and caught it still parks: the
    step remembers it (:attr:`Steps.pending`), a later step raises it again, and the attempt parks
    on it whatever the handler then returns or raises, with a WARNING (docs/workflows.md)."""

    def __init__(self, until_ms: int, *, signals: Iterable[str] = (), children: bool = False,
                 saves: Iterable[tuple[str, Any]] = (), any_of: Iterable[str] = ()) -> None:
        self.until_ms = int(until_ms)
        self.signals = tuple(dict.fromkeys(signals))
        self.children = bool(children)
        self.saves = list(saves)
        self.any_of = tuple(dict.fromkeys(any_of))
        self.delay_ms = 0
        waits = [f"signal {k!r}" for k in self.signals] + (["children"] if self.children else [])
        Control.__init__(self, f"parked until {self.until_ms} (epoch ms)"
                         + (f" or {' or '.join(waits)}" if waits else ""))

    @classmethod
    def merge(cls, parks: Iterable[Park]) -> Park:
        """One park for several steps parked in one attempt (parallel flow nodes): the earliest
        due time, every wake condition, every save."""
        parks = list(parks)
        return cls(min(p.until_ms for p in parks), signals=[k for p in parks for k in p.signals],
                   children=any(p.children for p in parks), saves=[s for p in parks for s in p.saves],
                   any_of=[i for p in parks for i in p.any_of])

    def settle(self, jobs: Jobs, lease: Lease) -> Job:
        return settle_park(jobs._store, lease, self)


def what_then(caught: BaseException, ok: bool, value: Any) -> str:
    """What code did after it caught ``caught`` (a step's park, a refused root call), for the
    WARNING that says it was swallowed: it returned (``ok``), or raised ``value`` — ``caught``
    itself again at a later step, or another exception. One wording for the worker's handlers,
    flow nodes and ``tenure.testing.inline``."""
    if ok:
        return "returned"
    if value is caught:
        return "raised it again at a later step"
    return f"raised {type(value).__name__}: {v.error_message(value)[:200]}"


def _refused(s: Session, store: Store, lease: Lease, now: int, what: str) -> Exception:
    from .fence import refusal

    return refusal(s.job_get(lease.job_id), lease, now, what) or LeaseNotHeld(
        f"cannot {what} job {lease.job_id!r}: the attempt already settled it", job_id=lease.job_id)


def _save(s: Session, store: Store, lease: Lease, node_id: str, value: Any, now: int) -> None:
    """Fenced checkpoint save inside the caller's transaction."""
    from .job_rows import MAX_GENERATION

    text = v.dump_json(value, "step record", store.max_payload_bytes)
    gen = lease.generation
    if type(gen) is not int or not 0 <= gen <= MAX_GENERATION:
        gen = -1
    if not s.checkpoint_save(lease.job_id, node_id, text, gen, lease.token, now):
        raise _refused(s, store, lease, now, "save a step of")


def settle_park(store: Store, lease: Lease, park: Park) -> Job:
    """Park one attempt (fenced), in one transaction: lock the signal keys (before any job row),
    check the fence, save the step records, register the signal waits, and put the job back to
    ``pending`` at ``park.until_ms`` — or now, when a signal of a key it waits for is already
    stored or (``children``) none of its children is unsettled any more. Answers the record."""
    from .job_rows import row_to_job

    with store._transaction_session() as s:
        now = store._now_or(s, store._now())
        for key in sorted(park.signals):
            s.signal_lock(key)
        if not s.job_lock(lease.job_id, lease.token, now):
            raise _refused(s, store, lease, now, "park")
        for node_id, value in park.saves:
            _save(s, store, lease, node_id, value, now)
        ready = False
        for key in park.signals:
            s.wait_add(lease.job_id, key)
            ready = ready or s.signal_count(key) > 0
        row = s.job_snooze(lease.job_id, lease.token, 0 if ready else max(0, park.until_ms - now), now)
        if row is None:
            raise _refused(s, store, lease, now, "park")
        # After the row lock (the snooze): a child settling concurrently either committed before
        # this count (seen) or waits on this row and wakes it once this commits (the trigger).
        if row.run_at > now and (park.children and s.job_children_open(lease.job_id) == 0 or park.any_of and any(
                r.state in SETTLED for r in s.job_get_many(park.any_of))):
            s.job_wake(lease.job_id, now)
            row = s.job_get(lease.job_id) or row
    job = row_to_job(row)
    if job.run_at <= now:
        store._wake_local()
    return job


def _child_base(job_id: str, step: str) -> str:
    base = f"{job_id}~{step}"
    if len(base) + 8 > v.MAX_ID:
        base = "child-" + hashlib.sha256(base.encode("utf-8")).hexdigest()[:40]
    return base


class Steps:
    """The durable steps of one attempt (of one flow node, with ``scope``): numbered in call
    order, recorded as checkpoints under :data:`STEP_PREFIX`. Made by ``ctx`` on first use."""

    def __init__(self, store: Store, lease: Callable[[], Lease], scope: str = "") -> None:
        self._store = store
        self._lease = lease
        self._scope = scope
        self._count = 0
        self._recorded: dict[str, Any] | None = None
        #: The park a step raised in this attempt (None: none). Once set, every later step (and
        #: ``ctx.transaction()``) raises it again, and the attempt parks on it whatever the code
        #: did with it: a handler that swallowed it does not go on past the step.
        self.pending: Park | None = None
        #: True once code went on after the pending park (a later step or ``ctx.transaction()``
        #: raised it again): it was caught at least once.
        self.caught = False

    # -- plumbing -----------------------------------------------------------------------------
    def _parks(self, park: Park) -> Park:
        """Remember ``park`` as this attempt's pending park and answer it (to raise)."""
        self.pending = park
        return park

    def raise_pending(self) -> None:
        """Raise the pending park again, if a step raised one: nothing goes on past a parked step."""
        if self.pending is not None:
            self.caught = True
            raise self.pending

    def _records(self) -> dict[str, Any]:
        if self._recorded is None:
            cps = self._store.jobs.checkpoints(self._lease).load()
            self._recorded = {k: val for k, val in cps.items() if k.startswith(STEP_PREFIX)}
        return self._recorded

    def _next(self, kind: str, **same: Any) -> tuple[str, dict[str, Any] | None]:
        """The next step's checkpoint id and its record (None: not begun). A record of another
        kind, or whose ``same`` fields differ, is a replay of different code: ResumeMismatch. With a
        park pending (an earlier step's, swallowed), raises it again and starts nothing."""
        self.raise_pending()
        self._count += 1
        step = f"{self._scope}{self._count}"
        node_id = STEP_PREFIX + step
        rec = self._records().get(node_id)
        if rec is not None:
            changed = [f for f, want in {"kind": kind, **same}.items() if rec.get(f) != want]
            if changed:
                job_id = self._lease().job_id
                raise ResumeMismatch(
                    f"cannot resume job {job_id!r}: its step {step} was recorded as "
                    f"{ {f: rec.get(f) for f in changed} } but the code now asks for "
                    f"{ {f: ({'kind': kind, **same})[f] for f in changed} }. Steps must be reached in the "
                    "same order on every attempt", job_id=job_id, step=step, changed=changed)
        return node_id, rec

    @contextmanager
    def _tx(self) -> Iterator[tuple[Session, Lease, int]]:
        store = self._store
        store.jobs  # noqa: B018 - opened
        with store._transaction_session() as s:
            yield s, self._lease(), store._now_or(s, store._now())

    def _now(self) -> int:
        store = self._store
        with store._session() as s:
            return store._now_or(s, store._now())

    def _record(self, node_id: str, value: Any) -> None:
        assert self._recorded is not None
        self._recorded[node_id] = value

    # -- sleep --------------------------------------------------------------------------------
    def sleep(self, seconds: Any) -> None:
        """Sleep ``seconds`` (a number or a timedelta) without holding a slot: see the module."""
        ms = durations.ms(seconds, "sleep(seconds)")
        if ms is None:
            raise InvalidType("sleep(seconds) needs a number of seconds or a timedelta")
        node_id, rec = self._next("sleep")
        self._sleep(node_id, rec, None if rec is not None else self._now() + ms)

    def sleep_until(self, when: Any) -> None:
        """Sleep until ``when`` (epoch ms or a datetime; naive means UTC) without holding a slot."""
        until = v.epoch_ms(when, "sleep_until(when)")
        node_id, rec = self._next("sleep")
        self._sleep(node_id, rec, until)

    def _sleep(self, node_id: str, rec: dict[str, Any] | None, until: int | None) -> None:
        if rec is not None:
            if rec.get("done"):
                return
            until = int(rec["until"])
        assert until is not None
        with self._tx() as (s, lease, now):
            if now < until:
                first = [] if rec is not None else [(node_id, {"kind": "sleep", "until": until})]
                raise self._parks(Park(until, saves=first))
            done = {"kind": "sleep", "until": until, "done": True}
            _save(s, self._store, lease, node_id, done, now)
        self._record(node_id, done)

    # -- signals ------------------------------------------------------------------------------
    def wait_for_signal(self, key: str, timeout: Any = None) -> Any:
        """Receive the next signal of ``key`` (its payload), parking until one is sent; with
        ``timeout`` (seconds or a timedelta, counted from the first call) raise
        :class:`~tenure.errors.SignalTimeout` when none came in time. See :mod:`tenure.signals`."""
        key = check_key(key)
        ms = durations.ms(timeout, "wait_for_signal(timeout=...)")
        node_id, rec = self._next("signal", key=key)
        if rec is not None and rec.get("done"):
            return self._answer(key, rec)
        store = self._store
        with self._tx() as (s, lease, now):
            s.signal_lock(key)
            if not s.job_lock(lease.job_id, lease.token, now):
                raise _refused(s, store, lease, now, "receive a signal for")
            until = rec.get("until") if rec is not None else (None if ms is None else now + ms)
            got = s.signal_take(key, lease.job_id, now)
            if got is not None:
                done: dict[str, Any] = {"kind": "signal", "key": key, "done": True, "signal": got.id,
                                        "payload": load_payload(got.payload)}
            elif until is not None and now >= until:
                done = {"kind": "signal", "key": key, "done": True, "timeout": True, "until": until}
            else:
                first = [] if rec is not None else [(node_id, {"kind": "signal", "key": key, "until": until})]
                raise self._parks(Park(now + RECHECK_MS if until is None else min(until, now + RECHECK_MS),
                                       signals=[key], saves=first))
            _save(s, store, lease, node_id, done, now)
            s.wait_remove(lease.job_id, key)
        self._record(node_id, done)
        return self._answer(key, done)

    def _answer(self, key: str, rec: dict[str, Any]) -> Any:
        if rec.get("timeout"):
            job_id = self._lease().job_id
            raise SignalTimeout(f"job {job_id!r} waited for signal {key!r} until {rec.get('until')} "
                                "(epoch ms) and none came", key=key, job_id=job_id, until=rec.get("until"))
        return rec.get("payload")

    # -- children -----------------------------------------------------------------------------
    def map(self, kind: str, payloads: Iterable[Any], **options: Any) -> list[Any]:
        """Enqueue one child job of ``kind`` per payload (``options``: any ``enqueue`` keyword
        but ``id``) and answer their results in payload order once every child is ``done``,
        parking until then. A child that ends ``dead`` or ``cancelled`` (or is deleted) makes
        this raise :class:`~tenure.errors.ChildFailed`."""
        v.name(kind, "map(kind)")
        if isinstance(payloads, str | bytes | dict) or not isinstance(payloads, Iterable):
            raise InvalidType(f"map(kind, payloads) takes an iterable of payloads, got {type(payloads).__name__}")
        if "id" in options or "kind" in options or "payload" in options:
            raise InvalidArgument("map(...) names its children itself: pass no id, kind or payload option")
        items = list(payloads)
        node_id, rec = self._next("children", of=kind, count=len(items))
        if rec is None:
            rec = self._start_children(node_id, kind, items, options)
        if rec.get("done"):
            return self._joined(rec)
        return self._join(node_id, rec)

    def call(self, kind: str, payload: Any = None, **options: Any) -> Any:
        """One child job (another flow's run: ``call(flow_name, {"input": ...})``) and its result;
        :meth:`map` of one payload."""
        return self.map(kind, [payload], **options)[0]

    def _start_children(self, node_id: str, kind: str, items: list[Any], options: dict[str, Any]) -> dict[str, Any]:
        store = self._store
        base = _child_base(self._lease().job_id, node_id[len(STEP_PREFIX):])
        built = [store.jobs._build_spec({"kind": kind, "payload": p, "id": f"{base}.{i}", **options})
                 for i, p in enumerate(items)]
        with self._tx() as (s, lease, now):
            if not s.job_lock(lease.job_id, lease.token, now):
                raise _refused(s, store, lease, now, "start children of")
            got = store.queues.insert(s, built, store._now()) if built else []
            ids = [i if i is not None else f"{base}.{n}" for n, i in enumerate(got)]
            if ids:
                s.job_set_wake_parent(ids, lease.job_id)
            rec = {"kind": "children", "of": kind, "count": len(items), "children": ids}
            _save(s, store, lease, node_id, rec, now)
        store._wake_local()
        self._record(node_id, rec)
        return rec

    def _join(self, node_id: str, rec: dict[str, Any]) -> list[Any]:
        from .job_rows import row_to_job

        store = self._store
        ids: list[str] = list(rec["children"])
        with self._tx() as (s, lease, now):
            jobs = {j.id: j for j in (row_to_job(r) for r in s.job_get_many(ids))} if ids else {}
            if any(j.state not in SETTLED for j in jobs.values()):
                raise self._parks(Park(now + RECHECK_MS, children=True))
            failed = [{"id": i, "state": jobs[i].state if i in jobs else "missing",
                       "last_error": jobs[i].last_error if i in jobs else None}
                      for i in ids if i not in jobs or jobs[i].state != "done"]
            done = {**rec, "done": True}
            if failed:
                done["failed"] = failed
            else:
                done["results"] = [jobs[i].result for i in ids]
            _save(s, store, lease, node_id, done, now)
        self._record(node_id, done)
        return self._joined(done)

    def _joined(self, rec: dict[str, Any]) -> list[Any]:
        if rec.get("failed"):
            failed = rec["failed"]
            job_id = self._lease().job_id
            raise ChildFailed(f"{len(failed)} of the {len(rec['children'])} children of job {job_id!r} did not "
                              f"complete: " + ", ".join(f"{f['id']} {f['state']}" for f in failed[:5])
                              + (" ..." if len(failed) > 5 else ""), job_id=job_id, failed=failed)
        return list(rec["results"])
