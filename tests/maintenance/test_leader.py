"""Leadership: one maintenance leader per database, a leased row in tenure_leader, renewed by its
holder, taken over when it expires (injected clock), handed over at once on a clean stop."""

from __future__ import annotations

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
    assert three[0].leader() == (three[0].owner, clock.now + three[0].config.leader_ttl_ms)
    assert [m.is_leader() for m in three] == [True, False, False]
    assert len({m.owner for m in three}) == 3


def test_the_leader_renews_and_keeps_it(three, clock):
    a, b, _ = three
    ttl = a.config.leader_ttl_ms
    assert a.elect()
    for _ in range(5):
        clock.advance(ttl // 3)
        assert a.elect() is True  # renewal moves the expiry
        assert b.elect() is False
    assert a.leader() == (a.owner, clock.now + ttl)


def test_an_expired_lease_is_taken_over_by_the_next_candidate(three, clock):
    a, b, c = three
    ttl = a.config.leader_ttl_ms
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
        MaintenanceConfig(leader_ttl_ms=10)
    with pytest.raises(tenure.errors.InvalidArgument):
        MaintenanceConfig(batch_size=5000)
    with pytest.raises(tenure.errors.InvalidArgument):
        MaintenanceConfig(schedule_interval=0)
    with pytest.raises(tenure.errors.InvalidType):
        MaintenanceConfig(heartbeat_interval="5")
    with pytest.raises(tenure.errors.InvalidArgument):
        MaintenanceConfig(worker_dead_after_ms=1000, heartbeat_interval=5)
    with pytest.raises(tenure.errors.InvalidArgument):
        MaintenanceConfig(delete_after_ms=-1)
    assert MaintenanceConfig(delete_after_ms=None).delete_after_ms is None


def test_configure_replaces_fields_and_refuses_unknown_ones(store):
    m: Maintainer = store.maintenance
    assert m.configure(leader_ttl_ms=5_000).leader_ttl_ms == 5_000
    with pytest.raises(tenure.errors.InvalidArgument):
        m.configure(no_such_knob=1)
    with pytest.raises(tenure.errors.InvalidArgument):
        m.configure(batch_size=0)
    assert m.config.batch_size == 1_000
    assert LEADER_ROLE == "maintenance"
