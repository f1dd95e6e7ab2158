"""Helpers for testing code that uses tenure (your own test suite, not tenure's).

- :func:`drain` runs everything queued with a REAL worker until nothing is eligible, and answers
  what happened (so a test exercises the same fenced path production does).
- :func:`assert_enqueued` / :func:`refute_enqueued` check what your code enqueued.
- :func:`inline` makes an :class:`tenure.App`'s ``task.enqueue`` run the task at once, in the
  calling thread, without a store round-trip (Celery's "eager" mode) — for unit tests of callers.
- The pytest plugin (auto-registered) gives a ``tenure_store`` fixture: a fresh store on a
  temporary SQLite file, closed after the test.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..errors import JobDead
from ..records import Job
from ..store import Store

__all__ = ["ANY", "DrainResult", "assert_enqueued", "drain", "enqueued", "inline", "refute_enqueued"]


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
          concurrency: int = 1, include_scheduled: bool = False, **worker_options: Any) -> DrainResult:
    """Run queued jobs with a real worker until none is eligible now (or, with
    ``include_scheduled``, until none is waiting at all), then stop it. ``target`` is a Store (pass
    ``handlers``) or an App (its tasks are the handlers). Raises TimeoutError after ``timeout``."""
    store = _store_of(target)
    if handlers is None:
        handlers = target.handlers()
    result = DrainResult()
    worker = store.jobs.create_worker(handlers, concurrency=concurrency, poll_interval=0.01,
                                      on_outcome=result.outcomes.append, maintenance=False, **worker_options)
    deadline = time.monotonic() + timeout
    with worker:
        while True:
            counts = store.jobs.counts()
            busy = worker.stats()["in_flight"] or counts["leased"]
            waiting = _eligible_now(store, set(handlers)) if not include_scheduled else \
                counts["pending"] + counts["failed"]
            if not busy and not waiting:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"drain() gave up after {timeout}s: {counts}")
            time.sleep(0.005)
    return result


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
        if self.error is not None:
            raise JobDead(f"inline task failed: {self.error}", job_id=self.id) from self.error
        return self.value


class _InlineContext:
    """The ``ctx`` an inline task gets: no lease, never cancelled, a fresh idempotency key."""

    def __init__(self, job_id: str) -> None:
        import threading

        self.job = None
        self.lease = None
        self.attempt = 1
        self.idempotency_key = job_id
        self.cancelled = threading.Event()
        self.cancelled.reason = None  # type: ignore[attr-defined]


@contextmanager
def inline(app: Any) -> Iterator[list[EagerHandle]]:
    """Within the block, ``task.enqueue(...)`` runs the task immediately in this thread and
    answers an :class:`EagerHandle`. Answers the list of handles (one per call)."""
    from ..app import Handle, Task

    calls: list[EagerHandle] = []
    original = Task.enqueue

    def eager(self: Task, *args: Any, **kwargs: Any) -> Handle | EagerHandle:
        if self.app is not app:
            return original(self, *args, **kwargs)
        payload = self.signature.payload(args, kwargs)  # checked like a real enqueue (TN1002)
        job_id = str(uuid.uuid4())
        handle = EagerHandle(job_id)
        try:
            out = self.handler()(payload, _InlineContext(job_id))
            if hasattr(out, "__await__"):
                import asyncio

                out = asyncio.run(out)
            handle.value = out
        except Exception as exc:  # noqa: BLE001 - reported through the handle, like a job failure
            handle.error = exc
        calls.append(handle)
        return handle

    # The patch answers an EagerHandle where enqueue answers a Handle: that is what inline() is for.
    Task.enqueue = eager  # type: ignore[method-assign, assignment]
    try:
        yield calls
    finally:
        Task.enqueue = original  # type: ignore[method-assign]
