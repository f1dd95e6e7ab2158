"""Tasks of tenure's own Django tests (tenure_semantics.py, durable_differences.py)."""

from __future__ import annotations

from tenure.contrib.django import task
from tenure.contrib.django._compat import TASKS_MODULE

if TASKS_MODULE == "django.tasks":
    from .django6 import tasks as upstream
else:
    from .backport import tasks as upstream

__all__ = ["flaky", "greet", "keep", "plain_failure", "upstream"]


@task(takes_context=True, max_attempts=3)
def flaky(context, fail_until: int) -> int:
    """Fails its first ``fail_until - 1`` attempts, then answers the attempt number."""
    if context.attempt < fail_until:
        raise RuntimeError(f"attempt {context.attempt} fails")
    return context.attempt


@task()
def plain_failure() -> None:
    raise RuntimeError("fails every time")


@task()
def greet(name: str, punctuation: str = "!") -> str:
    return f"hello {name}{punctuation}"


@task(queue_name="elsewhere")
def keep(value):
    return value
