"""spec §2: the job record (with the §1 scope facts)."""

from __future__ import annotations

import dataclasses
import math
import sqlite3
from datetime import timedelta
from itertools import count

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tenure

from ._support import FENCE_CODES, T0, claim1, ph, refused

STATES = {"pending", "leased", "done", "failed", "dead", "cancelled"}
JOB_FIELDS = [
    "id", "kind", "payload", "state", "run_at", "attempts", "max_attempts", "lease_until", "lease_owner",
    "lease_generation", "last_error", "result", "created_at", "updated_at",
]  # fmt: skip


def test_2_1_queue_tables_are_internal_and_created_on_open(store, target, clock):
    """spec 2.1: the queue works on a fresh database with no setup; its two tables
    (jobs, checkpoints) are tenure's own, namespaced, and never collide with the app's tables."""
    jobs = store.jobs
    job_id = jobs.enqueue("k", {"n": 1})
    assert jobs.get(job_id).state == "pending"

    tenure_tables = target.tenure_tables()
    assert any("job" in t and "checkpoint" not in t for t in tenure_tables), tenure_tables
    assert any("checkpoint" in t for t in tenure_tables), tenure_tables

    # The app owns the plain names: tables called "jobs" and "checkpoints" are the app's business.
    with store.transaction() as tx:
        tx.execute("create table jobs (id integer primary key, note text)")
        tx.execute("create table checkpoints (id integer primary key)")
        tx.execute(f"insert into jobs (id, note) values ({ph(store)}, {ph(store)})", (1, "app row"))
    claim = claim1(jobs)
    jobs.checkpoints(claim.lease).save("a", 1)
    jobs.complete(claim.lease, {"ok": True})
    assert jobs.get(job_id).result == {"ok": True}
    assert target.app_count("jobs") == 1
    assert target.app_count("checkpoints") == 0


def test_2_2_record_fields_and_frozen(jobs, clock):
    """spec 2.2: a record carries every listed field and is frozen."""
    job_id = jobs.enqueue("k", {"a": 1})
    job = jobs.get(job_id)
    assert isinstance(job, tenure.Job)
    for name in JOB_FIELDS:
        assert hasattr(job, name), f"Job lacks {name}"
    assert (job.id, job.kind, job.payload, job.state) == (job_id, "k", {"a": 1}, "pending")
    with pytest.raises(AttributeError):  # dataclasses.FrozenInstanceError is an AttributeError
        job.state = "done"
    with pytest.raises(AttributeError):
        job.attempts = 9
    assert jobs.get(job_id) == job
    claim = claim1(jobs)
    with pytest.raises(AttributeError):
        claim.job.state = "done"


def test_2_3_caller_id_makes_enqueue_idempotent(jobs, clock):
    """spec 2.3: re-enqueueing an existing id changes nothing and returns the id."""
    assert jobs.enqueue("k", {"v": 1}, id="x") == "x"
    before, counts = jobs.get("x"), jobs.counts()
    clock.advance(500)
    assert jobs.enqueue("other", {"v": 2}, id="x", max_attempts=9, run_at=clock() + 10_000) == "x"
    assert jobs.get("x") == before
    assert jobs.counts() == counts


@pytest.mark.parametrize("final", ["done", "dead"])
def test_2_3_reenqueue_of_settled_id_changes_nothing(jobs, clock, final):
    """spec 2.3: even a done or dead job is not revived by re-enqueueing its id."""
    jobs.enqueue("k", {"v": 1}, id="x", max_attempts=1)
    lease = claim1(jobs).lease
    if final == "done":
        jobs.complete(lease, "r")
    else:
        jobs.fail(lease, "boom")
    settled, counts = jobs.get("x"), jobs.counts()
    assert settled.state == final
    clock.advance(1000)
    assert jobs.enqueue("k", {"v": 2}, id="x") == "x"
    assert jobs.get("x") == settled
    assert jobs.counts() == counts
    assert jobs.claim(["k"], owner="w") is None


def test_2_3_generated_ids_are_uuids(jobs):
    """spec 2.3: without a caller id, the id is a (distinct) UUID."""
    import uuid

    a, b = jobs.enqueue("k"), jobs.enqueue("k")
    assert a != b
    for job_id in (a, b):
        uuid.UUID(job_id)  # raises if not a UUID
        assert jobs.get(job_id).id == job_id


def test_2_4_none_payload_stays_none(jobs):
    """spec 2.4: a None payload stays None in the record and in the claim."""
    job_id = jobs.enqueue("k", None)
    assert jobs.get(job_id).payload is None
    claim = claim1(jobs)
    assert claim.job.payload is None
    jobs.complete(claim.lease)  # result None
    assert jobs.get(job_id).result is None


_ids = count()
_json_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
)
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _json_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_json_text, children, max_size=4),
    max_leaves=10,
)


@settings(
    max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(payload=_json_values, result=_json_values)
def test_2_4_payload_and_result_round_trip_json(jobs, payload, result):
    """spec 2.4: any JSON value round-trips as payload and as result."""
    n = next(_ids)
    job_id = jobs.enqueue(f"rt{n}", payload, id=f"rt-{n}")
    assert jobs.get(job_id).payload == payload
    claim = claim1(jobs, kinds=[f"rt{n}"])
    assert claim.job.payload == payload
    jobs.complete(claim.lease, result)
    assert jobs.get(job_id).result == result


def test_2_5_six_states_and_every_transition(jobs, clock):
    """spec 2.5: pending → leased → done; failed → dead; cancelled via cancel();
    counts() has exactly the six keys and follows every transition."""

    def counted(**expected):
        got = jobs.counts()
        assert set(got) == STATES
        assert got == {s: expected.get(s, 0) for s in STATES}

    counted()
    a = jobs.enqueue("k", id="a", max_attempts=2)
    counted(pending=1)
    lease = claim1(jobs).lease
    assert jobs.get(a).state == "leased"
    counted(leased=1)
    jobs.fail(lease, "boom")
    assert jobs.get(a).state == "failed"
    counted(failed=1)
    clock.set(jobs.get(a).run_at)
    lease = claim1(jobs).lease
    counted(leased=1)
    jobs.fail(lease, "boom again")
    assert jobs.get(a).state == "dead"
    counted(dead=1)

    b = jobs.enqueue("k", id="b")
    counted(dead=1, pending=1)
    jobs.complete(claim1(jobs).lease, 1)
    assert jobs.get(b).state == "done"
    counted(dead=1, done=1)

    c = jobs.enqueue("k", id="c")
    assert jobs.cancel(c) is True
    assert jobs.get(c).state == "cancelled"
    counted(dead=1, done=1, cancelled=1)
    assert {jobs.get(i).state for i in "abc"} <= STATES


def test_2_6_run_at_is_the_eligibility_time(jobs, clock):
    """spec 2.6: with run_at = now + 1000, claim gives None at +999 and the job at +1000."""
    t = clock()
    job_id = jobs.enqueue("k", run_at=t + 1000)
    assert jobs.get(job_id).run_at == t + 1000
    clock.set(t + 999)
    assert jobs.claim(["k"], owner="w") is None
    assert jobs.get(job_id).attempts == 0
    clock.set(t + 1000)
    assert claim1(jobs).job.id == job_id


def test_2_6_delay_is_run_at_relative_to_now(jobs, clock):
    """spec 2.6: ``delay`` schedules through the same run_at mechanism (a
    timedelta: tenure's bare-number delay is in seconds)."""
    t = clock()
    job_id = jobs.enqueue("k", delay=timedelta(milliseconds=250))
    assert jobs.get(job_id).run_at == t + 250
    clock.set(t + 249)
    assert jobs.claim(["k"], owner="w") is None
    clock.set(t + 250)
    assert claim1(jobs).job.id == job_id


def test_2_6_default_run_at_is_now(jobs, clock):
    """spec 2.6: a job enqueued with no schedule is eligible at once."""
    job_id = jobs.enqueue("k")
    assert jobs.get(job_id).run_at == clock()
    assert claim1(jobs).job.id == job_id


def test_2_7_attempts_count_at_claim(jobs, clock):
    """spec 2.7: attempts goes up AT CLAIM, so a crashed attempt still counts."""
    job_id = jobs.enqueue("k")
    assert jobs.get(job_id).attempts == 0
    lease = claim1(jobs, lease_ms=1000).lease
    assert jobs.get(job_id).attempts == 1
    assert lease.attempt == 1
    clock.set(lease.expires_at)  # the attempt crashed: nobody settles it
    lease2 = claim1(jobs).lease
    assert jobs.get(job_id).attempts == 2
    assert lease2.attempt == 2


def test_2_8_max_attempts_per_job_default_5(jobs):
    """spec 2.8: max_attempts is 5 by default and per job otherwise."""
    assert jobs.get(jobs.enqueue("k")).max_attempts == 5
    assert jobs.get(jobs.enqueue("k", max_attempts=2)).max_attempts == 2


def test_2_9_lease_fields_only_while_leased(jobs, clock):
    """spec 2.9: lease_until and lease_owner are None in every state but leased."""

    def lease_fields(job_id):
        j = jobs.get(job_id)
        return j.state, j.lease_until, j.lease_owner

    jobs.enqueue("k", id="a", max_attempts=2)
    assert lease_fields("a") == ("pending", None, None)
    lease = claim1(jobs, owner="w1", lease_ms=700).lease
    assert lease_fields("a") == ("leased", clock() + 700, "w1")
    jobs.fail(lease, "x")
    assert lease_fields("a") == ("failed", None, None)
    clock.set(jobs.get("a").run_at)
    jobs.fail(claim1(jobs).lease, "x")
    assert lease_fields("a") == ("dead", None, None)

    jobs.enqueue("k", id="b")
    jobs.complete(claim1(jobs).lease)
    assert lease_fields("b") == ("done", None, None)

    jobs.enqueue("k", id="c")
    jobs.cancel("c")
    assert lease_fields("c") == ("cancelled", None, None)


def test_2_10_generation_moves_only_on_claim(jobs, clock):
    """spec 2.10: lease_generation starts at 0, is +1 on every claim, unchanged by
    renew and by settlement, and equals claim.lease.generation."""
    job_id = jobs.enqueue("k", max_attempts=5)
    assert jobs.get(job_id).lease_generation == 0
    c1 = claim1(jobs, lease_ms=1000)
    assert c1.lease.generation == 1 == jobs.get(job_id).lease_generation == c1.job.lease_generation
    l1b = jobs.renew(c1.lease, lease_ms=2000)
    assert l1b.generation == 1 == jobs.get(job_id).lease_generation
    clock.set(l1b.expires_at)  # expired, reclaimed
    c2 = claim1(jobs)
    assert c2.lease.generation == 2 == jobs.get(job_id).lease_generation
    jobs.fail(c2.lease, "x")
    assert jobs.get(job_id).lease_generation == 2
    clock.set(jobs.get(job_id).run_at)
    c3 = claim1(jobs)
    assert c3.lease.generation == 3
    jobs.complete(c3.lease)
    assert jobs.get(job_id).lease_generation == 3


def test_2_11_last_error_kept_through_retries_and_into_dead(jobs, clock):
    """spec 2.11: last_error is the last failure's message, kept while re-leased
    and after dead."""
    job_id = jobs.enqueue("k", max_attempts=2)
    assert jobs.get(job_id).last_error is None
    jobs.fail(claim1(jobs).lease, RuntimeError("boom"))
    assert jobs.get(job_id).last_error == "boom"
    clock.set(jobs.get(job_id).run_at)
    lease = claim1(jobs).lease
    assert jobs.get(job_id).state == "leased"
    assert jobs.get(job_id).last_error == "boom"
    jobs.fail(lease, "second")
    job = jobs.get(job_id)
    assert (job.state, job.last_error) == ("dead", "second")


def test_2_12_timestamps_from_store_clock(jobs, clock):
    """spec 2.12: created_at and updated_at come from the injected clock, and
    updated_at moves on each transition."""
    t0 = clock()
    job_id = jobs.enqueue("k", max_attempts=3)
    job = jobs.get(job_id)
    assert (job.created_at, job.updated_at) == (t0, t0)

    def at(t):
        clock.set(t)
        return t

    t = at(t0 + 11)
    lease = claim1(jobs).lease
    assert (jobs.get(job_id).created_at, jobs.get(job_id).updated_at) == (t0, t)
    t = at(t + 13)
    jobs.fail(lease, "x")
    assert jobs.get(job_id).updated_at == t
    t = at(jobs.get(job_id).run_at + 17)
    lease = claim1(jobs).lease
    assert jobs.get(job_id).updated_at == t
    t = at(t + 19)
    jobs.complete(lease, 1)
    assert (jobs.get(job_id).created_at, jobs.get(job_id).updated_at) == (t0, t)

    other = jobs.enqueue("k")
    t = at(t + 23)
    jobs.cancel(other)
    assert jobs.get(other).updated_at == t
    t = at(t + 29)
    jobs.requeue(other)
    assert jobs.get(other).updated_at == t


def test_2_13_checkpoints_keyed_by_job_id(jobs, target):
    """spec 2.13: checkpoints are saved under the job id (run id = job id) and
    read back by that run only."""
    jobs.enqueue("k", id="r1")
    jobs.enqueue("k", id="r2")
    l1, l2 = claim1(jobs).lease, claim1(jobs).lease
    assert (l1.job_id, l2.job_id) == ("r1", "r2")
    cp1, cp2 = jobs.checkpoints(l1), jobs.checkpoints(l2)
    cp1.save("a", {"x": [1, 2]})
    cp1.save("b", None)
    cp2.save("a", "other run")
    assert cp1.load() == {"a": {"x": [1, 2]}, "b": None}
    assert cp2.load() == {"a": "other run"}
    assert target.checkpoint_rows("r1") == [("a", 1), ("b", 1)]
    assert target.checkpoint_rows("r2") == [("a", 1)]


def test_2_13_checkpoints_stamped_with_the_writers_generation(jobs, clock, target):
    """spec 2.13: each checkpoint row carries the generation of the attempt that
    wrote it."""
    jobs.enqueue("k", id="r")
    for _ in range(2):
        lease = claim1(jobs, lease_ms=100).lease
        clock.set(lease.expires_at)
    lease = claim1(jobs).lease
    jobs.checkpoints(lease).save("n", 3)
    assert target.checkpoint_rows("r") == [("n", 3)]


# -- 2.14: upgrading a pre-fence database ---------------------------------------------------------

FIRST_SCHEMA = """
CREATE TABLE tenure_jobs (id TEXT PRIMARY KEY, kind TEXT NOT NULL, payload TEXT, state TEXT NOT NULL,
  run_at INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL DEFAULT 5,
  lease_until INTEGER, lease_owner TEXT, last_error TEXT, result TEXT, created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL);
CREATE TABLE tenure_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
INSERT INTO tenure_migrations VALUES (1, 'jobs', 0);
"""


def _raw_state(path):
    conn = sqlite3.connect(str(path))
    try:
        rows = conn.execute("select * from tenure_jobs order by id").fetchall()
        columns = conn.execute("pragma table_info(tenure_jobs)").fetchall()
        schema = conn.execute("select type, name, sql from sqlite_master order by type, name").fetchall()
        migrations = conn.execute("select * from tenure_migrations order by version").fetchall()
        return rows, columns, schema, migrations
    finally:
        conn.close()


def test_2_14_pre_fence_database_upgraded_in_place(engine, tmp_path, clock, rand):
    """spec 2.14: a pre-fence file is upgraded in place; its pending and leased
    rows survive, stay claimable and are fenced; reopening changes nothing."""
    if engine != "sqlite":
        pytest.skip("the pre-fence fixture is a SQLite file")
    path = tmp_path / "old.db"
    conn = sqlite3.connect(str(path))
    conn.executescript(FIRST_SCHEMA)
    conn.executemany(
        "insert into tenure_jobs (id, kind, payload, state, run_at, attempts, max_attempts, lease_until,"
        " lease_owner, last_error, result, created_at, updated_at) values (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            ("p1", "k", '{"n": 1}', "pending", 1000, 0, 5, None, None, None, None, 1000, 1000),
            ("p2", "k", "null", "pending", 2000, 0, 3, None, None, None, None, 2000, 2000),
            ("l1", "k", '{"n": 3}', "leased", 500, 1, 5, T0 + 10_000, "old-worker", None, None, 500, 600),
        ],
    )
    conn.commit()
    conn.close()

    url = f"sqlite:///{path}"
    store = tenure.connect(url, clock=clock, random=rand)
    try:
        jobs = store.jobs
        p1, p2, l1 = jobs.get("p1"), jobs.get("p2"), jobs.get("l1")
        assert (p1.state, p1.payload, p1.attempts, p1.lease_generation) == ("pending", {"n": 1}, 0, 0)
        assert (p2.state, p2.payload, p2.max_attempts) == ("pending", None, 3)
        assert (l1.state, l1.lease_owner, l1.lease_until, l1.attempts) == (
            "leased",
            "old-worker",
            T0 + 10_000,
            1,
        )
        assert jobs.counts()["pending"] == 2 and jobs.counts()["leased"] == 1
    finally:
        store.close()

    upgraded = _raw_state(path)
    column_names = {c[1] for c in upgraded[1]}
    assert {"lease_generation", "lease_token"} <= column_names, column_names
    assert [r[0] for r in upgraded[0]] == ["l1", "p1", "p2"]

    # Reopening an upgraded file changes nothing.
    store = tenure.connect(url, clock=clock, random=rand)
    try:
        store.jobs.get("p1")
    finally:
        store.close()
    assert _raw_state(path) == upgraded

    store = tenure.connect(url, clock=clock, random=rand)
    try:
        jobs = store.jobs
        # The old row's lease has no token: neither the old spelling nor a forged lease settles it.
        with refused("TN2068"):
            jobs.complete("l1", "old-worker", {"stolen": True})
        forged = tenure.Lease(
            job_id="l1", token="", generation=0, attempt=1, owner="old-worker", expires_at=T0 + 10_000
        )
        with refused(*FENCE_CODES, "TN2068"):
            jobs.complete(forged, {"stolen": True})
        assert jobs.get("l1").state == "leased" and jobs.get("l1").result is None

        c1 = claim1(jobs)
        c2 = claim1(jobs)
        assert (c1.job.id, c2.job.id) == ("p1", "p2")
        assert c1.lease.generation == 1 and c1.job.attempts == 1
        assert jobs.claim(["k"], owner="w") is None  # l1's old lease is still live
        clock.set(T0 + 10_000)
        c3 = claim1(jobs)
        assert (c3.job.id, c3.lease.generation, c3.job.attempts) == ("l1", 1, 2)
        with refused(*FENCE_CODES):
            jobs.complete(dataclasses.replace(c3.lease, token=c1.lease.token), "wrong token")
        for c in (c1, c2, c3):
            jobs.complete(c.lease, c.job.id)
        assert {i: jobs.get(i).result for i in ("p1", "p2", "l1")} == {"p1": "p1", "p2": "p2", "l1": "l1"}
    finally:
        store.close()


# -- 2.15: validation of enqueue's options ---------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "codes"),
    [
        ({"run_at": math.nan}, {"TN1001", "TN1002"}),
        ({"run_at": math.inf}, {"TN1001", "TN1002"}),
        ({"run_at": -math.inf}, {"TN1001", "TN1002"}),
        ({"run_at": "soon"}, {"TN1002"}),
        ({"max_attempts": 0}, {"TN1001"}),
        ({"max_attempts": -1}, {"TN1001"}),
        ({"max_attempts": 1.5}, {"TN1001", "TN1002"}),
        ({"max_attempts": "3"}, {"TN1002"}),
        ({"max_attempts": True}, {"TN1002"}),  # D8: bool is not an integer here
    ],
    ids=lambda v: repr(v),
)
def test_2_15_enqueue_validates_run_at_and_max_attempts(jobs, options, codes):
    """spec 2.15: run_at must be a finite epoch ms and max_attempts a positive
    integer (TypeError / ValueError); a bad value writes nothing."""
    before = jobs.counts()
    with pytest.raises((TypeError, ValueError)) as ei:
        jobs.enqueue("k", {"p": 1}, id="bad", **options)
    assert getattr(ei.value, "code", None) in codes, repr(ei.value)
    if ei.value.code == "TN1001":
        assert isinstance(ei.value, ValueError)
    else:
        assert isinstance(ei.value, TypeError)
    assert jobs.counts() == before
    assert jobs.get("bad") is None


def test_2_15_valid_options_are_stored(jobs, clock):
    """spec 2.15: the validated options are stored as given."""
    job_id = jobs.enqueue("k", run_at=clock() + 5, max_attempts=1)
    assert (jobs.get(job_id).run_at, jobs.get(job_id).max_attempts) == (clock() + 5, 1)
