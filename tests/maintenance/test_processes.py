"""Real processes: three of them fire the same schedules on one database (exactly one job per
boundary, and exactly one process counts each), and a leader killed with SIGKILL is replaced within
one lease. The clock is injected in every process; nothing sleeps to wait for a lease."""

from __future__ import annotations

import multiprocessing

from . import _procs
from .conftest import fired

MIN = 60_000


def _run(ctx, target, args_list, timeout=90):
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, out)) for args in args_list]
    for p in procs:
        p.start()
    reports = []
    try:
        for _ in procs:
            reports.append(out.get(timeout=timeout))
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    return reports


def test_three_processes_fire_each_boundary_exactly_once(store, clock, engine_url):
    """Three processes walk the same clock in lockstep and race on every boundary: each boundary of
    each schedule becomes one job, and the processes' own counts add up to exactly the jobs there
    are (the compare-and-set let one of them fire it; the job id is only the second guard)."""
    t0 = clock.now - clock.now % (10 * MIN)
    clock.set(t0)
    store.schedules.add("every-minute", "* * * * *", "k")
    store.schedules.add("catch-all", "*/2 * * * *", "k", catch_up="all")
    store.schedules.add("latest", "* * * * *", "k", catch_up="latest")
    # Mostly one-minute steps, with a few jumps that skip boundaries.
    offsets = [1, 2, 3, 6, 7, 8, 12, 13, 14, 17, 18, 20]
    instants = [t0 + m * MIN + 1_000 for m in offsets]
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(3)
    reports = _run(ctx, _procs.fire_steps, [(engine_url, f"p{i}", instants, barrier) for i in range(3)])
    assert [(n, e) for n, _, e in reports if e] == []
    jobs = fired(store)
    ids = [i for i, _ in jobs]
    assert len(ids) == len(set(ids))
    assert sum(n for _, n, _ in reports) == len(jobs)
    assert sum(1 for _, n, _ in reports if n) >= 1
    every = [r for _, r in fired(store, "every-minute")]
    latest = [r for _, r in fired(store, "latest")]
    catch_all = [r for _, r in fired(store, "catch-all")]
    assert every == latest == [t0 + m * MIN for m in offsets]  # the latest boundary at each step
    assert catch_all == [t0 + m * MIN for m in range(2, 21, 2)]  # every even minute, none lost


def test_a_killed_leader_is_replaced_within_one_lease(store, clock, engine_url):
    ttl = 10_000
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=_procs.lead_then_hang, args=(engine_url, clock.now, ttl, out))
    child.start()
    try:
        owner, led, error = out.get(timeout=60)
        assert error is None and led is True
        m = store.maintenance
        m.configure(leader_ttl=ttl / 1000)
        assert m.leader() == (owner, clock.now + ttl)
        assert m.elect() is False  # the child leads
    finally:
        child.kill()  # SIGKILL: no resignation, the lease row stays behind
        child.join(10)
    assert child.exitcode == -9
    clock.advance(ttl - 1)
    assert m.elect() is False and m.leader()[0] == owner  # its lease still runs
    clock.advance(1)
    assert m.elect() is True  # handed over exactly one lease after the last renewal
    assert m.leader() == (m.owner, clock.now + ttl)
    assert m.is_leader()
