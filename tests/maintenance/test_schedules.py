"""store.schedules: the registry, firing by the store's clock, DST days, catch-up, options.

Every test runs on SQLite and PostgreSQL with an injected clock: boundaries are reached by moving
the clock, and ``fire_due()`` is the pass the maintenance service runs about once a second.
"""

from __future__ import annotations

import datetime as dt

import pytest

import tenure
from tenure.errors import InvalidArgument, InvalidSchedule
from tenure.schedules import Schedule, fire_job_id, fire_time

from .conftest import at, fired, step, wall

MIN, HOUR = 60_000, 3_600_000


def hour_start(clock) -> int:
    return clock.now - clock.now % HOUR


# -- the registry -----------------------------------------------------------------------------------


def test_add_stores_the_schedule_and_plans_its_first_fire(store, clock):
    s = store.schedules.add("report", "*/5 * * * *", "reports.build", {"to": "ops"}, tz="Europe/Paris",
                            queue="reports", options={"max_attempts": 3, "priority": 7})
    assert isinstance(s, Schedule)
    assert (s.name, s.key, s.cron, s.tz, s.kind, s.payload, s.queue) == (
        "report", "", "*/5 * * * *", "Europe/Paris", "reports.build", {"to": "ops"}, "reports")
    assert s.options == {"max_attempts": 3, "priority": 7} and s.catch_up == "latest"
    assert s.last_fire_at is None
    assert s.next_fire_at == clock.now - clock.now % 300_000 + 300_000
    assert s.created_at == s.updated_at == clock.now
    assert store.schedules.get("report") == s
    assert store.schedules.list() == [s]


def test_re_adding_an_identical_schedule_changes_nothing(store, other, clock):
    first = store.schedules.add("r", "0 * * * *", "k", {"a": 1})
    clock.advance(10 * MIN)
    again = other.schedules.add("r", "0 * * * *", "k", {"a": 1})
    assert again == first  # no write: updated_at and next_fire_at kept


def test_changing_the_expression_replans_and_keeps_last_fire(store, clock):
    store.schedules.add("r", "0 * * * *", "k")
    clock.set(hour_start(clock) + HOUR + 1)
    assert store.schedules.fire_due() == 1
    fired_at = store.schedules.get("r").last_fire_at
    clock.advance(MIN)
    changed = store.schedules.add("r", "*/15 * * * *", "k2", {"b": 2})
    assert changed.last_fire_at == fired_at
    assert changed.next_fire_at == hour_start(clock) + 15 * MIN
    assert (changed.kind, changed.payload, changed.updated_at) == ("k2", {"b": 2}, clock.now)
    # A change of payload only keeps the plan.
    clock.advance(MIN)
    assert store.schedules.add("r", "*/15 * * * *", "k2", {"b": 3}).next_fire_at == changed.next_fire_at


def test_keys_make_separate_schedules_under_one_name(store, clock):
    store.schedules.add("tenant", "0 * * * *", "k", {"t": 1}, key="acme")
    store.schedules.add("tenant", "0 * * * *", "k", {"t": 2}, key="globex")
    store.schedules.add("other", "0 * * * *", "k")
    assert [(s.name, s.key) for s in store.schedules.list()] == [("other", ""), ("tenant", "acme"),
                                                                   ("tenant", "globex")]
    assert [s.key for s in store.schedules.list(name="tenant")] == ["acme", "globex"]
    assert store.schedules.get("tenant") is None and store.schedules.get("tenant", key="acme").payload == {"t": 1}
    clock.set(hour_start(clock) + HOUR)
    assert store.schedules.fire_due() == 3
    ids = sorted(i for i, _ in fired(store))
    assert ids == sorted([f"cron:other:{clock.now}", f"cron:tenant#acme:{clock.now}",
                          f"cron:tenant#globex:{clock.now}"])
    assert store.jobs.get(f"cron:tenant#globex:{clock.now}").payload == {"t": 2}


def test_remove_stops_the_schedule_and_keeps_its_jobs(store, clock):
    store.schedules.add("r", "* * * * *", "k")
    clock.advance(MIN)
    assert store.schedules.fire_due() == 1
    assert store.schedules.remove("r") is True
    assert store.schedules.remove("r") is False
    assert store.schedules.get("r") is None
    clock.advance(10 * MIN)
    assert store.schedules.fire_due() == 0
    assert len(fired(store)) == 1


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"cron": "61 * * * *"}, "minute"),
    ({"cron": "* * 32 * *"}, "day-of-month"),
    ({"cron": "@fortnightly"}, "cron"),
    ({"tz": "Europe/Atlantis"}, "tz"),
    ({"catch_up": "some"}, "catch_up"),
    ({"options": {"id": "x"}}, "options.id"),
    ({"options": {"run_at": 5}}, "options.run_at"),
    ({"options": ["max_attempts"]}, "options"),
])
def test_add_refuses_what_could_never_fire_and_writes_nothing(store, kwargs, field):
    args = {"name": "bad", "cron": "* * * * *", "kind": "k", **kwargs}
    with pytest.raises(InvalidSchedule) as info:
        store.schedules.add(args.pop("name"), args.pop("cron"), args.pop("kind"), **args)
    assert info.value.code == "TN4001" and info.value.details["field"] == field
    assert field.split(".")[-1] in str(info.value)
    assert store.schedules.list() == []


def test_add_validates_the_enqueue_now(store):
    with pytest.raises(tenure.errors.TenureError):
        store.schedules.add("bad", "* * * * *", "k", options={"max_attempts": 0})
    with pytest.raises(tenure.errors.TenureError):
        store.schedules.add("bad", "* * * * *", "k", options={"no_such_option": 1})
    with pytest.raises(tenure.errors.TenureError):
        store.schedules.add("bad", "* * * * *", "k", {"x": float("nan")})
    with pytest.raises(InvalidArgument):
        store.schedules.add("bad name", "* * * * *", "k")
    assert store.schedules.list() == []


# -- firing -------------------------------------------------------------------------------------------


def test_a_boundary_fires_one_job_with_a_deterministic_id(store, clock):
    s = store.schedules.add("tick", "*/5 * * * *", "tick.run", {"n": 1}, queue="q1",
                            options={"max_attempts": 2, "priority": 3, "timeout": 30})
    clock.set(s.next_fire_at - 1)
    assert store.schedules.fire_due() == 0
    clock.set(s.next_fire_at)
    assert store.schedules.fire_due() == 1
    assert store.schedules.fire_due() == 0  # nothing more is due
    job = store.jobs.get(fire_job_id("tick", "", s.next_fire_at))
    assert job.id == f"cron:tick:{s.next_fire_at}" and fire_time(job.id) == s.next_fire_at
    assert (job.kind, job.payload, job.queue, job.run_at) == ("tick.run", {"n": 1}, "q1", s.next_fire_at)
    assert (job.max_attempts, job.priority, job.timeout_ms, job.state) == (2, 3, 30_000, "pending")
    after = store.schedules.get("tick")
    assert after.last_fire_at == s.next_fire_at and after.next_fire_at == s.next_fire_at + 300_000
    assert fire_time("not-a-cron-job") is None


def test_a_fired_job_is_claimable_and_runs_at_its_boundary(store, clock):
    s = store.schedules.add("tick", "* * * * *", "k")
    clock.set(s.next_fire_at + 5_000)  # five seconds late
    store.schedules.fire_due()
    claim = store.jobs.claim("k", owner="w")
    assert claim is not None and claim.job.run_at == s.next_fire_at


def test_every_boundary_fires_once_while_running(store, clock):
    store.schedules.add("m", "* * * * *", "k")
    start = clock.now
    assert step(store, clock, start + 30 * MIN, 20_000) == 30
    run_ats = [r for _, r in fired(store)]
    assert len(run_ats) == len(set(run_ats)) == 30
    assert all(b - a == MIN for a, b in zip(run_ats, run_ats[1:], strict=False))


def test_two_stores_firing_the_same_boundary_make_one_job(store, other, clock):
    s = store.schedules.add("r", "* * * * *", "k")
    clock.set(s.next_fire_at)
    assert store.schedules.fire_due() + other.schedules.fire_due() == 1
    assert len(fired(store)) == 1


def test_the_job_id_deduplicates_even_if_the_schedule_is_reset(store, clock):
    """Second guard: a schedule re-created (plan reset) cannot enqueue a boundary twice."""
    s = store.schedules.add("r", "0 * * * *", "k")
    clock.set(s.next_fire_at)
    assert store.schedules.fire_due() == 1
    store.schedules.remove("r")
    clock.advance(-1)  # re-added just before the boundary it already fired: plans the same one
    assert store.schedules.add("r", "0 * * * *", "k").next_fire_at == s.next_fire_at
    clock.advance(1)
    store.schedules.fire_due()
    assert [i for i, _ in fired(store)] == [f"cron:r:{s.next_fire_at}"]


# -- catch-up after downtime ---------------------------------------------------------------------------


def test_catch_up_latest_fires_the_most_recent_missed_boundary_once(store, clock):
    store.schedules.add("r", "0 * * * *", "k")
    h0 = hour_start(clock)
    clock.set(h0 + 5 * HOUR + 30 * MIN)  # down for five boundaries
    assert store.schedules.fire_due() == 1
    assert [r for _, r in fired(store)] == [h0 + 5 * HOUR]
    assert store.schedules.get("r").next_fire_at == h0 + 6 * HOUR


def test_catch_up_all_fires_every_missed_boundary(store, clock):
    store.schedules.add("r", "0 * * * *", "k", catch_up="all")
    h0 = hour_start(clock)
    clock.set(h0 + 5 * HOUR + 30 * MIN)
    assert store.schedules.fire_due() == 5
    assert [r for _, r in fired(store)] == [h0 + i * HOUR for i in range(1, 6)]
    assert store.schedules.get("r").next_fire_at == h0 + 6 * HOUR


def test_catch_up_all_is_batched_per_pass(store, clock):
    from tenure.schedules import FIRE_BATCH

    store.schedules.add("r", "* * * * *", "k", catch_up="all")
    clock.advance((FIRE_BATCH + 100) * MIN)
    assert store.schedules.fire_due() == FIRE_BATCH
    assert store.schedules.fire_due() == 100
    assert store.schedules.fire_due() == 0
    assert len(fired(store)) == FIRE_BATCH + 100


def test_catch_up_none_skips_late_boundaries_and_fires_on_time_ones(store, clock):
    store.schedules.add("r", "0 * * * *", "k", catch_up="none")
    h0 = hour_start(clock)
    clock.set(h0 + 5 * HOUR + 30 * MIN)
    assert store.schedules.fire_due() == 0
    assert store.schedules.get("r").next_fire_at == h0 + 6 * HOUR
    clock.set(h0 + 6 * HOUR + 30_000)  # 30 s late: within the misfire grace
    assert store.schedules.fire_due() == 1
    clock.set(h0 + 7 * HOUR + 61_000)  # 61 s late: missed
    assert store.schedules.fire_due() == 0
    assert [r for _, r in fired(store)] == [h0 + 6 * HOUR]


# -- DST days through the store (Europe/Paris) -------------------------------------------------------------


def test_spring_forward_day_a_0230_daily_job_fires_once(store, clock):
    clock.set(at(2026, 3, 28, 12))
    store.schedules.add("nightly", "30 2 * * *", "k", tz="Europe/Paris")
    step(store, clock, at(2026, 3, 30, 12), 20 * MIN)
    assert [wall(r) for _, r in fired(store)] == ["2026-03-29T03:00+02:00", "2026-03-30T02:30+02:00"]


def test_fall_back_day_0130_and_0230_daily_jobs_fire_once(store, clock):
    clock.set(at(2026, 10, 24, 12))
    store.schedules.add("a0130", "30 1 * * *", "k", tz="Europe/Paris")
    store.schedules.add("a0230", "30 2 * * *", "k", tz="Europe/Paris")
    step(store, clock, at(2026, 10, 26, 12), 20 * MIN)
    assert [wall(r) for _, r in fired(store, "a0130")] == ["2026-10-25T01:30+02:00", "2026-10-26T01:30+01:00"]
    assert [wall(r) for _, r in fired(store, "a0230")] == ["2026-10-25T02:30+02:00", "2026-10-26T02:30+01:00"]


def test_hourly_job_fires_23_and_25_times_on_the_dst_days(store, clock):
    clock.set(at(2026, 3, 29, 0) - 1)
    store.schedules.add("h", "0 * * * *", "k", tz="Europe/Paris")
    step(store, clock, at(2026, 3, 30, 0) - 1, 30 * MIN)
    assert len(fired(store)) == 23
    store.schedules.remove("h")
    clock.set(at(2026, 10, 25, 0) - 1)
    store.schedules.add("h2", "0 * * * *", "k", tz="Europe/Paris")
    step(store, clock, at(2026, 10, 26, 0) - 1, 30 * MIN)
    assert len(fired(store, "h2")) == 25


# -- the task API -----------------------------------------------------------------------------------------


def test_periodic_validates_at_decoration():
    app = tenure.App("sqlite:///:memory:")
    with pytest.raises(InvalidSchedule) as info:
        app.periodic(cron="* * * *")
    assert info.value.details["field"] == "cron"
    with pytest.raises(InvalidSchedule):
        app.periodic(cron="* * * * *", tz="Nowhere/Land")
    with pytest.raises(InvalidSchedule):
        app.periodic(cron="* * * * *", catch_up="sometimes")
    with pytest.raises(InvalidArgument):
        app.periodic(cron="* * * * *", delay=5)
    assert app.tasks == {} and app.periodic_tasks == []


def test_periodic_task_is_scheduled_at_worker_start_and_runs(engine_url, clock):
    app = tenure.App(engine_url, clock=clock)
    calls = []

    @app.periodic(cron="* * * * *", tz="Europe/Paris", name="tick", queue="periodic", max_attempts=2)
    def tick() -> str:
        calls.append(1)
        return "ticked"

    assert tick() == "ticked" and calls == [1]  # still an ordinary task
    store = app.store
    store.maintenance.configure(schedule_interval=0.02)
    worker = app.create_worker(poll_interval=0.02)
    m = store.maintenance
    try:
        worker.start()
        deadline = dt.datetime.now() + dt.timedelta(seconds=10)
        while store.schedules.get("tick") is None and dt.datetime.now() < deadline:
            m.wait_for_pass(timeout=0.5)
        s = store.schedules.get("tick")
        assert s is not None and (s.kind, s.queue, s.options) == ("tick", "periodic", {"max_attempts": 2})
        clock.set(s.next_fire_at)
        job_id = fire_job_id("tick", "", s.next_fire_at)
        while dt.datetime.now() < deadline:
            job = store.jobs.get(job_id)
            if job is not None and job.state == "done":
                break
            m.wait_for_pass(timeout=0.2)
        assert store.jobs.get(job_id).result == "ticked"
        assert calls == [1, 1]
    finally:
        worker.stop()
        store.close()
