"""``manage.py tenure_worker``: run a tenure worker over the project's django tasks."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Run a tenure worker for the project's @task functions (django.tasks)."

    def add_arguments(self, parser):
        parser.add_argument("--backend", default="default", help="TASKS alias (default: default)")
        parser.add_argument("--concurrency", type=int, default=4)
        parser.add_argument("--queues", default=None, help="comma-separated queues (default: the backend's)")

    def handle(self, *args, backend: str, concurrency: int, queues: str | None, **options):
        from tenure.contrib.django.management.commands import _tasks_backends

        try:
            b = _tasks_backends()[backend]
        except Exception as exc:
            raise CommandError(f"no TASKS backend {backend!r}: {exc}") from exc
        kinds = b.discover_kinds()
        if not kinds:
            raise CommandError("no django tasks found for this backend (looked in each app's tasks module)")
        import signal
        import threading

        queue_list = queues.split(",") if queues else sorted(b.queues)
        self.stdout.write(f"tenure worker: {len(kinds)} task(s) on queues {','.join(queue_list)}")
        worker = b.store.jobs.create_worker(b.handlers(kinds), concurrency=concurrency, queues=queue_list)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        worker.start()
        self.stdout.write("tenure worker started", ending="\n")
        self.stdout.flush()
        while not stop.wait(0.2):
            pass
        result = worker.stop()
        self.stdout.write(f"tenure worker stopped: drained={result.drained} in_flight={result.in_flight}")
