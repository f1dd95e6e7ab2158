"""worker.events: milestones a test waits on instead of sleeping (tenure.worker.events)."""

from __future__ import annotations

import threading

import pytest

from tenure.errors import InvalidArgument
from tenure.worker.events import Milestones


def test_a_waiter_wakes_at_the_count_it_waits_for_and_not_before() -> None:
    m = Milestones()
    assert m.wait("turns", 0, timeout=0) and not m.wait("turns", 1, timeout=0)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(m.wait_more("turns", 2, timeout=10)))
    waiter.start()
    registered = threading.Event()
    for _ in range(10_000):  # the waiter is registered before the marks (else it could not miss them)
        if m._waiters or registered.wait(0.001):
            break
    assert m._waiters == 1
    m.mark("turns")
    assert got == []
    m.mark("turns")
    waiter.join(10)
    assert got == [True] and m.count("turns") == 2 and m.count("idle") == 0


def test_an_unknown_milestone_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="no worker milestone 'claims'"):
        Milestones().count("claims")


def test_a_running_worker_reaches_its_milestones(live_store, make_worker) -> None:
    w = make_worker(live_store, {"k": lambda payload, ctx: None}, poll_interval=0.01, lease=3)
    w.start()
    live_store.jobs.enqueue("k")
    assert w.events.wait("idle", 1, timeout=10) and w.events.wait("keeper_ticks", 1, timeout=10)
    assert w.events.wait("settle_batches", 1, timeout=10)
