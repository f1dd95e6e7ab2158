"""``store.schedules.run_now`` (the dashboard's "Run now"): the schedule's job, enqueued
now with its kind, payload, queue and options and a fresh id, leaving its boundaries alone. Both
engines."""

from __future__ import annotations


def test_run_now_enqueues_the_schedules_job_and_keeps_its_rhythm(any_store, clock):
    s = any_store.schedules
    s.add("nightly", "0 3 * * *", "reports.build", {"to": "ops"}, queue="reports", key="eu",
          options={"max_attempts": 3, "priority": 7})
    before = s.get("nightly", key="eu")
    first, second = s.run_now("nightly", key="eu"), s.run_now("nightly", key="eu")
    assert first != second  # each click is a job of its own
    job = any_store.jobs.get(first)
    assert (job.kind, job.payload, job.queue, job.max_attempts, job.priority, job.state) == (
        "reports.build", {"to": "ops"}, "reports", 3, 7, "pending")
    assert job.run_at <= clock.now
    after = s.get("nightly", key="eu")
    assert (after.next_fire_at, after.last_fire_at) == (before.next_fire_at, before.last_fire_at)


def test_run_now_of_an_unknown_schedule_answers_none_and_writes_nothing(any_store):
    assert any_store.schedules.run_now("nope") is None
    assert sum(any_store.jobs.counts().values()) == 0
