"""A ``django.tasks`` backend backed by tenure, with a real durable worker.

```python
# settings.py
INSTALLED_APPS = [..., "tenure.contrib.django"]
TASKS = {
    "default": {
        "BACKEND": "tenure.contrib.django.TenureBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"DATABASE": "default"},   # share Django's database (SQLite file or PostgreSQL)
        # or: "OPTIONS": {"URL": "postgresql://user@host/db"}
    }
}
```
Then ``python manage.py tenure_worker --concurrency 8``. On a shared database, an enqueue inside
``transaction.atomic()`` goes through Django's own connection, so the job commits and rolls back
with the block (the transactional outbox).

Works with Django 6's ``django.tasks`` and with the ``django_tasks`` backport on Django 4.2/5.x.
"""

from __future__ import annotations

import importlib
import threading
import traceback
from typing import Any

try:  # Django 6+
    from django.tasks import TaskResultStatus
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskError, TaskResult
    from django.tasks.exceptions import TaskResultDoesNotExist
    _TASKS_MODULE = "django.tasks"
except ImportError:  # the backport
    from django_tasks import TaskResultStatus
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError, TaskResult
    from django_tasks.exceptions import TaskResultDoesNotExist
    _TASKS_MODULE = "django_tasks"

from django.db import connections
from django.utils import timezone

import tenure
from tenure.records import Job

default_app_config = "tenure.contrib.django.apps.TenureConfig"

_STATUS = {
    "pending": TaskResultStatus.READY,
    "failed": TaskResultStatus.READY,  # awaiting its retry
    "leased": TaskResultStatus.RUNNING,
    "done": TaskResultStatus.SUCCESSFUL,
    "dead": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}


def _database_url(alias: str) -> str:
    """A tenure URL for one of Django's databases (SQLite file or PostgreSQL)."""
    db = connections.databases[alias]
    engine = db["ENGINE"]
    if engine.endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    if engine.endswith("postgresql"):
        from urllib.parse import quote

        auth = quote(db.get("USER") or "")
        if db.get("PASSWORD"):
            auth += ":" + quote(db["PASSWORD"])
        host = db.get("HOST") or "localhost"
        port = f":{db['PORT']}" if db.get("PORT") else ""
        return f"postgresql://{auth}{'@' if auth else ''}{host}{port}/{db['NAME']}"
    raise tenure.errors.InvalidURL(f"tenure cannot share Django database {alias!r} ({engine})")


class TenureFailure(Exception):
    """Carries a failed task's exception class path and traceback into ``last_error``."""


class TenureBackend(BaseTaskBackend):
    """``django.tasks`` backend: enqueue into tenure; ``manage.py tenure_worker`` runs the tasks."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict) -> None:
        super().__init__(alias, params)
        self.database = self.options.get("DATABASE")
        self.url = self.options.get("URL") or (_database_url(self.database) if self.database else None)
        self._store: tenure.Store | None = None
        self._lock = threading.Lock()

    @property
    def store(self) -> tenure.Store:
        with self._lock:
            if self._store is None:
                self._store = tenure.connect(self.url)
            return self._store

    # -- enqueue -------------------------------------------------------------------------------
    def enqueue(self, task: Task, args, kwargs) -> TaskResult:
        self.validate_task(task)
        payload = {"args": list(args), "kwargs": dict(kwargs), "backend": self.alias}
        options: dict[str, Any] = {"queue": task.queue_name, "priority": task.priority}
        if task.run_after is not None:
            options["run_at"] = task.run_after
        conn = None
        if self.database is not None:
            django_conn = connections[self.database]
            if django_conn.in_atomic_block:
                conn = django_conn  # the outbox: commit and roll back with transaction.atomic()
        job_id = self.store.jobs.enqueue(task.module_path, payload, conn=conn, **options)
        # job_id is None only when the job it collided with was swept in between (queues.insert);
        # get() then refuses it (InvalidType), as it always has.
        job = self.store.jobs.get(job_id) if conn is None else None  # type: ignore[arg-type]
        return self._result(task, job, job_id, args, kwargs)

    def get_result(self, result_id: str) -> TaskResult:
        job = self.store.jobs.get(result_id)
        if job is None or not isinstance(job.payload, dict) or job.payload.get("backend") != self.alias:
            raise TaskResultDoesNotExist(result_id)
        task = _import_task(job.kind)
        return self._result(task, job, job.id, job.payload.get("args", []), job.payload.get("kwargs", {}))

    def _result(self, task: Task, job: Job | None, job_id: str | None, args, kwargs) -> TaskResult:
        def ts(ms: int | None):
            if ms is None:
                return None
            return timezone.datetime.fromtimestamp(ms / 1000, tz=timezone.get_fixed_timezone(0))

        state = job.state if job is not None else "pending"
        errors = []
        if job is not None and job.last_error and state in ("dead", "cancelled", "failed"):
            head, _, tb = job.last_error.partition("\n")
            path = head.split(":", 1)[0] if ":" in head and "." in head.split(":", 1)[0] else "builtins.Exception"
            errors.append(TaskError(exception_class_path=path, traceback=tb or job.last_error))
        result = TaskResult(
            task=task, id=job_id, status=_STATUS[state],
            enqueued_at=ts(job.created_at) if job else timezone.now(),
            started_at=ts(job.updated_at) if job and job.attempts else None,
            finished_at=ts(job.updated_at) if job and state in ("done", "dead", "cancelled") else None,
            last_attempted_at=ts(job.updated_at) if job and job.attempts else None,
            args=list(args), kwargs=dict(kwargs), backend=self.alias, errors=errors,
            worker_ids=[job.lease_owner] if job and job.lease_owner else [],
        )
        if job is not None and state == "done":
            object.__setattr__(result, "_return_value", job.result)
        return result

    # -- worker --------------------------------------------------------------------------------
    def handlers(self, kinds: list[str]) -> dict[str, Any]:
        """``{module_path: handler}`` for the worker: each imports its Task and calls it."""
        return {kind: _handler(kind, self.alias) for kind in kinds}

    def discover_kinds(self) -> list[str]:
        """Every Task bound to this backend in the installed apps' ``tasks`` modules."""
        from django.apps import apps

        kinds = set()
        for config in apps.get_app_configs():
            try:
                module = importlib.import_module(f"{config.name}.tasks")
            except ModuleNotFoundError as exc:
                if exc.name != f"{config.name}.tasks":
                    raise
                continue
            for value in vars(module).values():
                if isinstance(value, Task) and value.backend == self.alias:
                    kinds.add(value.module_path)
        return sorted(kinds)


def _import_task(path: str) -> Task:
    from django.utils.module_loading import import_string

    task = import_string(path)
    if not isinstance(task, Task):
        raise tenure.errors.InvalidType(f"{path} is not a django task")
    return task


def _handler(kind: str, alias: str):
    def run(payload: Any, ctx: Any) -> Any:
        from django.db import close_old_connections

        task = _import_task(kind)
        args, kwargs = payload.get("args", []), payload.get("kwargs", {})
        close_old_connections()
        try:
            if task.takes_context:
                if _TASKS_MODULE == "django.tasks":
                    from django.tasks.base import TaskContext
                else:
                    from django_tasks.base import TaskContext
                backend = _backend(alias)
                context = TaskContext(task_result=backend.get_result(ctx.job.id))
                return task.call(context, *args, **kwargs)
            return task.call(*args, **kwargs)
        except Exception as exc:
            cls = type(exc)
            raise TenureFailure(f"{cls.__module__}.{cls.__qualname__}: {exc}\n{traceback.format_exc()}") from exc
        finally:
            close_old_connections()

    return run


def _backend(alias: str) -> TenureBackend:
    if _TASKS_MODULE == "django.tasks":
        from django.tasks import task_backends
    else:
        from django_tasks import task_backends
    return task_backends[alias]
