"""Helpers for testing code that uses tenure (your own test suite, not tenure's).

- :func:`drain` runs everything queued with a REAL worker until nothing is eligible, and answers
  what happened (so a test exercises the same fenced path production does).
- :func:`assert_enqueued` / :func:`refute_enqueued` check what your code enqueued.
- :func:`inline` makes an :class:`tenure.App`'s ``task.enqueue`` run the task at once, in the
  calling thread, without a store round-trip (Celery's "eager" mode) — for unit tests of callers.
  It changes that app only, for the block only.
- :meth:`tenure.App.use_store` (a context manager) points an app — a module-level one included —
  at a test store; :func:`isolated` does it with a fresh temporary SQLite file.
- The pytest plugin (auto-registered) gives fixtures: ``tenure_store`` (a fresh store on a
  temporary SQLite file, closed after the test), ``tenure_isolate`` (``tenure_isolate(app, ...)``
  points apps at it for the test) and ``tenure_app`` (the app named by the ``tenure_app`` ini
  option, pointed at it). docs/testing.md shows them.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .. import _validate as v
from .. import durations
from ..durable import RECHECK_MS, Park, what_then
from ..errors import JobDead, NestedRootCall
from ..open_tx import open_here, refusals, refuse_nested
from ..records import Job
from ..store import Store

log = logging.getLogger("tenure.testing")

__all__ = ["ANY", "DrainResult", "EagerHandle", "assert_enqueued", "drain", "enqueued", "inline", "isolated",
           "refute_enqueued"]


class _Any:
    def __eq__(self, other: object) -> bool:
        return True

    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()


def _store_of(target: Any) -> Store:
    return target if isinstance(target, Store) else target.store


def enqueued(target: Any, kind: str | None = None, *, queue: str | None = None,
             states: tuple[str, ...] = ("pending", "failed")) -> list[Job]:
    """The jobs currently waiting (pending or awaiting retry), optionally of one kind/queue."""
    store = _store_of(target)
    out: list[Job] = []
    for state in states:
        after = None
        while True:
            page = store.jobs.page(state=state, kind=kind, queue=queue, after=after, limit=1000)
            out.extend(page.items)
            if page.next_after is None:
                break
            after = page.next_after
    return out


def _match(job: Job, payload: Any, args: Any, kwargs: Any) -> bool:
    if payload is not ANY and job.payload != payload:
        return False
    if args is not ANY or kwargs is not ANY:
        body = job.payload if isinstance(job.payload, dict) else {}
        if args is not ANY and list(body.get("args") or []) != list(args):
            return False
        if kwargs is not ANY and dict(body.get("kwargs") or {}) != dict(kwargs):
            return False
    return True


def _kind(kind: Any) -> str:
    return getattr(kind, "name", kind)  # a Task or a kind string


def assert_enqueued(target: Any, kind: Any, payload: Any = ANY, *, queue: str | None = None,
                    args: Any = ANY, kwargs: Any = ANY, count: int | None = None) -> list[Job]:
    """Assert a job of ``kind`` (a string or an ``@app.task``) is waiting with this payload (or
    task ``args``/``kwargs``), optionally exactly ``count`` of them. Answers the matching jobs."""
    kind = _kind(kind)
    waiting = enqueued(target, None, queue=queue)
    matches = [j for j in waiting if j.kind == kind and _match(j, payload, args, kwargs)]
    if not matches or (count is not None and len(matches) != count):
        listing = "\n".join(f"  - {j.kind} queue={j.queue} payload={j.payload!r}" for j in waiting) or "  (none)"
        want = f"{count} job(s)" if count is not None else "a job"
        raise AssertionError(f"expected {want} of kind {kind!r} with payload {payload!r} "
                             f"(queue {queue or 'any'}); found {len(matches)}. Waiting jobs:\n{listing}")
    return matches


def refute_enqueued(target: Any, kind: Any, payload: Any = ANY, *, queue: str | None = None) -> None:
    """Assert no waiting job of ``kind`` matches."""
    kind = _kind(kind)
    matches = [j for j in enqueued(target, kind, queue=queue) if _match(j, payload, ANY, ANY)]
    if matches:
        raise AssertionError(f"expected no {kind!r} job with payload {payload!r}; found {len(matches)}")


@dataclass
class DrainResult:
    """What :func:`drain` did: outcome events (as ``on_outcome`` reports them) and counters."""

    outcomes: list[dict[str, Any]] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes if o["outcome"] == outcome)

    @property
    def completed(self) -> int:
        return self.count("completed")

    @property
    def failed(self) -> int:
        return self.count("failed")


def drain(target: Any, handlers: dict[str, Callable[..., Any]] | None = None, *, timeout: float = 30.0,
          concurrency: int = 1, include_scheduled: bool = False, retry_now: bool = False,
          **worker_options: Any) -> DrainResult:
    """Run queued jobs with a real worker until none is eligible now (or, with
    ``include_scheduled``, until none is waiting at all), then stop it. ``target`` is a Store (pass
    ``handlers``) or an App (its tasks are the handlers). With ``retry_now``, a job that failed and
    waits for its retry is requeued (``store.jobs.requeue``: pending now, attempts kept) instead
    of waited for, so a test sees every retry up to ``max_attempts`` without sleeping through the
    backoff. Raises TimeoutError after ``timeout``."""
    store = _store_of(target)
    if handlers is None:
        handlers = target.handlers()
    result = DrainResult()
    worker = store.jobs.create_worker(handlers, concurrency=concurrency, poll_interval=0.01,
                                      on_outcome=result.outcomes.append, maintenance=False, **worker_options)
    deadline = time.monotonic() + timeout
    requeued: dict[str, int] = {}  # job id -> its attempts when retry_now requeued it
    with worker:
        while True:
            counts = store.jobs.counts()
            busy = worker.stats()["in_flight"] or counts["leased"]
            waiting = _eligible_now(store, set(handlers)) if not include_scheduled else \
                counts["pending"] + counts["failed"]
            if retry_now and not busy and not waiting:
                waiting = _retry_now(store, set(handlers), requeued)
            if not busy and not waiting:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"drain() gave up after {timeout}s: {counts}")
            time.sleep(0.005)
    return result


def _retry_now(store: Store, kinds: set[str], requeued: dict[str, int]) -> int:
    """Requeue every job of ``kinds`` waiting for its retry (recorded in ``requeued``), and answer
    how many requeued jobs are not through yet: pending with the attempts they were requeued at (no
    claim has taken them: the store's clock may stamp their run_at a hair after this host's, so
    they are counted here rather than as eligible now), leased, or failed again since the pass
    read them (the next pass requeues them). A requeued job that snoozed is not waited for."""
    for job in enqueued(store, states=("failed",)):
        if job.kind in kinds and store.jobs.requeue(job.id):
            requeued[job.id] = job.attempts
    waiting = 0
    for job_id, attempts in requeued.items():
        now = store.jobs.get(job_id)
        if now is not None:
            waiting += now.state in ("leased", "failed") or (now.state == "pending" and now.attempts == attempts)
    return waiting


def _eligible_now(store: Store, kinds: set[str]) -> int:
    now = store._now_wall()
    return sum(1 for j in enqueued(store) if j.kind in kinds and j.run_at <= now)


@dataclass
class EagerHandle:
    """What ``task.enqueue`` answers in :func:`inline` mode: the call already ran."""

    id: str
    value: Any = None
    error: BaseException | None = None

    def result(self, timeout: float | None = None) -> Any:
        if isinstance(self.error, Park):
            raise JobDead(f"inline task stopped at a durable step ({self.error}): inline() runs no "
                          "durable step; test it with drain() and an injected clock", job_id=self.id) from self.error
        if self.error is not None:
            raise JobDead(f"inline task failed: {self.error}", job_id=self.id) from self.error
        return self.value


class _InlineContext:
    """The ``ctx`` an inline task gets: no lease, never cancelled, a fresh idempotency key. Its
    durable steps (``sleep``, ``wait_for_signal``, ``map``, ...) stop the task there with a
    :class:`tenure.durable.Park`, as a worker's attempt parks, and the handle reports that park
    whatever the task did with it (an ``except`` that caught it included)."""

    def __init__(self, job_id: str) -> None:
        import threading

        self.job = None
        self.lease = None
        self.attempt = 1
        self.idempotency_key = job_id
        self.cancelled = threading.Event()
        self.cancelled.reason = None  # type: ignore[attr-defined]
        self.parked: Park | None = None

    def _park(self, until_ms: int) -> NoReturn:
        tx = open_here()
        if tx is not None:  # as a worker's step: a root call inside the task's own transaction
            raise refuse_nested(tx, "a durable step inside this thread's open store.transaction() "
                                "would wait for (SQLite) or escape (PostgreSQL) that transaction: "
                                "take the step before or after the block")
        if self.parked is None:
            self.parked = Park(until_ms)
        raise self.parked

    def sleep(self, seconds: Any) -> None:
        self._park(int(time.time() * 1000) + (durations.ms(seconds, "sleep(seconds)") or 0))

    def sleep_until(self, when: Any) -> None:
        self._park(v.epoch_ms(when, "sleep_until(when)"))

    def wait_for_signal(self, key: str, timeout: Any = None) -> Any:
        self._park(int(time.time() * 1000) + RECHECK_MS)

    def map(self, kind: str, payloads: Any, **options: Any) -> list[Any]:
        self._park(int(time.time() * 1000) + RECHECK_MS)

    def call(self, kind: str, payload: Any = None, **options: Any) -> Any:
        self._park(int(time.time() * 1000) + RECHECK_MS)


@contextmanager
def inline(app: Any) -> Iterator[list[EagerHandle]]:
    """Within the block, ``app``'s ``task.enqueue(...)`` runs the task immediately in this thread
    and answers an :class:`EagerHandle` (arguments checked as a real enqueue checks them, TN1002).
    Only ``app`` changes, only until the block ends; other apps still store their jobs. Answers the
    list of handles (one per call)."""
    from ..app import App, Task

    if not isinstance(app, App):
        raise TypeError(f"inline() takes a tenure.App, got {type(app).__name__}")
    if app._enqueue_hook is not None:
        raise RuntimeError("inline() is already active for this app")
    calls: list[EagerHandle] = []

    def eager(task: Task[Any, Any], payload: Any) -> EagerHandle:
        job_id = str(uuid.uuid4())
        handle = EagerHandle(job_id)
        ctx = _InlineContext(job_id)
        with refusals() as noted:
            try:
                out = task.handler()(payload, ctx)
                if hasattr(out, "__await__"):
                    import asyncio

                    out = asyncio.run(out)
                handle.value = out
            except Exception as exc:  # noqa: BLE001 - reported through the handle, like a job failure
                handle.error = exc
        if noted.refused is not None and not isinstance(handle.error, NestedRootCall):
            # A root call refused inside the task's own transaction, caught: a worker fails the attempt.
            log.warning("inline task %s swallowed a root call refused inside its own transaction (%s) "
                        "and then %s; it is reported as failed with that refusal, as a worker would fail it",
                        task.name, noted.refused,
                        what_then(noted.refused, handle.error is None, handle.error))
            handle.value, handle.error = None, noted.refused
        elif ctx.parked is not None and handle.error is not ctx.parked:  # the task caught it: a worker parks
            log.warning("inline task %s swallowed the park of a durable step (%s); it is reported "
                        "as parked, as a worker would park it", task.name, ctx.parked)
            handle.value, handle.error = None, ctx.parked
        calls.append(handle)
        return handle

    app._enqueue_hook = eager
    try:
        yield calls
    finally:
        app._enqueue_hook = None


@contextmanager
def isolated(*apps: Any, directory: str | None = None) -> Iterator[Store]:
    """A fresh store on a temporary SQLite file (in ``directory``, else a new temporary directory)
    with every app of ``apps`` pointed at it (:meth:`tenure.App.use_store`) for the block; closed
    and removed after. For suites without pytest; the ``tenure_isolate`` fixture is the same."""
    import tempfile
    from contextlib import ExitStack

    from ..store import connect

    with ExitStack() as stack:
        where = directory or stack.enter_context(tempfile.TemporaryDirectory(prefix="tenure-test-"))
        store = connect(f"sqlite:///{where}/tenure-test-{uuid.uuid4().hex[:8]}.db")
        stack.callback(store.close, grace=1)
        store.jobs  # noqa: B018 - create the tables now
        for app in apps:
            stack.enter_context(app.use_store(store))
        yield store
