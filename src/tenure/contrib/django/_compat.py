"""One place that imports ``django.tasks`` (Django 6+) or, on Django 4.2/5.x, the ``django_tasks``
backport: the rest of the integration imports its names from here."""

from __future__ import annotations

try:  # Django 6+
    from django.tasks import TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskContext, TaskError, TaskResult
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    TASKS_MODULE = "django.tasks"
except ImportError:  # the backport
    from django_tasks import TaskResultStatus, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskContext, TaskError, TaskResult
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

    TASKS_MODULE = "django_tasks"

__all__ = [
    "TASKS_MODULE", "BaseTaskBackend", "Task", "TaskContext", "TaskError", "TaskResult",
    "TaskResultDoesNotExist", "TaskResultStatus", "normalize_json", "task_backends", "task_enqueued",
    "task_finished", "task_started",
]
