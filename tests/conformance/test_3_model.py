"""A model-based check of the fence and the state machine (hypothesis stateful testing).

It drives random sequences of enqueue / claim / renew / complete / fail / cancel / requeue and clock
moves against a real store, with leases kept forever so stale, retired and expired ones are used
again, and compares every record and every refusal code with a small reference model written from
the spec rows it exercises:

2.5 (six states), 2.7 (attempts at claim), 2.9 (lease fields), 2.10 (generation), 3.2 and D3
(the boundary instant), 3.3, 3.5 (order), 3.9-3.12 (fence codes), D2 (TN2066 while the
replacing attempt holds the job, TN2065 once it settled), 3.14 and D1 (same-attempt repeat
is a no-op), 3.15 (renew), 4.2/4.3/4.5 (retry, dead, backoff), 10.7/10.8 and D4 (cancel),
10.13/10.15/10.16 (requeue).
"""

from __future__ import annotations

from dataclasses import dataclass

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

import tenure
from tests.conftest import empty_pg

from ._support import Clock, Rand

RAND = 0.5


@dataclass
class Row:
    id: str
    created_at: int
    run_at: int
    max_attempts: int
    state: str = "pending"
    attempts: int = 0
    generation: int = 0
    token: str | None = None  # the current (or last settling) token
    lease_until: int | None = None
    owner: str | None = None


def _backoff(attempts: int) -> int:
    return int(min(60_000, 1000 * 2 ** (attempts - 1)) * (0.5 + RAND / 2))


def _machine(target, connect_store):  # noqa: C901 - the model's state machine, one branch per rule
    class FenceModel(RuleBasedStateMachine):
        @initialize()
        def open(self):
            self.clock = Clock()
            self.store = connect_store(self.clock)
            self.jobs = self.store.jobs
            self.rows: dict[str, Row] = {}
            self.leases: list = []
            self.n = 0

        def teardown(self):
            store = getattr(self, "store", None)
            if store is not None:
                store.close()

        # -- helpers ------------------------------------------------------------------------------
        def now(self) -> int:
            return self.clock()

        def expect(self, call, code):
            """Run ``call``; ``code`` None means it must succeed (returns its value)."""
            try:
                value = call()
            except Exception as exc:  # noqa: BLE001 - compared with the model below
                got = getattr(exc, "code", None)
                assert got == code, f"expected {code or 'success'}, got {type(exc).__name__}({got}): {exc}"
                return None
            assert code is None, f"expected refusal {code}, the call returned {value!r}"
            return value

        def fence(self, lease):
            """The model's answer for a fenced call: 'ok', 'noop' (D1) or a code."""
            row = self.rows[lease.job_id]
            if row.state == "leased":
                if row.token == lease.token:
                    return "ok" if self.now() < row.lease_until else "TN2067"
                return "TN2066"
            if row.token == lease.token and row.state in ("done", "failed", "dead"):
                return "noop"
            return "TN2065"

        def settle(self, row, state):
            row.state, row.lease_until, row.owner = state, None, None

        # -- rules --------------------------------------------------------------------------------
        @rule(max_attempts=st.integers(1, 3), delay=st.sampled_from([0, 0, 500, 1000]))
        def enqueue(self, max_attempts, delay):
            job_id = f"j{self.n}"
            self.n += 1
            run_at = self.now() + delay
            assert (
                self.jobs.enqueue("k", {"n": self.n}, id=job_id, run_at=run_at, max_attempts=max_attempts)
                == job_id
            )
            self.rows[job_id] = Row(job_id, self.now(), run_at, max_attempts)

        @rule(ms=st.sampled_from([1, 499, 500, 999, 1000, 1001, 4000, 30_000]))
        def advance(self, ms):
            self.clock.advance(ms)

        @rule(lease_ms=st.sampled_from([1000, 5000]), owner=st.sampled_from(["a", "b"]))
        def claim(self, lease_ms, owner):
            # Bounded reclaim (docs/guarantees.md, "Liveness"): of the first (limit = 1) expired
            # lease in claim order, a spent one is settled dead and another is leased again, alone;
            # else the first due job is claimed.
            now = self.now()
            order = lambda r: (r.run_at, r.created_at, r.id)  # noqa: E731
            expired = sorted(
                (r for r in self.rows.values() if r.state == "leased" and r.lease_until <= now), key=order
            )[:1]
            due = sorted(
                (r for r in self.rows.values() if r.state in ("pending", "failed") and r.run_at <= now),
                key=order,
            )
            claim = self.jobs.claim(["k"], owner=owner, lease_ms=lease_ms)
            revived = [r for r in expired if r.attempts < r.max_attempts]
            for r in expired:
                if r.attempts >= r.max_attempts:
                    self.settle(r, "dead")
                    r.token = None
            if not revived and not due:
                assert claim is None
                return
            row = revived[0] if revived else due[0]
            assert claim is not None and claim.job.id == row.id, (claim, row)
            assert claim.reclaimed == bool(revived)
            row.state, row.owner, row.lease_until = "leased", owner, now + lease_ms
            row.generation += 1
            row.attempts += 1
            assert claim.lease.token != row.token
            row.token = claim.lease.token
            assert (claim.lease.generation, claim.lease.attempt) == (row.generation, row.attempts)
            self.leases.append(claim.lease)

        @rule(data=st.data())
        def renew(self, data):
            if not self.leases:
                return
            lease = data.draw(st.sampled_from(self.leases))
            verdict = self.fence(lease)
            if verdict == "noop":  # renewing a settled attempt: unspecified, but it must not revive it
                before = self.jobs.get(lease.job_id)
                try:
                    self.jobs.renew(lease)
                except Exception as exc:  # noqa: BLE001
                    assert getattr(exc, "code", None) == "TN2065", repr(exc)
                assert self.jobs.get(lease.job_id) == before
                return
            new = self.expect(
                lambda: self.jobs.renew(lease, lease_ms=2000), None if verdict == "ok" else verdict
            )
            if verdict == "ok":
                row = self.rows[lease.job_id]
                assert new.token != lease.token and new.generation == lease.generation
                assert new.expires_at == self.now() + 2000
                row.token, row.lease_until = new.token, self.now() + 2000
                self.leases.append(new)

        @rule(data=st.data())
        def complete(self, data):
            if not self.leases:
                return
            lease = data.draw(st.sampled_from(self.leases))
            verdict = self.fence(lease)
            self.expect(
                lambda: self.jobs.complete(lease, {"by": lease.token[:6]}),
                verdict if verdict.startswith("TN") else None,
            )
            if verdict == "ok":
                self.settle(self.rows[lease.job_id], "done")

        @rule(data=st.data())
        def fail(self, data):
            if not self.leases:
                return
            lease = data.draw(st.sampled_from(self.leases))
            verdict = self.fence(lease)
            self.expect(lambda: self.jobs.fail(lease, "boom"), verdict if verdict.startswith("TN") else None)
            if verdict == "ok":
                row = self.rows[lease.job_id]
                if row.attempts >= row.max_attempts:
                    self.settle(row, "dead")
                else:
                    self.settle(row, "failed")
                    row.run_at = self.now() + _backoff(row.attempts)

        @rule(data=st.data())
        def cancel(self, data):
            if not self.rows:
                return
            row = self.rows[data.draw(st.sampled_from(sorted(self.rows)))]
            now = self.now()
            if row.state == "cancelled":
                assert self.expect(lambda: self.jobs.cancel(row.id), None) is False
            elif row.state in ("pending", "failed") or (row.state == "leased" and row.lease_until <= now):
                assert self.expect(lambda: self.jobs.cancel(row.id), None) is True
                self.settle(row, "cancelled")
                row.token = None
            elif row.state == "leased":
                self.expect(lambda: self.jobs.cancel(row.id), "TN2068")
            else:
                self.expect(lambda: self.jobs.cancel(row.id), "TN2065")

        @rule(data=st.data())
        def requeue(self, data):
            if not self.rows:
                return
            row = self.rows[data.draw(st.sampled_from(sorted(self.rows)))]
            now = self.now()
            if row.state == "pending":
                assert self.expect(lambda: self.jobs.requeue(row.id), None) is False
            elif row.state in ("failed", "dead", "cancelled") or (
                row.state == "leased" and row.lease_until <= now
            ):
                assert self.expect(lambda: self.jobs.requeue(row.id), None) is True
                self.settle(row, "pending")
                row.run_at, row.token = now, None
            elif row.state == "leased":
                self.expect(lambda: self.jobs.requeue(row.id), "TN2068")
            else:
                self.expect(lambda: self.jobs.requeue(row.id), "TN2065")

        @invariant()
        def records_match(self):
            if not hasattr(self, "rows"):
                return
            for row in self.rows.values():
                job = self.jobs.get(row.id)
                got = (job.state, job.attempts, job.lease_generation, job.lease_until, job.lease_owner)
                assert got == (row.state, row.attempts, row.generation, row.lease_until, row.owner), (
                    row,
                    job,
                )
                if row.state in ("pending", "failed"):
                    assert job.run_at == row.run_at, (row, job)
            counts = self.jobs.counts()
            for state in ("pending", "leased", "done", "failed", "dead", "cancelled"):
                assert counts[state] == sum(r.state == state for r in self.rows.values()), counts

    return FenceModel


def test_3_model_fence_and_state_machine(store, target):
    """spec 2.5, 2.7, 2.9, 2.10, 3.2, 3.3, 3.5, 3.9-3.12, 3.14, 3.15, 4.2, 4.3,
    10.7, 10.8, 10.13, 10.15, 10.16 and decisions 1-4: random operation sequences agree with a
    reference model, record by record and refusal code by refusal code."""
    store.close()
    seq = iter(range(10**9))

    def connect_store(clock):
        if target.engine == "sqlite":
            url = f"sqlite:///{target.path.parent}/model-{next(seq)}.db"
            return tenure.connect(url, clock=clock, random=Rand(RAND))
        empty_pg(target.url)
        return tenure.connect(target.url, clock=clock, random=Rand(RAND))

    machine = _machine(target, connect_store)
    examples = 40 if target.engine == "sqlite" else 20
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=30,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
