"""Tasks of the test Django project (module-level, as django.tasks requires)."""

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task(queue_name="default", priority=5)
def add(a: int, b: int) -> int:
    return a + b


@task()
def explode() -> None:
    raise ValueError("kaboom")


@task(backend="pg")
def add_pg(a: int, b: int) -> int:
    return a + b


@task(takes_context=True)
def attempt_no(context) -> int:
    return context.attempt
