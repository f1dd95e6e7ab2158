"""Model-based test: a pure-Python model of the docs/spec.md state machine, driven by hypothesis
against the real store on both engines. Every answer and every coded refusal is checked against
the model (spec §2, §3, §4, §5, §10)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import tenure
from tenure.errors import LeaseExpired, LeaseNotHeld, LeaseRequired, LeaseSuperseded, WorkerLost

from ..conftest import Clock, Rand, empty_pg, sqlite_url

IDS = ["a", "b", "c", "d"]
BASE, CAP = 1_000, 60_000


@dataclass
class MJob:
    id: str
    max_attempts: int
    run_at: int
    created_at: int
    updated_at: int
    state: str = "pending"
    attempts: int = 0
    generation: int = 0
    lease_until: int | None = None
    token: str | None = None  # the live (or last settling) token; None after cancel/requeue
    last_error: str | None = None
    result: object = None


@dataclass
class MLease:
    lease: tenure.Lease
    retired: bool = False


@dataclass
class Model:
    jobs: dict[str, MJob] = field(default_factory=dict)

    def eligible(self, now: int) -> list[MJob]:
        out = [j for j in self.jobs.values()
               if (j.state in ("pending", "failed") and j.run_at <= now)
               or (j.state == "leased" and j.lease_until <= now)]
        return sorted(out, key=lambda j: (j.run_at, j.created_at, j.id))

    def refusal(self, lease: tenure.Lease, now: int) -> type | None:
        j = self.jobs.get(lease.job_id)
        if j is None:
            return LeaseNotHeld
        if j.state == "leased":
            if j.token == lease.token:
                return None if now < j.lease_until else LeaseExpired
            return LeaseSuperseded
        if j.token == lease.token and j.generation == lease.generation and j.state in ("done", "failed", "dead"):
            return "idempotent"
        return LeaseNotHeld


def _fresh(engine_url: str, tmp_path: Path) -> Callable[[], str]:
    """A fresh database for each example: a new SQLite file, or the PostgreSQL database emptied."""
    seq = itertools.count()

    def fresh() -> str:
        if engine_url.startswith("sqlite"):
            return sqlite_url(tmp_path, f"model-{next(seq)}.db")
        empty_pg(engine_url)
        return engine_url

    return fresh


class JobsMachine(RuleBasedStateMachine):
    engine = "sqlite"

    @initialize()
    def setup(self):
        self.clock = Clock(1_000_000)
        self.rand = Rand(0.0)
        self.store = tenure.connect(type(self).fresh(), clock=self.clock, random=self.rand)
        self.jobs = self.store.jobs
        self.model = Model()
        self.leases: list[MLease] = []

    def teardown(self):
        if hasattr(self, "store"):
            self.store.close()

    # -- helpers -------------------------------------------------------------------------------
    def expect(self, expected, call):
        """Run ``call``; an exception class in ``expected`` must be raised, anything else returned."""
        if isinstance(expected, type) and issubclass(expected, Exception):
            with pytest.raises(expected) as info:
                call()
            assert info.value.code == expected.code
            return None
        return call()

    # -- rules -----------------------------------------------------------------------------------
    @rule(job_id=st.sampled_from(IDS), max_attempts=st.integers(1, 3), delay=st.sampled_from([0, 0, 500, 2000]))
    def enqueue(self, job_id, max_attempts, delay):
        now = self.clock()
        got = self.jobs.enqueue("k", {"n": job_id}, id=job_id, max_attempts=max_attempts, run_at=now + delay)
        assert got == job_id
        if job_id not in self.model.jobs:
            self.model.jobs[job_id] = MJob(job_id, max_attempts, now + delay, now, now)

    @rule()
    def claim(self):
        # Bounded reclaim (docs/spec.md D10): of the first (limit = 1) expired lease in claim
        # order, one whose job has used its last attempt is settled dead by this claim (its
        # last_error names the lost worker; the default queue has no dead-letter queue) and the
        # first due job is claimed instead; any other expired lease is leased again, alone.
        now = self.clock()
        eligible = self.model.eligible(now)
        expired = [j for j in eligible if j.state == "leased"][:1]
        spent = [j for j in expired if j.attempts >= j.max_attempts]
        c = self.jobs.claim("k", owner="w", lease_ms=10_000)
        for j in spent:
            j.state, j.token, j.lease_until, j.updated_at = "dead", None, None, now
            j.last_error = (f"{WorkerLost.code}: worker lost on its final attempt ({j.attempts} of "
                            f"{j.max_attempts}): the lease of w expired, and the next claim settled the "
                            "job dead instead of running it again")
        revived = [j for j in expired if j not in spent]
        eligible = revived or [j for j in eligible if j.state in ("pending", "failed")]
        if not eligible:
            assert c is None
            return
        j = eligible[0]
        assert c is not None and c.job.id == j.id
        assert c.reclaimed == bool(revived)
        j.state, j.attempts, j.generation = "leased", j.attempts + 1, j.generation + 1
        j.lease_until, j.token, j.updated_at = now + 10_000, c.lease.token, now
        assert (c.lease.generation, c.lease.attempt, c.lease.expires_at) == (j.generation, j.attempts, j.lease_until)
        self.leases.append(MLease(c.lease))

    @precondition(lambda self: self.leases)
    @rule(i=st.integers(0, 50))
    def renew(self, i):
        ml = self.leases[i % len(self.leases)]
        now = self.clock()
        expected = self.model.refusal(ml.lease, now)
        if expected == "idempotent":
            expected = LeaseNotHeld  # a settled attempt cannot be renewed
        new = self.expect(expected, lambda: self.jobs.renew(ml.lease, 10_000))
        if new is not None:
            j = self.model.jobs[ml.lease.job_id]
            assert new.generation == j.generation and new.token != ml.lease.token
            j.token, j.lease_until, j.updated_at = new.token, now + 10_000, now
            self.leases.append(MLease(new))

    @precondition(lambda self: self.leases)
    @rule(i=st.integers(0, 50), value=st.integers(0, 9))
    def complete(self, i, value):
        ml = self.leases[i % len(self.leases)]
        now = self.clock()
        expected = self.model.refusal(ml.lease, now)
        self.expect(expected, lambda: self.jobs.complete(ml.lease, {"v": value}))
        if expected is None:
            j = self.model.jobs[ml.lease.job_id]
            j.state, j.lease_until, j.result, j.updated_at = "done", None, {"v": value}, now

    @precondition(lambda self: self.leases)
    @rule(i=st.integers(0, 50))
    def fail(self, i):
        ml = self.leases[i % len(self.leases)]
        now = self.clock()
        expected = self.model.refusal(ml.lease, now)
        self.expect(expected, lambda: self.jobs.fail(ml.lease, "boom"))
        if expected is None:
            j = self.model.jobs[ml.lease.job_id]
            j.last_error, j.lease_until, j.updated_at = "boom", None, now
            if j.attempts >= j.max_attempts:
                j.state = "dead"
            else:
                j.state = "failed"
                j.run_at = now + int(min(CAP, BASE * 2 ** (j.attempts - 1)) * 0.5)

    @rule(job_id=st.sampled_from(IDS + ["zz"]))
    def cancel_queued(self, job_id):
        now = self.clock()
        j = self.model.jobs.get(job_id)
        if j is None or j.state in ("done", "dead"):
            expected = LeaseNotHeld
        elif j.state == "cancelled":
            assert self.jobs.cancel(job_id) is False
            return
        elif j.state == "leased" and now < j.lease_until:
            expected = LeaseRequired
        else:
            expected = True
        got = self.expect(expected, lambda: self.jobs.cancel(job_id))
        if expected is True:
            assert got is True
            j.state, j.token, j.lease_until, j.updated_at = "cancelled", None, None, now

    @rule(job_id=st.sampled_from(IDS + ["zz"]))
    def requeue(self, job_id):
        now = self.clock()
        j = self.model.jobs.get(job_id)
        if j is None or j.state == "done":
            expected = LeaseNotHeld
        elif j.state == "pending":
            assert self.jobs.requeue(job_id) is False
            return
        elif j.state == "leased" and now < j.lease_until:
            expected = LeaseRequired
        else:
            expected = True
        got = self.expect(expected, lambda: self.jobs.requeue(job_id))
        if expected is True:
            assert got is True
            j.state, j.run_at, j.token, j.lease_until, j.updated_at = "pending", now, None, None, now

    @rule(back=st.sampled_from([0, 1, 5_000, 50_000]))
    def sweep(self, back):
        horizon = self.clock() - back
        doomed = [j.id for j in self.model.jobs.values()
                  if j.state in ("done", "dead", "cancelled") and j.updated_at < horizon]
        assert self.jobs.sweep(settled_before=horizon).removed == len(doomed)
        for jid in doomed:
            del self.model.jobs[jid]
        assert self.jobs.sweep(settled_before=horizon).removed == 0

    @rule(ms=st.sampled_from([1, 499, 500, 1_000, 9_999, 10_000, 30_000]))
    def tick(self, ms):
        self.clock.advance(ms)

    # -- invariants -------------------------------------------------------------------------------
    @invariant()
    def rows_match_model(self):
        if not hasattr(self, "model"):
            return
        counts = self.jobs.counts()
        expected = dict.fromkeys(counts, 0)
        for j in self.model.jobs.values():
            expected[j.state] += 1
        assert counts == expected
        for j in self.model.jobs.values():
            got = self.jobs.get(j.id)
            assert (got.state, got.attempts, got.lease_generation, got.run_at, got.last_error, got.result) == \
                (j.state, j.attempts, j.generation, j.run_at, j.last_error, j.result)
            assert (got.lease_until is None) == (j.state != "leased")


def test_store_follows_the_model(engine_url, tmp_path):
    engine = "sqlite" if engine_url.startswith("sqlite") else "postgres"
    machine = type(f"JobsMachine_{engine}", (JobsMachine,), {"fresh": staticmethod(_fresh(engine_url, tmp_path))})
    machine.TestCase.settings = settings(max_examples=25 if engine == "sqlite" else 15, stateful_step_count=30,
                                         deadline=None, suppress_health_check=list(HealthCheck))
    machine.TestCase().runTest()
