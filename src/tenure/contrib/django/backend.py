"""``TenureBackend``: Django's task API (``django.tasks`` or the backport) on a tenure store.

What it promises, as Django's own backends do (their test suites run against it:
``tests/integrations/django_upstream``):

- **Enqueue** checks the task the Django way (``validate_task``: queues, priority, module-level
  function), the arguments the Django way (``normalize_json``: JSON types, ``bytes`` decoded as
  UTF-8, anything else a ``TypeError``/``ValueError``) and against the function's signature (a
  ``TypeError`` naming the task; nothing written), sends ``task_enqueued``, and answers a READY
  :class:`TaskResult` whose id is the tenure job id.
- **The store** is resolved at each call (:mod:`.connection`): with ``OPTIONS["DATABASE"]``
  (default ``"default"``) it is Django's database as configured now, the test database under
  ``manage.py test``; inside ``transaction.atomic()`` the job is written and read through
  Django's own connection (the outbox), so it commits and rolls back with the block and
  ``get_result()`` in the block sees it.
- **The worker** (``manage.py tenure_worker``) sends ``task_started`` and ``task_finished``,
  records the return value through ``normalize_json`` (an unstorable value fails the task with
  Django's ``TypeError``), and records any exception (``SystemExit`` and ``KeyboardInterrupt``
  included) with its class path and traceback.
- **Attempts:** a Django task runs once (Django's semantics): ``max_attempts`` is 1 unless
  ``OPTIONS["MAX_ATTEMPTS"]`` or the task's own ``max_attempts`` (:func:`tenure.contrib.django.task`,
  ``task.using(max_attempts=...)``) says otherwise. ``result.attempts``, ``started_at`` (the
  first attempt's start), ``last_attempted_at`` (the last one's) and ``finished_at`` are read
  from the job's attempt history.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
import traceback
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.db import connections

import tenure
from tenure import enqueue_options as eo
from tenure.errors import InvalidArgument, InvalidType, TenureError
from tenure.records import Job

from . import connection as _conn
from ._compat import (
    BaseTaskBackend,
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)

_STATUS = {
    "pending": TaskResultStatus.READY,
    "failed": TaskResultStatus.READY,  # awaiting its retry
    "leased": TaskResultStatus.RUNNING,
    "done": TaskResultStatus.SUCCESSFUL,
    "dead": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}

#: The key of the envelope a Django task's result is stored in (the return value, when the
#: successful attempt started and which worker ran it).
RESULT_KEY = "django_task"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TenureTask(Task):
    """A Django task with tenure's one extra: ``max_attempts`` (None: the backend's
    ``OPTIONS["MAX_ATTEMPTS"]``, default 1 as in Django)."""

    max_attempts: int | None = None

    def using(self, *, max_attempts: int | None = None, **changes: Any) -> TenureTask:
        """A copy with Django's changes (``priority``, ``queue_name``, ``run_after``, ``backend``)
        and, given, another ``max_attempts``."""
        task = Task.using(self, **changes)
        if max_attempts is not None:
            task = dataclasses.replace(task, max_attempts=max_attempts)
        return task


def task(function: Any = None, *, max_attempts: int | None = None, **options: Any) -> Any:
    """Django's ``@task`` decorator, plus ``max_attempts`` (how many times tenure runs the task
    before it is FAILED; Django's default is once). Its backend must be a ``TenureBackend``."""
    try:
        from django.tasks import task as django_task
    except ImportError:
        from django_tasks import task as django_task

    def wrap(f: Any) -> Any:
        made = django_task(**options)(f)
        if max_attempts is None:
            return made
        if not isinstance(made, TenureTask):
            raise InvalidType(f"max_attempts needs a TenureBackend; task {made.module_path} uses "
                              f"backend {made.backend!r}")
        return made.using(max_attempts=max_attempts)

    return wrap(function) if function is not None else wrap


def enqueue_options(task: Task) -> dict[str, Any]:
    """The enqueue options a Django task carries: each option of the table's ``django`` surface
    read from its attribute (``queue_name``, ``priority``, ``run_after``, ``max_attempts``),
    those that are not set (None) left out (docs/enqueue-options.md)."""
    out: dict[str, Any] = {}
    for name, option in eo.on(eo.DJANGO).items():
        value = getattr(task, option.django or name, None)
        if value is not None:
            out[name] = value
    return out


def _ms_to_dt(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TenureBackend(BaseTaskBackend):
    """``django.tasks`` backend: enqueue into tenure; ``manage.py tenure_worker`` runs the tasks."""

    task_class = TenureTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict) -> None:
        super().__init__(alias, params)
        self.url: str | None = self.options.get("URL")
        #: Django's database alias whose connection is the store (None with OPTIONS["URL"]).
        self.database: str | None = None if self.url else self.options.get("DATABASE", "default")
        raw = self.options.get("MAX_ATTEMPTS", 1)
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
            raise InvalidArgument(f"TASKS[{alias!r}]['OPTIONS']['MAX_ATTEMPTS'] must be a whole number >= 1, "
                                  f"got {raw!r}")
        self.max_attempts: int = raw
        _conn.install_test_database_hook()

    # -- the store, resolved at each call ------------------------------------------------------
    @property
    def store(self) -> tenure.Store:
        """The process's store for this backend's database AS CONFIGURED NOW (the test database
        under ``manage.py test``); shared by every backend instance and thread."""
        return _conn.store_for(self.url or _conn.database_url(self.database))  # type: ignore[arg-type]

    def _outbox_connection(self) -> Any:
        """Django's connection when the caller is inside its ``atomic()`` block on the shared
        database: tenure then writes and reads through it."""
        if self.database is None:
            return None
        django_conn = connections[self.database]
        return django_conn if django_conn.in_atomic_block else None

    # -- enqueue -------------------------------------------------------------------------------
    def validate_task(self, task: Task) -> None:
        super().validate_task(task)
        attempts = getattr(task, "max_attempts", None)
        if attempts is not None and (isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1):
            raise InvalidArgument(f"max_attempts of task {task.module_path} must be a whole number >= 1, "
                                  f"got {attempts!r}")

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        args, kwargs = normalize_json(list(args)), normalize_json(dict(kwargs))
        _check_signature(task, args, kwargs)
        payload = {"args": args, "kwargs": kwargs, "backend": self.alias}
        options = enqueue_options(task)
        options.setdefault("max_attempts", self.max_attempts)
        store = self.store
        conn = self._outbox_connection()
        job_id = store.jobs.enqueue(task.module_path, payload, conn=conn, **options)
        job = store.jobs.get(job_id, conn=conn) if job_id is not None else None
        if job is None:
            raise TaskResultDoesNotExist(job_id)
        result = self._result(task, job)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        try:
            job = self.store.jobs.get(str(result_id), conn=self._outbox_connection())
        except (InvalidArgument, InvalidType):
            raise TaskResultDoesNotExist(result_id) from None
        if job is None or not isinstance(job.payload, dict) or job.payload.get("backend") != self.alias:
            raise TaskResultDoesNotExist(result_id)
        return self._result(_import_task(job.kind), job)

    # -- a job as Django's TaskResult ----------------------------------------------------------
    def _result(self, task: Task, job: Job) -> TaskResult:
        history = [e for e in (job.errors or []) if isinstance(e, dict)]
        envelope = job.result if isinstance(job.result, dict) and RESULT_KEY in job.result else None
        starts: dict[int, int] = {}
        owners: dict[int, str] = {}
        for e in history:
            if isinstance(e.get("attempt"), int) and isinstance(e.get("at"), int):
                starts[e["attempt"]] = e["at"] - int(e.get("duration_ms") or 0)
                owners[e["attempt"]] = str(e.get("owner") or "")
        if envelope is not None:
            meta = envelope[RESULT_KEY]
            starts[job.attempts] = meta.get("started_at") or job.updated_at
            owners[job.attempts] = str(meta.get("worker_id") or "")
        elif job.state == "leased" and job.attempts:
            starts.setdefault(job.attempts, job.updated_at)
            owners.setdefault(job.attempts, job.lease_owner or "")
        first_owner = owners[min(owners)] if owners else ""
        worker_ids = [owners.get(n, first_owner) for n in range(1, job.attempts + 1)]
        errors = [TaskError(exception_class_path=e.get("type") or "builtins.Exception",
                            traceback=e.get("traceback") or str(e.get("message") or ""))
                  for e in history]
        if job.state == "cancelled" and not errors:
            errors.append(TaskError(exception_class_path="tenure.errors.JobCancelled",
                                    traceback=job.last_error or "cancelled"))
        settled = job.state in ("done", "dead", "cancelled")
        result = TaskResult(
            task=task, id=job.id, status=_STATUS[job.state],
            enqueued_at=_ms_to_dt(job.created_at),
            started_at=_ms_to_dt(starts[min(starts)]) if starts else None,
            last_attempted_at=_ms_to_dt(starts[max(starts)]) if starts else None,
            finished_at=_ms_to_dt(job.updated_at) if settled else None,
            args=list(job.payload.get("args", [])), kwargs=dict(job.payload.get("kwargs", {})),
            backend=self.alias, errors=errors, worker_ids=worker_ids,
        )
        if job.state == "done":
            object.__setattr__(result, "_return_value", envelope["value"] if envelope is not None else job.result)
        return result

    # -- worker --------------------------------------------------------------------------------
    def handlers(self, kinds: list[str]) -> dict[str, Any]:
        """``{module_path: handler}`` for the worker: each imports its Task and runs it."""
        return {kind: _handler(kind, self.alias) for kind in kinds}

    def discover_kinds(self, include: Iterable[str] = ()) -> list[str]:
        """Every Task bound to this backend in the installed apps' ``tasks`` modules and in the
        ``include``d modules (which must exist)."""
        import importlib

        from django.apps import apps

        modules = [importlib.import_module(name) for name in include]
        for config in apps.get_app_configs():
            try:
                modules.append(importlib.import_module(f"{config.name}.tasks"))
            except ModuleNotFoundError as exc:
                if exc.name != f"{config.name}.tasks":
                    raise
        kinds = set()
        for module in modules:
            for value in vars(module).values():
                if isinstance(value, Task) and value.backend == self.alias:
                    kinds.add(value.module_path)
        return sorted(kinds)


def _check_signature(task: Task, args: list, kwargs: dict) -> None:
    """A ``TypeError`` naming the task when ``args``/``kwargs`` do not fit its function (the
    context argument of a ``takes_context`` task is supplied by the worker)."""
    try:
        sig = inspect.signature(task.func)
    except (TypeError, ValueError):
        return
    params = list(sig.parameters.values())
    if task.takes_context and params:
        sig = sig.replace(parameters=params[1:])
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"task {task.module_path}: {exc}") from None


def _import_task(path: str) -> Task:
    from django.utils.module_loading import import_string

    found = import_string(path)
    if not isinstance(found, Task):
        raise InvalidType(f"{path} is not a django task")
    return found


def _handler(kind: str, alias: str) -> Any:
    def run(payload: Any, ctx: Any) -> Any:
        from django.db import close_old_connections

        close_old_connections()
        try:
            return _run(kind, alias, payload, ctx)
        finally:
            close_old_connections()

    run.__qualname__ = f"django task {kind}"
    return run


def _run(kind: str, alias: str, payload: Any, ctx: Any) -> Any:
    """One attempt of a Django task: signals, the call, the return value through Django's
    ``normalize_json``. Exceptions propagate to the worker, which records them."""
    backend = task_backends[alias]
    task = _import_task(kind)
    args, kwargs = payload.get("args", []), payload.get("kwargs", {})
    started = _now_ms()
    running = backend._result(task, ctx.job)
    start_dt = _ms_to_dt(started)
    worker_ids = list(running.worker_ids)[: ctx.attempt - 1] + [ctx.lease.owner]
    object.__setattr__(running, "status", TaskResultStatus.RUNNING)
    object.__setattr__(running, "worker_ids", worker_ids)
    object.__setattr__(running, "last_attempted_at", start_dt)
    if running.started_at is None:
        object.__setattr__(running, "started_at", start_dt)
    task_started.send(type(backend), task_result=running)
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=running), *args, **kwargs)
        else:
            value = task.call(*args, **kwargs)
        value = normalize_json(value)
    except BaseException as exc:
        if ctx.attempt >= ctx.job.max_attempts:
            cls = type(exc)
            running.errors.append(TaskError(exception_class_path=f"{cls.__module__}.{cls.__qualname__}",
                                            traceback="".join(traceback.format_exception(exc))))
            object.__setattr__(running, "status", TaskResultStatus.FAILED)
            object.__setattr__(running, "finished_at", _ms_to_dt(_now_ms()))
            _send_finished(backend, running)  # inside the handler: exc_info is this exception
        raise
    object.__setattr__(running, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(running, "finished_at", _ms_to_dt(_now_ms()))
    object.__setattr__(running, "_return_value", value)
    _send_finished(backend, running)
    return {RESULT_KEY: {"started_at": started, "worker_id": ctx.lease.owner}, "value": value}


def _send_finished(backend: Any, result: TaskResult) -> None:
    """``task_finished`` to every receiver; a receiver's error is logged, never the task's."""
    for receiver, response in task_finished.send_robust(type(backend), task_result=result):
        if isinstance(response, Exception) and not isinstance(response, TenureError):
            import logging

            logging.getLogger("tenure.django").error("task_finished receiver %r failed: %r", receiver, response)
