"""On PostgreSQL a worker's claim does not wait for the once-a-second clean-up of abandoned cancel
requests (``job_control.cancel_abandoned``): the dispatcher runs it after starting what the claim
leased, in a trip of its own (in the claim it was a second trip to the server before the first
handler could start, on ~2% of an idle worker's claims at 50 jobs/s). On SQLite, where it is no
trip (one in-process writer), it stays in the claim, under the same hold of the store. Either
way it still runs. ``jobs.claim`` and ``claim_many`` keep running it first
(tests/ops/test_cancel.py). Both engines."""

from __future__ import annotations

import threading

import tenure

from ._wk import wait_for

HOUR = 3600.0


#: The worker's threads that claim: the dispatcher, and on SQLite also the watch thread, which
#: claims what it hears itself (Producer._claim_here) unless the dispatcher is already awake.
CLAIMERS = ("tenure-dispatch", "tenure-watch")


def _spy(store, monkeypatch) -> list[tuple[str, str]]:
    """What the claiming threads did, in order, as ``(thread name, step)``: each claim's start and
    end (``leased`` when it leased a job), each clean-up that ran."""
    import tenure.job_control as jc

    seen: list[tuple[str, str]] = []
    jobs = store._jobs
    real_claim, real_cancel = jobs.claim_many, jc.cancel_abandoned

    def claimer() -> str | None:
        name = threading.current_thread().name
        return name if name in CLAIMERS else None

    def claim_many(*a, **kw):
        who = claimer()
        if who:
            seen.append((who, "claim"))
        got = real_claim(*a, **kw)
        if who:
            seen.append((who, "leased" if got else "empty"))
        return got

    def cancel_abandoned(st, session):
        due = jc.abandoned_due(st)
        out = real_cancel(st, session)
        who = claimer()
        if due and who:
            seen.append((who, "swept"))
        return out

    monkeypatch.setattr(jobs, "claim_many", claim_many)
    monkeypatch.setattr("tenure.jobs.cancel_abandoned", cancel_abandoned)
    return seen


def _steps(seen: list[tuple[str, str]]) -> list[str]:
    return [step for _, step in seen]


def test_on_postgres_the_dispatcher_starts_what_it_claimed_before_the_clean_up(engine_url, monkeypatch):
    store = tenure.connect(engine_url)
    seen = _spy(store, monkeypatch)
    w = store.jobs.create_worker({"k": lambda payload, ctx: None}, concurrency=2, poll_interval=HOUR)
    try:
        w.start()
        wait_for(lambda: "swept" in _steps(seen), what="the first clean-up")  # the idle start-up claim's
        store._abandoned_next = 0.0  # due again: the next claim's turn runs it
        job = store.jobs.enqueue("k", {"i": 1})
        wait_for(lambda: store.jobs.get(job).state == "done", what="the job done")
        wait_for(lambda: _steps(seen).count("swept") >= 2, what="the second clean-up")
        record = list(seen)
        trips = _steps(record)
        assert "leased" in trips, record
        # Each clean-up, read on the thread that ran it: right after that thread's claim started?
        inside = []
        for who in CLAIMERS:
            mine = [step for name, step in record if name == who]
            inside += [mine[i - 1] == "claim" for i, step in enumerate(mine) if step == "swept"]
        if engine_url.startswith("sqlite"):
            assert all(inside), record  # SQLite: in the claim, between its start and its answer
        else:
            assert not any(inside), record  # PostgreSQL: never inside a claim
    finally:
        w.stop(grace=2)
        store.close()


def test_a_running_worker_still_cancels_a_flagged_job_whose_holder_is_gone(engine_url, clock):
    store = tenure.connect(engine_url, clock=clock)
    jobs = store.jobs
    job_id = jobs.enqueue("k")
    claim = jobs.claim(["k"], owner="holder", lease_ms=1_000)
    assert claim is not None and claim.job.id == job_id
    assert jobs.request_cancel(job_id) == "requested"
    clock.advance(1_000)
    store._abandoned_next = 0.0
    w = jobs.create_worker({"other": lambda p, ctx: None}, concurrency=1, poll_interval=HOUR)
    try:
        w.start()
        wait_for(lambda: jobs.get(job_id).state == "cancelled", what="the abandoned job cancelled")
        assert jobs.get(job_id).attempts == 1  # never run again
    finally:
        w.stop(grace=2)
        store.close()
