"""The one piece of harness the vendored upstream suites get: ``WorkedTenureBackend``.

Django's ImmediateBackend tests expect ``enqueue()`` to answer a finished result. A tenure task
is run by a worker, so this backend is :class:`tenure.contrib.django.TenureBackend` whose
``enqueue`` then starts a REAL tenure worker over the task (the handlers and worker that
``manage.py tenure_worker`` runs: ``backend.handlers`` on ``store.jobs.create_worker``), waits
until the job is settled, stops the worker and answers the refreshed result. Nothing else
differs from the backend users configure. A job that cannot run yet (``run_after`` in the
future, or written inside the caller's still-open ``atomic()`` block) is answered as enqueued.
"""

from __future__ import annotations

import time

from tenure.contrib.django import TenureBackend

SETTLED = ("done", "dead", "cancelled")


class WorkedTenureBackend(TenureBackend):
    def enqueue(self, task, args, kwargs):
        result = super().enqueue(task, args, kwargs)
        if task.run_after is not None or self._outbox_connection() is not None:
            return result
        store = self.store
        worker = store.jobs.create_worker(self.handlers([task.module_path]), concurrency=1)
        worker.start()
        try:
            deadline = time.monotonic() + 60
            while store.jobs.get(result.id).state not in SETTLED:
                if time.monotonic() > deadline:
                    raise AssertionError(f"the worker did not settle {result.id} within 60 s")
                time.sleep(0.01)
        finally:
            worker.stop()
        result.refresh()
        return result
