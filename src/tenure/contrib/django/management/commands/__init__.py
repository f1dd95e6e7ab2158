def _tasks_backends():
    try:
        from django.tasks import task_backends
    except ImportError:
        from django_tasks import task_backends
    return task_backends
