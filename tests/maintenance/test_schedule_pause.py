"""``store.schedules.pause`` / ``resume``: a paused schedule fires nothing on any node; re-adding or
syncing it does not resume it; resume plans from now and skips the boundaries that passed while
paused, whatever the ``catch_up`` policy. Both engines, on the injected clock."""

from __future__ import annotations

import pytest

import tenure

from .conftest import fired

MIN = 60_000


@pytest.mark.parametrize("catch_up", ["latest", "all", "none"])
def test_a_paused_schedule_fires_nothing_and_resume_skips_what_passed(store, other, clock, catch_up):
    store.schedules.add("r", "* * * * *", "k", catch_up=catch_up)
    clock.advance(MIN)
    assert store.schedules.fire_due() == 1
    paused = store.schedules.pause("r")
    assert paused is not None and paused.paused and paused.paused_at == clock.now
    clock.advance(10 * MIN)
    assert store.schedules.fire_due() == 0
    assert other.schedules.fire_due() == 0  # no node fires it
    assert len(fired(store)) == 1
    resumed = store.schedules.resume("r")
    assert resumed is not None and not resumed.paused
    assert clock.now < resumed.next_fire_at <= clock.now + MIN  # planned from now
    assert store.schedules.fire_due() == 0  # nothing of the ten paused minutes
    clock.advance(MIN)
    assert store.schedules.fire_due() == 1
    assert len(fired(store)) == 2


def test_pausing_twice_keeps_the_first_pause_and_resuming_an_active_schedule_changes_nothing(store, clock):
    store.schedules.add("r", "0 * * * *", "k")
    before = store.schedules.get("r")
    assert store.schedules.resume("r").next_fire_at == before.next_fire_at
    first = store.schedules.pause("r").paused_at
    clock.advance(5 * MIN)
    assert store.schedules.pause("r").paused_at == first


def test_re_adding_or_syncing_a_paused_schedule_keeps_it_paused(store, clock):
    app = tenure.App(store=store)
    app.periodic(cron="* * * * *", name="tick")(lambda: None)
    assert store.schedules.sync(app) == 1
    store.schedules.pause("tick")
    store.schedules.sync(app)  # a worker starting with the same @app.periodic
    store.schedules.add("tick", "*/2 * * * *", store.schedules.get("tick").kind)  # a changed expression
    assert store.schedules.get("tick").paused
    clock.advance(5 * MIN)
    assert store.schedules.fire_due() == 0


def test_pause_and_resume_of_an_unknown_schedule_answer_none(store):
    assert store.schedules.pause("nope") is None
    assert store.schedules.resume("nope") is None
    assert store.schedules.list() == []


def test_keys_pause_apart(store, clock):
    store.schedules.add("r", "* * * * *", "k", key="eu")
    store.schedules.add("r", "* * * * *", "k", key="us")
    store.schedules.pause("r", key="eu")
    clock.advance(MIN)
    assert store.schedules.fire_due() == 1
    ids = [job_id for job_id, _ in fired(store)]
    assert len(ids) == 1 and ids[0].startswith("cron:r#us:")
