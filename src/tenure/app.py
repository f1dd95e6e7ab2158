"""The task API: decorate functions, enqueue them by calling ``.enqueue``, run a worker.

```python
app = tenure.App("sqlite:///jobs.db")

@app.task(queue="emails", max_attempts=5, timeout=60)
def send_email(to: str, subject: str) -> dict: ...

handle = send_email.enqueue(to="a@b", subject="hi")
handle.result(timeout=10)
app.run_worker(concurrency=8)
```
``enqueue`` checks its arguments against the function's signature before it writes anything
(TN1002 naming the task and the argument); a task's payload is ``{"args": [...], "kwargs": {...}}``;
the parameter annotated :class:`tenure.JobContext` (or an unannotated ``ctx``) receives the job
context and is never an argument. The rules: :mod:`tenure.task_args`, docs/tasks.md.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import os
import signal
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

from . import _validate as v
from . import durations
from . import enqueue_options as eo
from .canvas import PARENTS_KEY, inject_parents
from .errors import InvalidArgument, InvalidType
from .handle import Handle as Handle  # re-exported: tenure.app.Handle
from .handler_control import apply_task_policy, exception_classes
from .kinds import warn_unrunnable
from .rate_window import parse_rate
from .store import Store, connect
from .task_args import TaskSignature
from .worker.config import WorkerConfig

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .canvas import Signature
    from .enqueue_options import EnqueueOptions
    from .worker import JobContext, Worker

log = logging.getLogger("tenure")

#: A task's parameters (what ``enqueue`` and a direct call accept) and its result.
P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

#: Task options that are settings of the task's queue, not of each job (docs/queues.md, "Rate
#: limits"): the table's task options that no enqueue takes.
_QUEUE_TASK_OPTIONS = eo.names(eo.TASK) - eo.names(eo.ENQUEUE)


_ENQUEUE = "tenure's is task.enqueue(*args, **kwargs)"
_WITH_OPTIONS = "tenure's is task.with_options(delay=..., queue=...).enqueue(*args, **kwargs)"
#: What Celery, RQ, Dramatiq and procrastinate call a task's enqueue, and tenure's spelling of it.
_PEER_METHODS = {
    "delay": _ENQUEUE, "send": _ENQUEUE, "defer": _ENQUEUE, "apply_async": _WITH_OPTIONS,
    "send_with_options": _WITH_OPTIONS, "configure": _WITH_OPTIONS, "enqueue_in": _WITH_OPTIONS,
    "enqueue_at": "tenure's is task.with_options(run_at=...).enqueue(*args, **kwargs)",
}


class Task(Generic[P, R]):
    """A function registered as a job kind. ``Task[P, R]``: ``enqueue`` takes the function's
    parameters ``P`` (a type checker flags a wrong one, as the call itself would raise TN1002) and
    answers a ``Handle[R]``; calling the task directly keeps the function's type."""

    def __init__(self, app: App, fn: Callable[..., Any], name: str, options: dict[str, Any],
                 retry_on: Any = None, discard_on: Any = None, signature: TaskSignature | None = None) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.options = options
        #: Exception classes retried (any other makes the job dead at once); empty: all retried.
        self.retry_on = exception_classes(retry_on, "retry_on")
        #: Exception classes that make the job dead at once (no retries).
        self.discard_on = exception_classes(discard_on, "discard_on")
        #: The function's signature, read once: what enqueue checks, where the context goes.
        self.signature = signature or TaskSignature(name, fn)
        self.wants_ctx = self.signature.context is not None
        self.is_async = inspect.iscoroutinefunction(fn)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the function directly, in this process (no queue)."""
        return self.fn(*args, **kwargs)

    if not TYPE_CHECKING:  # at run time only: a type checker flags these names by itself

        def __getattr__(self, name: str) -> Any:
            """An attribute a Task lacks; for another queue's method (Celery's ``delay``), tenure's."""
            hint = _PEER_METHODS.get(name)
            raise AttributeError(f"'Task' object has no attribute {name!r}" + (f" ({hint})" if hint else ""))

    def with_options(self, *, conn: Any = None, **options: Unpack[EnqueueOptions]) -> Task[P, R]:
        """The same task with other enqueue options (``delay``, ``priority``, ``queue``, ...: the
        table's ``EnqueueOptions``, so a type checker flags a misspelt one), and with ``conn=`` (a
        driver connection) its enqueues written in the caller's own transaction."""
        if conn is not None:
            options["conn"] = conn  # type: ignore[typeddict-unknown-key]  # the task surface's own key
        eo.refuse(set(options) & _QUEUE_TASK_OPTIONS, eo.ENQUEUE)  # a queue setting: not per call
        eo.checked(options, eo.TASK)  # a bad value is refused here, not at the first enqueue
        clone = type(self)(self.app, self.fn, self.name, {**self.options, **options}, self.retry_on,
                           self.discard_on, self.signature)
        return clone

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Handle[R]:
        """Enqueue a call; answers a :class:`Handle` (``.id``, ``.result()``). The arguments are
        checked against the function's signature first: a call it could not accept raises
        :class:`InvalidType` (TN1002) naming the task and the argument, and nothing is written."""
        payload = self.signature.payload(args, kwargs)
        if self.app._enqueue_hook is not None:  # tenure.testing.inline(app), for this app only
            return self.app._enqueue_hook(self, payload)
        job_id = self.app.store.jobs.enqueue(self.name, payload, **self.options)
        return Handle(job_id, self.app.store)

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """A signature: this call, to be enqueued later as a step of ``tenure.chain``,
        ``tenure.group`` or ``tenure.chord`` (docs/composition.md). A step after others receives
        their result(s) as its FIRST positional argument, before these."""
        from .canvas import Signature

        return Signature(self, args, kwargs)

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> Handle[R]:
        """``enqueue`` without blocking the event loop (runs on a thread)."""
        import asyncio

        return await asyncio.to_thread(self.enqueue, *args, **kwargs)

    def handler(self) -> Callable[..., Any]:
        """The ``(payload, ctx)`` handler a worker runs for this task."""
        fn, split = self.fn, self.signature.call
        retry_on, discard_on = self.retry_on, self.discard_on
        policy = bool(retry_on or discard_on)

        if self.is_async:
            async def run_async(payload: Any, ctx: Any) -> Any:
                if type(payload) is dict and PARENTS_KEY in payload:
                    payload = inject_parents(payload, ctx.store.jobs.dependencies(ctx.job.id))
                args, kwargs = split(payload, ctx)
                if not policy:
                    return await fn(*args, **kwargs)
                try:
                    return await fn(*args, **kwargs)
                except Exception as exc:
                    ruled = apply_task_policy(exc, retry_on, discard_on)
                    if ruled is exc:
                        raise
                    raise ruled from exc

            return run_async

        def run(payload: Any, ctx: Any) -> Any:
            if type(payload) is dict and PARENTS_KEY in payload:  # a composition step (tenure.canvas)
                payload = inject_parents(payload, ctx.store.jobs.dependencies(ctx.job.id))
            args, kwargs = split(payload, ctx)
            if not policy:
                return fn(*args, **kwargs)
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                ruled = apply_task_policy(exc, retry_on, discard_on)
                if ruled is exc:
                    raise
                raise ruled from exc

        return run


class ContextTask(Task[P, R]):
    """A task whose function takes the job context as its first parameter: ``P`` is the rest,
    what ``enqueue`` takes; a direct call passes the context first."""

    def __call__(self, ctx: JobContext, /, *args: P.args,  # type: ignore[override]
                 **kwargs: P.kwargs) -> R:
        return self.fn(ctx, *args, **kwargs)


class AsyncTask(Task[P, R]):
    """A task whose function is ``async def``: ``Handle[R]`` answers what the coroutine returns;
    a direct call answers the coroutine."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:  # type: ignore[override]
        return self.fn(*args, **kwargs)


class AsyncContextTask(Task[P, R]):
    """An ``async def`` task that takes the job context as its first parameter."""

    def __call__(self, ctx: JobContext, /, *args: P.args,  # type: ignore[override]
                 **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        return self.fn(ctx, *args, **kwargs)


def _task_class(signature: TaskSignature, is_async: bool) -> type[Task[Any, Any]]:
    """The class whose ``__call__`` types the function: the context first or not, async or not."""
    first = next(iter(signature.full.parameters.values()), None)
    context_first = signature.context is not None and first is signature.context
    if is_async:
        return AsyncContextTask if context_first else AsyncTask
    return ContextTask if context_first else Task


class TaskDecorator(Protocol):
    """What ``@app.task(...)`` and ``@app.periodic(...)`` answer: a decorator typed like ``App.task``."""

    # the overloads overlap for a function whose first parameter accepts any type (an untyped
    # one): it is read as taking the context first, as an unannotated ``ctx`` does
    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, fn: Callable[Concatenate[JobContext, P], Coroutine[Any, Any, R]], /) -> AsyncContextTask[P, R]: ...
    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> AsyncTask[P, R]: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[JobContext, P], R], /) -> ContextTask[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R], /) -> Task[P, R]: ...


#: What ``App.run_worker`` and ``tenure worker`` give running handlers on a graceful stop (seconds).
DEFAULT_GRACE = 30.0
#: At most this long, a second signal waits to release the in-flight jobs before the exit (a
#: loaded 2-core machine took over 3 s: the dispatcher's join and a busy SQLite write lock).
ABANDON_WAIT_S = 6.0


def _fan_out(observers: list[Callable[[dict[str, Any]], Any]]) -> Callable[[dict[str, Any]], None]:
    def fan_out(event: dict[str, Any]) -> None:
        for fn in observers:
            try:
                fn(event)
            except Exception:  # an observer never affects the worker (6.17)
                log.exception("an on_outcome observer raised; ignored")

    return fan_out


def _exit_now(worker: Any) -> threading.Event:
    """A second signal: release ``worker``'s in-flight jobs, then end the process with status 130.

    The release runs on a helper thread and this returns at once, so the signal handler that calls
    it returns too: the handler runs on the main thread, which the signal may have interrupted
    inside one of the worker's locks (a graceful stop holds them between its waits), and
    :meth:`Worker.abandon` needs those locks. A timer ends the process anyway after
    :data:`ABANDON_WAIT_S` (the jobs are then reclaimed after their lease). Answers an event set
    once the exit is under way."""
    exiting = threading.Event()

    def give_up() -> None:
        log.warning("tenure worker: could not release the in-flight jobs in time; they are reclaimed "
                    "after their lease")
        os._exit(130)

    timer = threading.Timer(ABANDON_WAIT_S, give_up)
    timer.daemon = True
    timer.start()

    def run() -> None:
        try:
            released = worker.abandon()
            if released:
                log.warning("tenure worker: released %d in-flight job(s): %s", len(released), ", ".join(released))
        except BaseException:  # the exit below must happen whatever went wrong
            log.exception("tenure worker: releasing the in-flight jobs failed")
        finally:
            exiting.set()
            os._exit(130)

    threading.Thread(target=run, name="tenure-abandon", daemon=True).start()
    return exiting


class App:
    """A registry of tasks bound to one store."""

    def __init__(self, url: str | None = None, *, store: Store | None = None, include: Iterable[str] = (),
                 **connect_options: Any) -> None:
        """``url`` (else ``$TENURE_URL``, else ``sqlite:///tenure.db``) or an open ``store``; nothing
        connects before first use. ``include``: modules that declare this app's tasks, imported
        by :meth:`autodiscover` — which every worker of the app runs before it starts — so a
        worker started on the app's module finds tasks declared elsewhere (Celery's ``include``)."""
        if isinstance(include, str) or not all(isinstance(m, str) and m for m in include):
            raise InvalidType(f"include takes a list of module names, got {include!r}")
        #: Module names :meth:`autodiscover` imports.
        self.include: list[str] = list(include)
        self._url = url
        self._store = store
        self._connect_options = connect_options
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.periodic_tasks: list[dict[str, Any]] = []
        #: Queue settings given as task options (``rate_limit``, ``group_rate_limit``), by queue:
        #: set on the queues by :meth:`create_worker` (``store.queues.create``, idempotent).
        self.queue_settings: dict[str, dict[str, Any]] = {}
        self._worker_start_hooks: list[Callable[[Any], Any]] = []
        self._outcome_hooks: list[Callable[[dict[str, Any]], Any]] = []
        #: Stores that stand in for this app's own while a ``use_store`` block runs (innermost last).
        self._stand_ins: list[Store] = []
        #: While ``tenure.testing.inline(app)`` runs: what ``task.enqueue`` does instead of storing.
        self._enqueue_hook: Callable[[Task[Any, Any], Any], Any] | None = None

    def on_worker_start(self, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """Register per-process setup: ``fn(worker)`` runs in every process that runs this app's
        worker (``app.run_worker``, ``tenure worker``, each supervised child), before it claims
        anything — the place to initialise Sentry, tracing or a connection pool. An exception
        stops the worker from starting. Usable as a decorator; answers ``fn``."""
        if not callable(fn):
            raise InvalidType("on_worker_start takes a callable fn(worker)")
        self._worker_start_hooks.append(fn)
        return fn

    def on_outcome(self, fn: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        """Register an observer of every settled attempt of this app's workers: ``fn(event)`` with
        ``{outcome, job_id, kind, attempt, generation, code?, reason?, exception?}`` — ``outcome``
        is ``completed``, ``failed``, ``snoozed``, ``cancelled`` or ``lost``; ``exception`` is the
        exception a failed handler raised (hand it to Sentry's ``capture_exception``). An observer
        that raises is logged and ignored. Usable as a decorator; answers ``fn``."""
        if not callable(fn):
            raise InvalidType("on_outcome takes a callable fn(event)")
        self._outcome_hooks.append(fn)
        return fn

    @property
    def store(self) -> Store:
        """The store this app enqueues to and runs workers over: inside a :meth:`use_store` block
        the block's store; else its own, opened at first use (from ``url``, ``$TENURE_URL``, or
        ``sqlite:///tenure.db``)."""
        if self._stand_ins:
            return self._stand_ins[-1]
        if self._store is None:
            self._store = connect(self._url, **self._connect_options)
        return self._store

    @contextmanager
    def use_store(self, store: Store | str) -> Iterator[Store]:
        """Point this app at ``store`` (a :class:`Store`, or a URL opened now and closed at the
        end) for the block: every ``task.enqueue``, ``app.store`` and worker of this app, in every
        thread, uses it; the app's own store is not opened (a module-level ``App("postgresql://
        prod...")`` in a test never connects). Blocks nest; the previous store is back after.
        For tests: ``tenure.testing`` and its ``tenure_app``/``tenure_isolate`` fixtures call it."""
        opened = None
        if isinstance(store, str):
            store = opened = connect(store)
        elif not isinstance(store, Store):
            raise InvalidType(f"use_store takes a Store or a store URL, got {type(store).__name__}")
        self._stand_ins.append(store)
        try:
            yield store
        finally:
            self._stand_ins.remove(store)
            if opened is not None:
                opened.close(grace=1)

    @overload
    def task(self, fn: Callable[Concatenate[JobContext, P], Coroutine[Any, Any, R]], *, name: str | None = None,
             retry_on: Any = None, discard_on: Any = None, **options: Any) -> AsyncContextTask[P, R]: ...
    @overload
    def task(self, fn: Callable[P, Coroutine[Any, Any, R]], *, name: str | None = None, retry_on: Any = None,
             discard_on: Any = None, **options: Any) -> AsyncTask[P, R]: ...
    @overload
    def task(self, fn: Callable[Concatenate[JobContext, P], R], *, name: str | None = None, retry_on: Any = None,
             discard_on: Any = None, **options: Any) -> ContextTask[P, R]: ...
    @overload
    def task(self, fn: Callable[P, R], *, name: str | None = None, retry_on: Any = None,
             discard_on: Any = None, **options: Any) -> Task[P, R]: ...
    @overload
    def task(self, fn: None = None, *, name: str | None = None, retry_on: Any = None,
             discard_on: Any = None, **options: Any) -> TaskDecorator: ...

    def task(self, fn: Callable[..., Any] | None = None, *, name: str | None = None, retry_on: Any = None,
             discard_on: Any = None, **options: Any) -> Any:
        """Register a function as a task (usable bare, ``@app.task``, or ``@app.task(queue=...)``).
        ``retry_on`` / ``discard_on``: exception classes that are retried (any other is then dead
        at once) / dead at once (:mod:`tenure.handler_control`); the rest are enqueue options."""
        exception_classes(retry_on, "retry_on")
        exception_classes(discard_on, "discard_on")
        eo.checked(options, eo.TASK)  # each name and value by the table: refused at declaration
        self._queue_options(options)

        def register(f: Callable[..., Any]) -> Task[Any, Any]:
            if not callable(f):
                raise InvalidType("@app.task decorates a function")
            # A function defined inside another has "<locals>" in its qualified name: drop that
            # part so the default name stays a valid kind ("tests.test_x.add").
            kind = name or f"{f.__module__}.{f.__qualname__}".replace(".<locals>", "").replace("<lambda>", "lambda")
            v.name(kind, "task name")
            if kind in self.tasks:
                raise InvalidArgument(f"a task named {kind!r} is already registered")
            signature = TaskSignature(kind, f)
            cls = _task_class(signature, inspect.iscoroutinefunction(f))
            t = cls(self, f, kind, options, retry_on, discard_on, signature)
            self.tasks[kind] = t
            return t

        return register(fn) if fn is not None else register

    def _queue_options(self, options: dict[str, Any]) -> None:
        """Take the queue settings out of a task's options (validated now: TN3004 for a bad rate)
        into :attr:`queue_settings`; two tasks may not give one queue different values."""
        given = {k: options.pop(k) for k in list(options) if k in _QUEUE_TASK_OPTIONS}
        if not given:
            return
        queue = options.get("queue") or "default"
        v.name(queue, "queue")
        for key, value in given.items():
            rate = parse_rate(value, key)
            text = None if rate is None else str(rate)
            held = self.queue_settings.setdefault(queue, {})
            if key in held and held[key] != text:
                raise InvalidArgument(f"two tasks give queue {queue!r} different {key}: {held[key]!r} and {text!r}")
            held[key] = text

    def periodic(self, cron: str, *, tz: str = "UTC", name: str | None = None, catch_up: str = "latest",
                 **options: Any) -> TaskDecorator:
        """Register a function as a task that ALSO runs on a cron schedule::

            @app.periodic(cron="*/5 * * * *", tz="Europe/Paris", queue="reports")
            def refresh() -> None: ...

        The expression, zone and ``catch_up`` policy are checked now (:class:`InvalidSchedule`
        naming the bad field). The schedule, named ``name`` (default: the task's name), is stored
        when a worker with maintenance on starts over this app's store (or by
        ``app.store.schedules.sync(app)``) and fires once per boundary across every process. The
        task is called with no arguments; ``options`` are its enqueue options (``queue``,
        ``max_attempts``, ``priority``, ``timeout``, ...). See :mod:`tenure.schedules`."""
        from .cron import parse
        from .errors import InvalidSchedule
        from .schedules import CATCH_UP_POLICIES, declare

        parse(cron, tz)
        if catch_up not in CATCH_UP_POLICIES:
            raise InvalidSchedule(f"catch_up must be one of {', '.join(CATCH_UP_POLICIES)}, got {catch_up!r}",
                                  field="catch_up")
        # the task's queue goes to the schedule as its queue, its queue settings to the queue
        eo.refuse(set(options) - {"queue"} - _QUEUE_TASK_OPTIONS, eo.SCHEDULE)

        def register(fn: Callable[..., Any]) -> Task[Any, Any]:
            t: Task[Any, Any] = self.task(fn, name=name, **options)
            self.periodic_tasks.append({
                "name": t.name, "cron": cron, "tz": tz, "kind": t.name, "queue": options.get("queue"),
                "options": {k: val for k, val in options.items()
                                                       if k != "queue" and k not in _QUEUE_TASK_OPTIONS}, "catch_up": catch_up})
            declare(self)
            return t

        return register  # type: ignore[return-value]

    def autodiscover(self, *modules: str) -> list[str]:
        """Import the modules of ``include`` (and ``modules``, added to it), so that the tasks they
        declare on this app are registered; answers the names imported. Importing twice is free.
        A module that does not exist raises :class:`InvalidArgument` (TN1001) naming it; an error
        raised by a module's own code propagates as it is."""
        for name in modules:
            if not isinstance(name, str) or not name:
                raise InvalidType(f"autodiscover takes module names, got {name!r}")
            if name not in self.include:
                self.include.append(name)
        for name in self.include:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name is None or not (name == exc.name or name.startswith(f"{exc.name}.")):
                    raise  # the module exists; something it imports does not
                raise InvalidArgument(f"cannot import {name!r} (included by the app): {exc}") from None
        return list(self.include)

    def handlers(self) -> dict[str, Callable[..., Any]]:
        return {kind: t.handler() for kind, t in self.tasks.items()}

    def create_worker(self, config: WorkerConfig | None = None, **options: Any) -> Worker:
        """A worker over this app's tasks, not yet started: its settings are ``config`` (a
        :class:`tenure.WorkerConfig`) with the keyword ``options`` applied, validated before
        anything else happens. Its ``on_outcome`` (if any) and every ``@app.on_outcome`` observer
        see its outcomes. The ``include`` modules are imported first (:meth:`autodiscover`)."""
        cfg = WorkerConfig.build(config, options)
        self.autodiscover()
        if not self.tasks:
            raise InvalidArgument("this app has no tasks to run: declare one with @app.task, or import the "
                                  "modules that do (App(include=[...]), tenure worker --include MODULE)")
        for queue, settings in self.queue_settings.items():
            self.store.queues.create(queue, **settings)
        observers = [fn for fn in (cfg.on_outcome, *self._outcome_hooks) if fn is not None]
        if len(observers) > 1 or (observers and cfg.on_outcome is None):
            cfg = replace(cfg, on_outcome=_fan_out(observers))
        return self.store.jobs.create_worker(self.handlers(), cfg)

    def run_worker(self, config: WorkerConfig | None = None, *, install_signals: bool = True,
                   ready: threading.Event | None = None, stop_event: threading.Event | None = None,
                   grace: float | timedelta | str = DEFAULT_GRACE, **options: Any) -> int:
        """Run a worker over this app's tasks and block until it should stop; answers how many
        attempts it settled (completed, failed, lost or cancelled).

        The worker's settings are ``config`` (a :class:`tenure.WorkerConfig`) with the keyword
        ``options`` applied (``concurrency``, ``queues``, ``lease`` in seconds, ``max_jobs``,
        ``stop_grace``, ``zombie_share``, ...); a bad or unknown one is refused before anything
        starts. It stops gracefully on the first SIGINT/SIGTERM (installed only when called from the main
        thread and ``install_signals``), when ``stop_event`` is set, or once ``max_jobs`` jobs have
        settled (a recycled process): in-flight handlers are cancelled and get ``grace`` seconds
        (default 30; a timedelta or text like ``"1m"`` too) to wind up; a job whose handler is
        still running then is released at once
        (pending again, retries left unchanged). A second signal exits the process at once (status
        130) after releasing its in-flight jobs the same way (bounded: at most
        :data:`ABANDON_WAIT_S` seconds). ``@app.on_worker_start`` hooks run before the worker
        claims. ``ready`` is set once the worker runs.

        When the worker turns unhealthy (zombie slots reached ``zombie_share`` of its slots, see
        :mod:`tenure.worker_health`) it is stopped the same way and this raises
        :class:`tenure.errors.WorkerUnhealthy` (TN2090): the process should be replaced
        (``tenure worker`` exits with status 75 for it)."""
        grace = durations.seconds(grace, "grace")
        cfg = WorkerConfig.build(config, options)
        max_jobs, concurrency = cfg.max_jobs, cfg.concurrency
        worker = self.create_worker(cfg)
        for hook in self._worker_start_hooks:
            hook(worker)
        stop = stop_event or threading.Event()
        unhealthy = None
        signals = [0]

        def on_signal(signum: int, _frame: Any) -> None:
            signals[0] += 1
            if signals[0] >= 2:
                if signals[0] > 2:  # a third: the release is taking too long for the operator
                    os._exit(130)
                log.warning("tenure worker: second signal, stopping now (releasing in-flight jobs)")
                _exit_now(worker)
                return
            log.info("tenure worker: %s received, stopping gracefully (again to stop now)",
                     signal.Signals(signum).name)
            stop.set()

        previous = {}
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, on_signal)
        try:
            worker.start()
            try:
                log.info("tenure worker started: store=%s%s queues=%s kinds=%s concurrency=%d lease=%gs "
                         "owner=%s%s", self.store, _sqlite_file(self.store), ",".join(worker.queues or ["*"]),
                         ",".join(worker.kinds),
                         concurrency, worker.lease_ms / 1000, worker.owner,
                         "" if max_jobs is None else f" max_jobs={max_jobs}")
                warn_unrunnable(self.store, worker.queues, worker.kinds)  # docs/operations.md#unhandled-kinds
                if ready is not None:
                    ready.set()
                while not stop.wait(0.1):
                    if worker.exhausted.is_set():
                        log.info("tenure worker: %d jobs settled (max_jobs), stopping", max_jobs)
                        break
                    health = worker.health()
                    if not health.healthy:
                        unhealthy = health.error()
                        log.error("tenure worker unhealthy, stopping: %s", unhealthy)
                        break
            finally:
                # An unhealthy worker's handlers already outlived their cancellation: its own
                # stop_grace, not the shutdown grace, is what they get.
                result = worker.stop(grace if unhealthy is None else None, release=True)
            stats = worker.stats()
            log.info("tenure worker stopped: drained=%s in_flight=%d completed=%d failed=%d",
                     result.drained, result.in_flight, stats["completions"], stats["failures"])
            if unhealthy is not None:
                raise unhealthy
            return (stats["completions"] + stats["failures"] + stats["lost_settlements"]
                    + stats["cancellations"])
        finally:
            if signals[0] >= 2:  # the immediate exit is under way on its own thread: never return 0
                threading.Event().wait(ABANDON_WAIT_S + 1.0)
                os._exit(130)
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _sqlite_file(store: Store) -> str:
    """`` file=/abs/path`` for a SQLite store opened by a relative path (``sqlite:///tenure.db``, the
    default), else empty: a worker started in another directory than the code that enqueues opens
    another file, and its jobs never arrive; the banner says which file this worker reads."""
    path = getattr(store.engine, "path", None)
    if store.engine.dialect != "sqlite" or not isinstance(path, str) or path == ":memory:" or os.path.isabs(path):
        return ""
    return f" file={os.path.abspath(path)}"
