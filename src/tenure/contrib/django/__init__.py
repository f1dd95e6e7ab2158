"""A ``django.tasks`` backend backed by tenure, with a real durable worker.

```python
# settings.py
INSTALLED_APPS = [..., "tenure.contrib.django"]
TASKS = {
    "default": {
        "BACKEND": "tenure.contrib.django.TenureBackend",
        "QUEUES": ["default", "emails"],      # [] : any queue
        "OPTIONS": {"DATABASE": "default"},   # the default: share Django's database
        # or: "OPTIONS": {"URL": "postgresql://user@host/db"}
        # "MAX_ATTEMPTS": 1 (Django's semantics: a task runs once) unless set here or per task
    }
}
```
Then ``python manage.py tenure_worker --concurrency 8``. On the shared database the store is
resolved at each call from Django's own connection (the test database under ``manage.py
test``), and an enqueue inside ``transaction.atomic()`` goes through Django's connection, so the
job commits and rolls back with the block (the transactional outbox). See
:mod:`tenure.contrib.django.backend` for what the backend promises and docs/integrations.md.

Works with Django 6's ``django.tasks`` and with the ``django_tasks`` backport on Django 4.2/5.x.
"""

from __future__ import annotations

from .backend import RESULT_KEY, TenureBackend, TenureTask, task
from .connection import close_stores, database_url

__all__ = ["RESULT_KEY", "TenureBackend", "TenureTask", "close_stores", "database_url", "task"]
