"""Leadership: one maintenance leader per database, a leased row in tenure_leader, renewed by its
holder, taken over when it expires (injected clock), handed over at once on a clean stop."""

from __future__ import annotations

from datetime import timedelta

import pytest

import tenure
from tenure.maintenance import LEADER_ROLE, Maintainer, MaintenanceConfig


@pytest.fixture
def three(engine_url, clock, store):
    """Three maintainers on three stores over one database: three nodes."""
    stores = [store] + [tenure.connect(engine_url, clock=clock) for _ in range(2)]
    yield [s.maintenance for s in stores]
    for s in stores[1:]:
        s.close()


def test_one_leader_among_many(three, clock):
    results = [m.elect() for m in three]
    assert results == [True, False, False]
    assert three[0].leader() == (three[0].owner, clock.now + three[0].config.leader_ttl * 1000)
    assert [m.is_leader() for m in three] == [True, False, False]
    assert len({m.owner for m in three}) == 3


def test_the_leader_renews_and_keeps_it(three, clock):
    a, b, _ = three
    ttl = int(a.config.leader_ttl * 1000)
    assert a.elect()
    for _ in range(5):
        clock.advance(ttl // 3)
        assert a.elect() is True  # renewal moves the expiry
        assert b.elect() is False
    assert a.leader() == (a.owner, clock.now + ttl)


def test_an_expired_lease_is_taken_over_by_the_next_candidate(three, clock):
    a, b, c = three
    ttl = int(a.config.leader_ttl * 1000)
    assert a.elect()
    clock.advance(ttl - 1)
    assert b.elect() is False
    clock.advance(1)
    assert b.elect() is True and c.elect() is False
    assert a.elect() is False  # the old leader learns it lost
    assert not a.is_leader() and b.leader()[0] == b.owner


def test_resign_hands_over_at_once(three):
    a, b, _ = three
    assert a.elect() and b.elect() is False
    assert a.resign() is True
    assert b.elect() is True
    assert a.resign() is False  # no longer held


def test_a_stopping_worker_gives_up_leadership(store, other):
    """The last worker to stop releases the service, which deletes the leader row: another node
    leads at its next election, without waiting for the lease to run out."""
    worker = store.jobs.create_worker({"k": lambda p, ctx: None}, poll_interval=0.05)
    m = store.maintenance
    worker.start()
    try:
        assert m.wait_for_pass(after=0, timeout=10)
        assert m.is_leader() and m.leader()[0] == m.owner
        assert other.maintenance.elect() is False
    finally:
        worker.stop()
    assert not m.running and m.leader() is None
    assert other.maintenance.elect() is True


def test_config_is_validated():
    with pytest.raises(tenure.errors.InvalidArgument):
        MaintenanceConfig(leader_ttl=0.01)
    with pytest.raises(tenure.errors.InvalidArgument):
        MaintenanceConfig(batch_size=5000)
    with pytest.raises(tenure.errors.InvalidArgument):
        MaintenanceConfig(schedule_interval=0)
    with pytest.raises(tenure.errors.InvalidType):
        MaintenanceConfig(heartbeat_interval=[5])
    with pytest.raises(tenure.errors.InvalidArgument):
        MaintenanceConfig(worker_dead_after=1, heartbeat_interval=5)
    with pytest.raises(tenure.errors.InvalidArgument):
        MaintenanceConfig(delete_after=-1)
    assert MaintenanceConfig(delete_after=None).delete_after is None


def test_configure_replaces_fields_and_refuses_unknown_ones(store):
    m: Maintainer = store.maintenance
    assert m.configure(leader_ttl=5).leader_ttl == 5.0
    with pytest.raises(tenure.errors.InvalidArgument):
        m.configure(no_such_knob=1)
    with pytest.raises(tenure.errors.InvalidArgument):
        m.configure(batch_size=0)
    assert m.config.batch_size == 1_000
    with pytest.raises(tenure.errors.InvalidArgument, match="did you mean 'leader_ttl'"):
        m.configure(leader_tl=5)


def test_maintenance_durations_are_seconds_timedeltas_or_text_and_the_ms_names_still_work(store):
    """Every duration of the maintenance service reads seconds, a timedelta or the text form
    alike; the ``_ms`` names of earlier releases warn (naming the replacement) and still work,
    on construction, through ``configure`` and when read."""
    spelled = [MaintenanceConfig(leader_ttl=20, worker_dead_after=90, delete_after=3 * 86_400, misfire_grace=0.5),
               MaintenanceConfig(leader_ttl=timedelta(seconds=20), worker_dead_after=timedelta(minutes=1.5),
                                 delete_after=timedelta(days=3), misfire_grace=timedelta(milliseconds=500)),
               MaintenanceConfig(leader_ttl="20s", worker_dead_after="90", delete_after="3d", misfire_grace="500ms")]
    assert spelled[0] == spelled[1] == spelled[2]
    with pytest.warns(DeprecationWarning, match=r"_ms= is deprecated: use ") as record:
        old = MaintenanceConfig(leader_ttl_ms=20_000, worker_dead_after_ms=90_000, delete_after_ms=3 * 86_400_000,
                                misfire_grace_ms=500)
    assert old == spelled[0]
    assert sorted(str(w.message).split("=")[0] for w in record) == sorted(
        ["delete_after_ms", "leader_ttl_ms", "misfire_grace_ms", "worker_dead_after_ms"])
    with pytest.warns(DeprecationWarning, match="delete_after_ms= is deprecated: use delete_after="):
        assert store.maintenance.configure(delete_after_ms=None).delete_after is None
    with pytest.warns(DeprecationWarning, match="leader_ttl_ms is deprecated: read leader_ttl"):
        assert spelled[0].leader_ttl_ms == 20_000
    for bad, code in (({"leader_ttl": "soon"}, "TN1001"), ({"delete_after": -1}, "TN1001"),
                      ({"misfire_grace": True}, "TN1002"), ({"leader_ttl": 5, "leader_ttl_ms": 5000}, "TN1001")):
        with pytest.raises(tenure.errors.TenureError) as ei:
            store.maintenance.configure(**bad)
        assert ei.value.code == code and list(bad)[0] in str(ei.value)
    assert LEADER_ROLE == "maintenance"
