"""Where a durable worker legitimately differs from Django's ImmediateBackend: each upstream test
skipped in django6/ and backport/ (README.md, "Where a durable worker differs") is replaced here
by a test of what TenureBackend does instead. Runs under Django's test runner, on both suites."""

from __future__ import annotations

import json
from datetime import timedelta

from django.db import transaction
from django.test import TransactionTestCase, override_settings
from django.utils import timezone

from tenure.contrib.django._compat import (
    TASKS_MODULE,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
)

from .tenure_tasks import upstream

WORKED = {"default": {"BACKEND": "tests.integrations.django_upstream.worked.WorkedTenureBackend", "QUEUES": []}}


@override_settings(TASKS=WORKED)
class DurableDifferencesTestCase(TransactionTestCase):
    available_apps: list[str] = []

    def test_keyboard_interrupt_is_recorded_as_the_tasks_failure(self):
        """(test_throws_keyboard_interrupt) the worker records it; the enqueuer is not interrupted."""
        result = upstream.failing_task_keyboard_interrupt.enqueue()
        self.assertEqual(result.status, TaskResultStatus.FAILED)
        self.assertEqual(result.attempts, 1)
        self.assertEqual(result.errors[0].exception_class, KeyboardInterrupt)
        self.assertIn("raise KeyboardInterrupt(", result.errors[0].traceback)
        self.assertTrue(result.errors[0].traceback.rstrip().splitlines()[-1].startswith("KeyboardInterrupt: "))

    def test_results_can_be_read_and_refreshed(self):
        """(test_cannot_get_result, test_cannot_refresh_result) results live in the store."""
        result = upstream.calculate_meaning_of_life.enqueue()
        again = task_backends["default"].get_result(result.id)
        self.assertEqual((again.id, again.status, again.return_value), (result.id, TaskResultStatus.SUCCESSFUL, 42))
        self.assertEqual(again.enqueued_at, result.enqueued_at)
        result.refresh()
        self.assertEqual(result.return_value, 42)
        with self.assertRaises(TaskResultDoesNotExist):
            task_backends["default"].get_result("123")

    def test_run_after_defers_the_job(self):
        """(test_cannot_pass_run_after) run_after is supported: the job waits for its time."""
        when = timezone.now() + timedelta(hours=1)
        result = upstream.calculate_meaning_of_life.using(run_after=when).enqueue()
        self.assertEqual(result.status, TaskResultStatus.READY)
        job = task_backends["default"].store.jobs.get(result.id)
        self.assertEqual(job.state, "pending")
        self.assertEqual(job.run_at, int(when.timestamp() * 1000))

    def test_a_job_enqueued_in_atomic_exists_and_runs_only_after_the_commit(self):
        """(test_doesnt_wait_until_transaction_commit_by_default) the outbox: inside the block the
        job is READY and readable through Django's connection; a rollback removes it."""
        backend = task_backends["default"]
        with transaction.atomic():
            result = upstream.calculate_meaning_of_life.enqueue()
            self.assertEqual(result.status, TaskResultStatus.READY)
            self.assertEqual(backend.get_result(result.id).status, TaskResultStatus.READY)
            self.assertIsNone(backend.store.jobs.get(result.id))  # not committed: invisible outside
        self.assertEqual(backend.store.jobs.get(result.id).state, "pending")
        with self.assertRaises(RuntimeError):
            with transaction.atomic():
                gone = upstream.calculate_meaning_of_life.enqueue()
                raise RuntimeError("roll back")
        self.assertIsNone(backend.store.jobs.get(gone.id))
        # committed: a worker runs it
        ran = upstream.calculate_meaning_of_life.enqueue()
        self.assertEqual(ran.status, TaskResultStatus.SUCCESSFUL)

    def test_the_result_view_answers_the_result(self):
        """(backport: test_get_result_from_different_request) the view reads the stored result."""
        if TASKS_MODULE != "django_tasks":
            self.skipTest("the backport's views: Django 6's suite has none")
        from django.urls import reverse

        data = json.loads(self.client.get(reverse("meaning-of-life")).content)
        self.assertEqual(data["status"], "SUCCESSFUL")
        again = json.loads(self.client.get(reverse("result", args=[data["result_id"]])).content)
        self.assertEqual((again["result_id"], again["result"], again["status"]), (data["result_id"], 42, "SUCCESSFUL"))
