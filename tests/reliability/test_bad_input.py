"""Hostile and malformed input: each refused by a coded error at the call, nothing written; SQL-
looking text is stored as data (spec 2.15, 3.13, 9.2)."""

from __future__ import annotations

import math
import reprlib

import pytest

import tenure
from tenure.errors import (
    InvalidArgument,
    InvalidType,
    LeaseRequired,
    LeaseSuperseded,
    PayloadTooLarge,
    TenureError,
    UnstorableValue,
)

EVIL = "x'); DROP TABLE tenure_jobs; --"


class NotJSON:
    pass


def _deep(n: int) -> list:
    value: list = []
    for _ in range(n - 1):
        value = [value]
    return value


BAD_ENQUEUES = [
    ({"payload": NotJSON()}, InvalidType),
    ({"payload": {"x": float("nan")}}, InvalidType),
    ({"payload": {1, 2}}, InvalidType),
    ({"payload": b"bytes"}, InvalidType),
    ({"run_at": math.nan}, InvalidArgument),
    ({"run_at": math.inf}, InvalidArgument),
    ({"run_at": -1}, InvalidArgument),
    ({"run_at": "tomorrow"}, InvalidType),
    ({"max_attempts": 0}, InvalidArgument),
    ({"max_attempts": -3}, InvalidArgument),
    ({"max_attempts": 10**12}, InvalidArgument),
    ({"max_attempts": 1.5}, InvalidType),
    ({"max_attempts": "3"}, InvalidType),
    ({"max_attempts": True}, InvalidType),
    ({"priority": 1.5}, InvalidType),
    ({"priority": 2**70}, InvalidArgument),
    ({"delay": -1}, InvalidArgument),
    ({"delay": math.nan}, InvalidArgument),
    ({"timeout": -5}, InvalidArgument),
    ({"queue": ""}, InvalidArgument),
    ({"queue": "has space"}, InvalidArgument),
    ({"queue": "q" * 500}, InvalidArgument),
    ({"queue": 7}, InvalidType),
    ({"id": ""}, InvalidArgument),
    ({"id": 12}, InvalidType),
    ({"id": "i" * 300}, InvalidArgument),
    ({"run_at": 10, "delay": 5}, InvalidArgument),
    ({"bogus_option": 1}, InvalidArgument),
    ({"payload": {"deep": _deep(990)}}, InvalidArgument),  # a worker could not decode it (TN1001)
    ({"payload": {"text": "lone \udc80"}}, UnstorableValue),  # not UTF-8 (TN1004)
    ({"payload": {"lone \ud800 key": 1}}, UnstorableValue),
]


@pytest.mark.parametrize("kwargs,exc", BAD_ENQUEUES, ids=[reprlib.repr(k)[:40] for k, _ in BAD_ENQUEUES])
def test_bad_enqueue_is_refused_and_writes_nothing(any_store, kwargs, exc):
    before = any_store.jobs.counts()
    with pytest.raises(exc) as info:
        any_store.jobs.enqueue("kind", **{"payload": {"ok": 1}, **kwargs})
    assert isinstance(info.value, TenureError) and info.value.code in ("TN1001", "TN1002", "TN1003", "TN1004")
    assert any_store.jobs.counts() == before


@pytest.mark.parametrize("kind", ["", " ", "a b", "semi;colon", "q" * 201, "é\u0000"])
def test_odd_kinds_refused(any_store, kind):
    with pytest.raises(InvalidArgument):
        any_store.jobs.enqueue(kind, None)
    with pytest.raises(InvalidType):
        any_store.jobs.enqueue(3, None)
    assert sum(any_store.jobs.counts().values()) == 0


def test_oversized_payload_has_a_documented_limit(any_store):
    with pytest.raises(PayloadTooLarge) as info:
        any_store.jobs.enqueue("k", {"blob": "x" * (1 << 20)})
    assert info.value.code == "TN1003" and isinstance(info.value, ValueError)
    small = tenure.connect(any_store.engine.describe() if any_store.dialect == "sqlite" else None,
                           max_payload_bytes=64) if any_store.dialect == "sqlite" else None
    if small is not None:
        with pytest.raises(PayloadTooLarge):
            small.jobs.enqueue("k", {"blob": "x" * 100})
        small.close()
    assert sum(any_store.jobs.counts().values()) == 0


def test_bad_enqueue_many_writes_nothing_at_all(any_store):
    with pytest.raises(InvalidArgument):
        any_store.jobs.enqueue_many([{"kind": "k", "payload": 1}, {"kind": "k", "max_attempts": 0}])
    with pytest.raises(InvalidArgument):
        any_store.jobs.enqueue_many([{"payload": 1}])
    assert sum(any_store.jobs.counts().values()) == 0


def test_sql_looking_text_is_stored_as_data(any_store):
    job_id = any_store.jobs.enqueue("k", {"q": EVIL}, id=EVIL, queue="evil_q--")
    assert job_id == EVIL
    job = any_store.jobs.get(job_id)
    assert job.payload == {"q": EVIL} and job.queue == "evil_q--"
    claim = any_store.jobs.claim("k", owner=EVIL)
    assert claim.job.lease_owner == EVIL
    any_store.jobs.fail(claim.lease, RuntimeError(EVIL))
    assert any_store.jobs.get(job_id).last_error == EVIL
    assert any_store.jobs.page(kind="k").items[0].id == job_id


def test_forged_truncated_and_foreign_leases_are_refused(any_store, tmp_path):
    job_id = any_store.jobs.enqueue("k", None)
    claim = any_store.jobs.claim("k", owner="w")
    lease = claim.lease
    forged = tenure.Lease(lease.job_id, "0" * 32, lease.generation, lease.attempt, lease.owner, lease.expires_at)
    truncated = tenure.Lease(lease.job_id, lease.token[:8], lease.generation, lease.attempt, lease.owner,
                             lease.expires_at)
    for bad in (forged, truncated):
        with pytest.raises(LeaseSuperseded) as info:
            any_store.jobs.complete(bad, 1)
        assert info.value.code == "TN2066"
    # A lease from another store: the job id there is unknown here.
    other = tenure.connect(f"sqlite:///{tmp_path}/other.db")
    other.jobs.enqueue("k", None, id="elsewhere")
    foreign = other.jobs.claim("k", owner="w").lease
    with pytest.raises(tenure.errors.LeaseNotHeld):
        any_store.jobs.complete(foreign, 1)
    other.close()
    for not_a_lease in ({"job_id": job_id, "token": lease.token}, job_id, None, 42):
        with pytest.raises(LeaseRequired) as info:
            any_store.jobs.complete(not_a_lease, 1)
        assert info.value.code == "TN2068"
    assert any_store.jobs.get(job_id).state == "leased"
    any_store.jobs.complete(lease, "ok")
    assert any_store.jobs.get(job_id).result == "ok"


def test_non_json_result_is_refused_and_the_lease_stays_usable(any_store):
    any_store.jobs.enqueue("k", None)
    claim = any_store.jobs.claim("k", owner="w")
    with pytest.raises(InvalidType):
        any_store.jobs.complete(claim.lease, NotJSON())
    assert any_store.jobs.get(claim.job.id).state == "leased"
    any_store.jobs.complete(claim.lease, {"fine": True})


def test_bad_claim_and_admin_arguments(any_store):
    with pytest.raises(InvalidType):
        any_store.jobs.claim("k", owner="")
    with pytest.raises(InvalidArgument):
        any_store.jobs.claim("k", owner="w", lease_ms=0)
    with pytest.raises(InvalidArgument):
        any_store.jobs.claim([], owner="w")
    with pytest.raises(InvalidArgument):
        any_store.jobs.page(state="bogus")
    with pytest.raises(InvalidArgument):
        any_store.jobs.page(limit=0)
    with pytest.raises(InvalidType):
        any_store.jobs.page(limit=True)
    with pytest.raises(InvalidType):
        any_store.jobs.sweep()
    with pytest.raises(InvalidArgument):
        any_store.jobs.sweep(settled_before=math.nan)
    with pytest.raises(InvalidType):
        any_store.jobs.create_worker({"k": 1})
    with pytest.raises(InvalidArgument):
        any_store.jobs.create_worker({"k": print}, concurrency=0)
    with pytest.raises(InvalidType):
        any_store.jobs.create_worker({"k": print}, concurrency="2")
    with pytest.raises(InvalidType):
        tenure.connect("sqlite:///x.db", clock=5)
    with pytest.raises(tenure.errors.InvalidURL):
        tenure.connect("mysql://root@localhost/db")
