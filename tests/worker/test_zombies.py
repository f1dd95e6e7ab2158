"""Zombie slots: a handler that ignores its timeout keeps its slot until it
returns; the retries of ONE such job can take every slot of a worker. The worker counts them
(``stats()``, ``health()``, the heartbeat row, ``/metrics``) and reports itself unhealthy (TN2090)
once they reach ``zombie_share`` of its slots; ``App.run_worker`` then stops and raises.

Timeouts are real time (they bound a handler's run, not a lease): 0.1 s here, with a 0.05 s
``zombie_grace``, so each case takes well under a second."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from prometheus_client.parser import text_string_to_metric_families

import tenure
from tenure.errors import InvalidArgument, WorkerUnhealthy
from tenure.metrics import build_registry, render
from tenure.worker_health import zombie_limit

from ._wk import Outcomes, wait_for

N = 4


def _hostile(release: threading.Event, mode: str):
    """A handler that ignores every request to stop until ``release`` is set."""
    if mode == "sync":

        def handler(payload, ctx):
            release.wait(30)
            return "late"

        return handler

    async def ahandler(payload, ctx):
        while not release.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                pass  # swallowed: the task keeps running
        return "late"

    return ahandler


def _scrape(worker) -> dict:
    registry, _ = build_registry(workers=lambda: [worker])
    text = render(registry)[0].decode()
    return {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_retries_of_one_hanging_job_wedge_every_slot_and_the_worker_says_so(any_store, make_worker, mode):
    """Concurrency N, one job with N attempts whose handler ignores its timeout: each attempt
    times out (failed, retried at once) and its handler keeps its slot, so after N attempts every
    slot is a zombie and a healthy job waits. ``stats()``, ``health()``, the heartbeat row and the
    metrics all say unhealthy; when the handlers finally return, the worker is healthy again and
    the healthy job runs."""
    release = threading.Event()
    seen = Outcomes()
    bad = any_store.jobs.enqueue("hang", timeout=0.1, max_attempts=N)
    w = make_worker(
        any_store,
        {"hang": _hostile(release, mode), "ok": lambda p, ctx: "ok"},
        concurrency=N,
        backoff_base=0,
        poll_interval=0.01,
        zombie_grace=0.05,
        on_outcome=seen,
    )
    assert w.stats()["healthy"] is True and w.stats()["zombies"] == 0
    try:
        w.start()
        wait_for(lambda: w.stats()["zombies"] == N, timeout=10, what=f"{N} zombie slots")
        # An attempt is a zombie ``zombie_grace`` after its timeout asked it to stop, whether or not
        # the keeper's settling of that timeout has committed yet: the last failure is reported
        # (after its commit and its count) perhaps a moment later.
        seen.wait(N)
        assert any_store.jobs.get(bad).state == "dead" and any_store.jobs.get(bad).attempts == N
        assert [e["outcome"] for e in seen.events] == ["failed"] * N
        good = any_store.jobs.enqueue("ok")
        stats = w.stats()
        assert (stats["zombies"], stats["healthy"], stats["in_flight"], stats["timeouts"]) == (N, False, N, N)
        health = w.health()
        assert (health.zombies, health.limit, health.healthy) == (N, zombie_limit(N, 0.5), False)
        err = health.error()
        assert isinstance(err, WorkerUnhealthy) and err.code == "TN2090" and f"{N} of {N}" in str(err)
        metrics = _scrape(w)
        assert (metrics["tenure_worker_zombies"], metrics["tenure_worker_healthy"]) == (N, 0)
        assert any_store.maintenance.heartbeat() == 1
        (row,) = [r for r in any_store.maintenance.workers() if r.id == w.owner]
        beat = json.loads(row.stats) if isinstance(row.stats, str) else row.stats
        assert (beat["zombies"], beat["healthy"]) == (N, False)
        assert any_store.jobs.get(good).state == "pending"  # wedged: no slot is free
    finally:
        release.set()
    wait_for(lambda: w.stats()["zombies"] == 0 and w.stats()["in_flight"] == 0, what="the zombies to return")
    assert w.stats()["healthy"] is True and _scrape(w)["tenure_worker_healthy"] == 1
    wait_for(lambda: any_store.jobs.get(good).state == "done", what="the healthy job")
    assert any_store.jobs.get(bad).state == "dead"  # the late returns changed nothing


def test_the_share_sets_how_many_zombies_make_it_unhealthy(any_store, make_worker):
    """``zombie_share`` of the slots, rounded up and at least one: with 4 slots and share 0.5 two
    zombies are unhealthy, one is not; a handler that honours its timeout is never a zombie."""
    assert [zombie_limit(4, s) for s in (0.1, 0.25, 0.5, 0.51, 1.0)] == [1, 1, 2, 3, 4]
    assert zombie_limit(1, 0.5) == 1 and zombie_limit(3, 0.5) == 2
    release = threading.Event()
    hostile = _hostile(release, "sync")

    def polite(payload, ctx):
        ctx.cancelled.wait(30)
        return "stopped"

    w = make_worker(
        any_store,
        {"hang": hostile, "polite": polite},
        concurrency=4,
        backoff_base=0,
        poll_interval=0.01,
        zombie_grace=0.05,
    )
    any_store.jobs.enqueue_many([{"kind": "polite", "timeout": 0.1, "max_attempts": 1}] * 2)
    any_store.jobs.enqueue("hang", timeout=0.1, max_attempts=1)
    try:
        w.start()
        wait_for(lambda: w.stats()["zombies"] == 1 and w.stats()["in_flight"] == 1, what="one zombie")
        # the hanging attempt is a zombie from zombie_grace after its timeout, and its timeout is
        # counted once the keeper's failure commits, which may be a moment later
        wait_for(lambda: w.stats()["timeouts"] >= 3, what="three timeouts counted")
        assert w.stats()["timeouts"] == 3 and w.stats()["healthy"] is True
        any_store.jobs.enqueue("hang", timeout=0.1, max_attempts=1)
        wait_for(lambda: w.stats()["zombies"] == 2, what="two zombies")
        assert w.stats()["healthy"] is False
    finally:
        release.set()
    wait_for(lambda: w.stats()["in_flight"] == 0, what="the zombies to return")


def test_zombie_options_are_validated(any_store):
    for bad in (0, -0.1, 1.5, "0.5", True, float("nan")):
        with pytest.raises(InvalidArgument):
            any_store.jobs.create_worker({"k": lambda p, ctx: 1}, zombie_share=bad)
    with pytest.raises(InvalidArgument):
        any_store.jobs.create_worker({"k": lambda p, ctx: 1}, zombie_grace=-1)
    w = any_store.jobs.create_worker({"k": lambda p, ctx: 1}, stop_grace=2.5)
    assert (w.zombie_share, w.zombie_grace) == (0.5, 2.5)  # the grace defaults to stop_grace


def test_run_worker_stops_and_raises_when_unhealthy(engine_url):
    """``App.run_worker`` notices the zombies, stops the worker and raises WorkerUnhealthy
    (TN2090) instead of serving on with no free slot."""
    release = threading.Event()
    app = tenure.App(engine_url)
    try:

        @app.task(name="zombie.hang", timeout=0.1, max_attempts=2)
        def hang():
            release.wait(30)

        hang.enqueue()
        box: dict = {}

        def run():
            try:
                box["settled"] = app.run_worker(
                    concurrency=2,
                    install_signals=False,
                    backoff_base=0,
                    poll_interval=0.01,
                    zombie_grace=0.05,
                    stop_grace=0.1,
                )
            except BaseException as exc:  # noqa: BLE001 - checked below
                box["error"] = exc

        t = threading.Thread(target=run)
        t.start()
        t.join(20)
        assert not t.is_alive(), "run_worker kept serving with every slot held by a zombie"
        assert isinstance(box.get("error"), WorkerUnhealthy), box
        assert box["error"].code == "TN2090"
    finally:
        release.set()
        app.store.close(grace=0.5)
