"""``manage.py tenure_worker``: run a tenure worker over the project's django tasks. Its worker
settings (``--lease``, ``--poll-interval``, ``--stop-grace``, ``--timeout``, ...) are the
``tenure worker`` flags, one per option of :class:`tenure.WorkerConfig`'s table, read by that
table's text form (``10s``, ``250ms``); a bad value is a :class:`CommandError` naming the flag."""

from __future__ import annotations

import signal
import threading
import time

from django.core.management.base import BaseCommand, CommandError

from tenure.errors import TenureError
from tenure.worker.config import WorkerConfig, option_doc, text_options

#: The table's options this command reads through flags of its own (``--concurrency`` keeps its
#: default of 4; ``--queues`` defaults to the backend's QUEUES) or not at all.
_OWN_FLAGS = ("concurrency", "queues", "max_jobs")
#: The worker options taken as ``--flag`` text, in the table's order.
WORKER_FLAGS: tuple[str, ...] = tuple(n for n in text_options() if n not in _OWN_FLAGS)


def worker_config(options: dict) -> WorkerConfig:
    """The :class:`WorkerConfig` of the worker flags given (parsed ``options``; the rest keep the
    table's defaults); a bad value is a :class:`CommandError` naming its flag."""
    for name in WORKER_FLAGS:
        text = options.get(name)
        if text is None:
            continue
        try:
            WorkerConfig.from_text({name: text})
        except TenureError as exc:
            raise CommandError(f"--{name.replace('_', '-')}: {exc.message}") from None
    return WorkerConfig.from_text({n: options[n] for n in WORKER_FLAGS if options.get(n) is not None})


class Command(BaseCommand):
    help = "Run a tenure worker for the project's @task functions (django.tasks)."

    #: Set to stop a worker started with ``call_command`` (off the main thread no signal
    #: handler can be installed; ``--until-idle`` is the other way to end it).
    stop_event: threading.Event | None = None

    def add_arguments(self, parser):
        parser.add_argument("--backend", default="default", help="TASKS alias (default: default)")
        parser.add_argument("--concurrency", type=int, default=4)
        parser.add_argument("--queues", default=None,
                            help="comma-separated queues (default: the backend's QUEUES; [] means any queue)")
        parser.add_argument("--include", action="append", default=[], metavar="MODULE",
                            help="also look for tasks in MODULE (repeatable); each app's tasks module is always searched")
        for name in WORKER_FLAGS:
            unit, doc = option_doc(name)
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None,
                                metavar="DURATION" if unit == "seconds" else unit.upper(),
                                help=f"{doc} ({unit}; as tenure worker --{name.replace('_', '-')})")
        parser.add_argument("--until-idle", action="store_true",
                            help="stop once no job of these tasks is running or due (a job deferred to later does not count); for scripts and tests")

    def handle(self, *args, backend: str, concurrency: int, queues: str | None, until_idle: bool = False,
               include: list[str] | None = None, **options):
        from tenure.contrib.django.management.commands import _tasks_backends

        try:
            b = _tasks_backends()[backend]
        except Exception as exc:
            raise CommandError(f"no TASKS backend {backend!r}: {exc}") from exc
        config = worker_config(options)  # refused before anything starts
        kinds = b.discover_kinds(include or ())
        if not kinds:
            raise CommandError("no django tasks found for this backend (looked in each app's tasks module)")
        queue_list = queues.split(",") if queues else (sorted(b.queues) or None)
        where = ",".join(queue_list) if queue_list else "any queue"
        self.stdout.write(f"tenure worker: {len(kinds)} task(s) on {where}")
        store = b.store
        worker = store.jobs.create_worker(b.handlers(kinds), config, concurrency=concurrency, queues=queue_list)
        stop = self.stop_event or threading.Event()
        restore = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                restore[sig] = signal.signal(sig, lambda *_: stop.set())
        try:
            worker.start()
            self.stdout.write("tenure worker started", ending="\n")
            self.stdout.flush()
            while not stop.wait(0.2):
                if until_idle and _idle(store, kinds, queue_list):
                    break
        finally:
            result = worker.stop()
            for sig, previous in restore.items():
                signal.signal(sig, previous)
        self.stdout.write(f"tenure worker stopped: drained={result.drained} in_flight={result.in_flight}")


def _idle(store, kinds: list[str], queues: list[str] | None) -> bool:
    """No job of ``kinds`` (on ``queues``) is running or due: pending or awaiting a retry whose
    time has come. A job deferred to later (``run_after``, a retry's backoff) does not count."""
    now = time.time() * 1000
    for state in ("leased", "pending", "failed"):
        for kind in kinds:
            after = None
            while True:
                page = store.jobs.page(state=state, kind=kind, after=after, limit=200)
                for job in page.items:
                    if (queues is None or job.queue in queues) and (state == "leased" or job.run_at <= now):
                        return False
                if page.next_after is None:
                    break
                after = page.next_after
    return True
