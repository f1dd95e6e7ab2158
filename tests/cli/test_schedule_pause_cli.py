"""``tenure schedules pause|resume NAME``: the store's pause and resume, the state in ``list``,
exit 1 and a message for an unknown schedule. Both engines."""

from __future__ import annotations

import tenure


def test_pause_and_resume_from_the_command_line(cli, engine_url):
    cli("schedules", "add", "nightly", "0 3 * * *", "reports.build", "--key", "eu")
    assert "schedule nightly #eu paused" in cli("schedules", "pause", "nightly", "--key", "eu").out
    listed = cli("schedules", "list").out
    assert "paused" in listed.splitlines()[-1]
    row = cli("schedules", "list", "--json").json()[0]
    assert row["paused_at"] is not None
    store = tenure.connect(engine_url)
    try:
        assert store.schedules.get("nightly", key="eu").paused
    finally:
        store.close()
    resumed = cli("schedules", "resume", "nightly", "--key", "eu", "--json").json()
    assert resumed["paused_at"] is None and resumed["next_fire_at"] is not None
    assert "active" in cli("schedules", "list").out.splitlines()[-1]


def test_pause_of_an_unknown_schedule_exits_1(cli):
    res = cli("schedules", "pause", "nope", expect=1)
    assert "no schedule 'nope'" in res.err
    assert cli("schedules", "resume", "nope", "--json", expect=1).json()["found"] is False
