from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class TenureConfig(AppConfig):
    name = "tenure.contrib.django"
    label = "tenure"
    verbose_name = "tenure job queue"

    def ready(self) -> None:
        # Not sender=self: Django sends post_migrate only for apps with a models module, and this
        # app has none. It comes once per migrated app; opening an open store costs nothing.
        post_migrate.connect(create_tenure_tables, dispatch_uid="tenure.create_tables")


def create_tenure_tables(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """After ``manage.py migrate`` (and the test runner's migrate of each test database), open the
    store of every TenureBackend that shares the migrated database: tenure's own tables are
    created or migrated then, not inside the first ``atomic()`` block that enqueues (where, on
    SQLite, Django's connection may already hold the write lock they need)."""
    from django.conf import settings

    from tenure.contrib.django._compat import task_backends
    from tenure.contrib.django.backend import TenureBackend

    for alias in getattr(settings, "TASKS", {}) or {}:
        try:
            backend = task_backends[alias]
        except Exception:  # noqa: BLE001 - a broken TASKS entry is Django's to report, not migrate's
            continue
        if isinstance(backend, TenureBackend) and backend.database == using:
            backend.store.jobs  # noqa: B018 - opening the store creates or migrates its tables
