def _tasks_backends():
    from tenure.contrib.django._compat import task_backends

    return task_backends
