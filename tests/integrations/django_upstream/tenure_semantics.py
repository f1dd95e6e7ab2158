"""TenureBackend's Django semantics beyond the upstream suites, under Django's test
runner on both suites and both engines: the test database, signals, attempts and timestamps,
argument checks, max_attempts, one shared store, ``tenure_worker`` through ``call_command``."""

from __future__ import annotations

import io
import threading
import time

from django.core.management import call_command
from django.db import connections
from django.test import TestCase, TransactionTestCase, override_settings

from tenure.contrib.django import TenureBackend, connection
from tenure.contrib.django._compat import (
    TaskResultStatus,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)

from . import tenure_tasks
from .tenure_tasks import upstream

WORKED = {"default": {"BACKEND": "tests.integrations.django_upstream.worked.WorkedTenureBackend", "QUEUES": []}}
PLAIN = {"default": {"BACKEND": "tenure.contrib.django.TenureBackend", "QUEUES": []}}


class TestDatabaseTestCase(TestCase):
    """Inside a TestCase (one atomic block per test), an enqueue goes through Django's connection
    to the TEST database and vanishes with the test."""

    @override_settings(TASKS=PLAIN)
    def test_enqueue_lands_in_the_test_database_and_is_readable_in_the_block(self):
        backend = task_backends["default"]
        name = connections["default"].settings_dict["NAME"]
        self.assertTrue(name.startswith("test_") or name.endswith(".test"), name)
        url = connection.database_url("default")
        self.assertIn(name.rsplit("/", 1)[-1], url)
        result = upstream.calculate_meaning_of_life.enqueue()
        self.assertEqual(backend.get_result(result.id).status, TaskResultStatus.READY)
        with connections["default"].cursor() as c:
            c.execute("SELECT count(*) FROM tenure_jobs WHERE id = %s", [result.id])
            self.assertEqual(c.fetchone()[0], 1)


@override_settings(TASKS=WORKED)
class SemanticsTestCase(TransactionTestCase):
    available_apps = ["tenure.contrib.django"]  # its management command: tenure_worker

    def test_signals_reach_receivers_in_order(self):
        seen: list[tuple[str, str, str]] = []

        def receiver(name):
            def on(sender, task_result, **kwargs):
                seen.append((name, task_result.id, str(task_result.status)))
            return on

        receivers = [(task_enqueued, receiver("enqueued")), (task_started, receiver("started")),
                     (task_finished, receiver("finished"))]
        for signal, fn in receivers:
            signal.connect(fn, weak=False)
        try:
            ok = upstream.calculate_meaning_of_life.enqueue()
            bad = upstream.failing_task_value_error.enqueue()
        finally:
            for signal, fn in receivers:
                signal.disconnect(fn)
        self.assertEqual(seen, [("enqueued", ok.id, "READY"), ("started", ok.id, "RUNNING"),
                                ("finished", ok.id, "SUCCESSFUL"), ("enqueued", bad.id, "READY"),
                                ("started", bad.id, "RUNNING"), ("finished", bad.id, "FAILED")])

    def test_a_django_task_fails_once_by_default(self):
        result = tenure_tasks.plain_failure.enqueue()
        self.assertEqual(result.status, TaskResultStatus.FAILED)
        self.assertEqual(result.attempts, 1)
        self.assertEqual(len(result.errors), 1)
        self.assertEqual(result.errors[0].exception_class, RuntimeError)
        self.assertEqual(task_backends["default"].store.jobs.get(result.id).max_attempts, 1)

    def test_max_attempts_per_task_attempts_and_timestamps(self):
        result = tenure_tasks.flaky.enqueue(3)
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        self.assertEqual(result.return_value, 3)
        self.assertEqual(result.attempts, 3)
        self.assertEqual(len(result.worker_ids), 3)
        self.assertEqual([e.exception_class for e in result.errors], [RuntimeError, RuntimeError])
        self.assertLessEqual(result.enqueued_at, result.started_at)
        self.assertLess(result.started_at, result.last_attempted_at)
        self.assertLessEqual(result.last_attempted_at, result.finished_at)
        # using(max_attempts=...) overrides it; one attempt is then all it gets
        once = tenure_tasks.flaky.using(max_attempts=1).enqueue(3)
        self.assertEqual((once.status, once.attempts), (TaskResultStatus.FAILED, 1))

    @override_settings(TASKS={"default": {**WORKED["default"], "OPTIONS": {"MAX_ATTEMPTS": 2}}})
    def test_backend_max_attempts_option(self):
        result = tenure_tasks.plain_failure.enqueue()
        self.assertEqual((result.status, result.attempts, len(result.errors)), (TaskResultStatus.FAILED, 2, 2))

    def test_arguments_are_checked_the_django_way_and_against_the_signature(self):
        store = task_backends["default"].store
        before = store.jobs.counts()
        with self.assertRaisesMessage(TypeError, "Unsupported type"):
            tenure_tasks.greet.enqueue(object())
        with self.assertRaisesMessage(TypeError, "tenure_tasks.greet"):
            tenure_tasks.greet.enqueue("ada", too="x")
        with self.assertRaisesMessage(TypeError, "tenure_tasks.greet"):
            tenure_tasks.greet.enqueue()
        self.assertEqual(store.jobs.counts(), before)  # nothing written
        result = tenure_tasks.greet.enqueue(b"ada", punctuation=b"?")  # bytes, as Django: UTF-8 text
        self.assertEqual(result.args, ["ada"])
        self.assertEqual(result.return_value, "hello ada?")

    def test_one_store_per_process_across_threads_and_backend_instances(self):
        stores = []

        def use():
            backend = TenureBackend("default", {"QUEUES": []})
            stores.append(backend.store)
            connections.close_all()

        threads = [threading.Thread(target=use) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stores.append(task_backends["default"].store)
        self.assertEqual(len({id(s) for s in stores}), 1)
        self.assertEqual(connection.open_stores(), 1)

    @override_settings(TASKS=PLAIN)
    def test_tenure_worker_through_call_command_off_the_main_thread_on_any_queue(self):
        first = tenure_tasks.keep.enqueue(1)          # queue "elsewhere": QUEUES [] means any queue
        second = upstream.calculate_meaning_of_life.enqueue()
        out, errors = io.StringIO(), []

        def run():
            try:
                call_command("tenure_worker", "--until-idle", "--concurrency", "2", "--include", tenure_tasks.__name__,
                             "--include", upstream.__name__, stdout=out)
            except BaseException as exc:  # noqa: BLE001 - reported to the test thread
                errors.append(exc)
            finally:
                connections.close_all()

        thread = threading.Thread(target=run)
        thread.start()
        thread.join(120)
        self.assertFalse(thread.is_alive(), out.getvalue())
        self.assertEqual(errors, [])
        self.assertIn("any queue", out.getvalue())
        self.assertIn("tenure worker stopped", out.getvalue())
        backend = task_backends["default"]
        self.assertEqual(backend.get_result(first.id).return_value, 1)
        self.assertEqual(backend.get_result(second.id).return_value, 42)
        _ = time  # the worker is awaited through --until-idle, never by sleeping here
