"""The plain bulk path (``tenure.plain_bulk``): an ``enqueue_many`` whose items hold only
``kind``, ``payload``, ``queue`` and ``priority`` is checked as bare rows, its payloads encoded by
one encoder call and cut back apart, its queue defaults resolved once per queue, and written by
``Session.job_insert_plain`` (PostgreSQL: COPY text made by tenure; SQLite: one statement per
queue and priority). It must store exactly what the same jobs enqueued one by one store, refuse
a bad item with the same code writing nothing, and leave policy queues to the resolving path."""

from __future__ import annotations

import uuid

import pytest

import tenure
from tenure import ids as tenure_ids
from tenure.plain_bulk import _SEP

from . import _procs
from ._helpers import at_once, jobs_in, raw, refused

N = 300
RAW_COLUMNS = ("policy", "singleton_key", "singleton_on", "retry_delay_ms", "retry_backoff",
               "retry_delay_max_ms", "keep_until", "delete_after_ms", "timeout_ms", "dead_letter", "headers",
               "tags", "meta", "max_attempts", "attempts", "state")

#: Payloads whose text is easy to get wrong: escapes COPY's text format must double, control
#: characters, non-ASCII, the batch encoder's own separator (alone, twice in a row, inside a list).
ODD_PAYLOADS = [None, "tab\there", "line\nbreak\r\n", "back\\slash", "\\N", {"q": 'a "quote"'}, "é∂€ 中文 😀",
                [1.5, -0.0, 1e100, 12345678901234567890], {"nested": [[{"x": [None, True, False]}]]}, "",
                0, _SEP, _SEP, [_SEP], {"k": _SEP}, f",{_SEP},", "\u2028\x7f"]


def _nested(depth: int) -> list:
    out: list = []
    for _ in range(depth - 1):
        out = [out]
    return out


def _spec(i: int) -> dict:
    spec: dict = {"kind": f"k{i % 3}", "payload": ODD_PAYLOADS[i % len(ODD_PAYLOADS)] if i % 2 else {"i": i}}
    if i % 3:
        spec["queue"] = ("tuned", "plain")[i % 2]
    if i % 5 == 0:
        spec["priority"] = i - 50
    return spec


def _stored(store, job_id: str) -> tuple:
    job = store.jobs.get(job_id)
    keep = ("kind", "payload", "queue", "priority", "state", "attempts", "max_attempts", "run_at", "created_at")
    record = tuple(getattr(job, k, None) for k in keep)
    return record, raw(store, f"SELECT {', '.join(RAW_COLUMNS)}, payload FROM tenure_jobs WHERE id = ?", (job_id,))[0]


def _frozen_clock(store):
    """Every enqueue of ``store`` on one clock (created_at and run_at compare exactly)."""
    store.clock = lambda: 1_900_000_000_000


def test_plain_bulk_stores_what_one_by_one_stores(store):
    store.queues.create("tuned", max_attempts=3, retry_delay=2, retry_backoff=True, retry_delay_max=30,
                        timeout=5, retention=60, delete_after=120, dead_letter="dlq")
    _frozen_clock(store)
    specs = [_spec(i) for i in range(N)]
    bulk = store.jobs.enqueue_many(specs)
    single = [store.jobs.enqueue(**spec) for spec in specs]
    assert len(set(bulk)) == N and None not in bulk and bulk == sorted(bulk)
    for b, s, spec in zip(bulk, single, specs, strict=True):
        assert _stored(store, b) == _stored(store, s), (b, s, spec)
        assert store.jobs.get(b).payload == spec["payload"]


def test_plain_bulk_takes_the_plain_path(store, monkeypatch):
    """The usual bulk goes through ``Session.job_insert_plain`` (not the general or streamed
    path); a bulk into a queue with a policy does not."""
    calls = []
    with store._session() as s:
        session_type = type(s)
    real = session_type.job_insert_plain

    def spy(self, chunks, templates, now):
        calls.append(sorted(templates))
        return real(self, chunks, templates, now)

    monkeypatch.setattr(session_type, "job_insert_plain", spy)
    monkeypatch.setattr(session_type, "job_insert", lambda *a, **k: pytest.fail("job_insert on the plain path"))
    ids = store.jobs.enqueue_many([{"kind": "k", "payload": i, "queue": ("a", "b")[i % 2]} for i in range(N)])
    assert calls == [["a", "b"]] and sorted(j.id for j in jobs_in(store, "a") + jobs_in(store, "b")) == sorted(ids)
    monkeypatch.undo()
    store.queues.create("once", policy="short")
    calls.clear()
    monkeypatch.setattr(session_type, "job_insert_plain", spy)
    ids = store.jobs.enqueue_many([{"kind": "k", "payload": i, "queue": "once"} for i in range(N)])
    assert calls == [] and len(set(ids)) == 1 and len(jobs_in(store, "once")) == 1


@pytest.mark.parametrize(("bad", "code"), [
    ({"kind": "k", "payload": {"x": "y" * 300}}, "TN1003"),  # over the store's payload limit (below)
    ({"kind": "k", "payload": _nested(101)}, "TN1001"),
    ({"kind": "k", "payload": "lone \ud800 surrogate"}, "TN1004"),
    ({"kind": "k", "payload": float("inf")}, "TN1002"),
    ({"kind": "k", "payload": {1j}}, "TN1002"),
    ({"kind": "k", "queue": "bad queue"}, "TN1001"),
    ({"kind": "k", "priority": -2**31 - 1}, "TN1001"),
])
def test_a_bad_plain_item_mid_bulk_is_refused_as_one_by_one_and_writes_nothing(store, bad, code):
    store.max_payload_bytes = 256
    good = [{"kind": "k", "payload": {"i": i, "s": "é\\"}, "queue": "bulk"} for i in range(2_500)]
    with refused(code):
        store.jobs.enqueue(**bad)
    with refused(code):
        store.jobs.enqueue_many([*good, bad, *good])
    assert store.jobs.counts()["pending"] == 0
    with store.transaction() as tx:  # inside the caller's transaction: it stays usable
        before = tx.jobs.enqueue("k", queue="bulk")
        with refused(code):
            tx.jobs.enqueue_many([*good, bad])
        after = tx.jobs.enqueue("k", queue="bulk")
    assert sorted(j.id for j in jobs_in(store, "bulk")) == sorted([before, after])


def test_a_deep_payload_within_the_limit_still_goes_in(store):
    deep = {"a": [[[[{"b": [[[1]]]}]]]] * 20}  # many brackets, shallow: counted, then checked in full
    ids = store.jobs.enqueue_many([{"kind": "k", "payload": deep} for _ in range(N)])
    assert {j.payload == deep for j in map(store.jobs.get, ids)} == {True}


def test_processes_plain_bulks_race_a_singleton_queue(engine_url):
    """Four processes bulk-enqueue plain items at the same instant into a 'singleton' queue and a
    plain one: the singleton queue's jobs all carry the queue-wide key (the plain path left them
    to the resolving path) and run one at a time; the plain queue holds every job once."""
    setup = tenure.connect(engine_url)
    try:
        setup.queues.create("single", policy="singleton")
        for queue in ("plain", "single"):
            results = at_once(_procs.enqueue_bulk, (engine_url, queue, N))
            answered = sorted(i for ids, _ in results for i in ids)
            assert sorted(j.id for j in jobs_in(setup, queue)) == answered and len(set(answered)) == 4 * N
        assert raw(setup, "SELECT DISTINCT policy, singleton_key FROM tenure_jobs WHERE queue = 'single'") == [
            ("singleton", "")]
        assert len(setup.jobs.claim_many("k", owner="w", limit=10, queues=["single"])) == 1
    finally:
        setup.close()


def test_batch_ids_increase_within_a_millisecond_and_when_random_digits_repeat(monkeypatch):
    """The batch path (sorted random digits) gives way to one-by-one minting when a batch would
    not sort after the last id (same millisecond) or repeats a value: still strictly increasing."""
    now = [1_800_000_000_000 * 1_000_000]
    monkeypatch.setattr(tenure_ids.time, "time_ns", lambda: now[0])
    monkeypatch.setattr(tenure_ids, "_last", 0)  # and back after the test: later ids follow the real clock
    minted = tenure_ids.new_job_ids(1000) + tenure_ids.new_job_ids(1000)  # the same millisecond
    now[0] += 1_000_000
    minted += tenure_ids.new_job_ids(1000)  # the next: the batch path again
    monkeypatch.setattr(tenure_ids.os, "urandom", lambda n: bytes(n))  # every digit the same
    now[0] += 1_000_000
    minted += tenure_ids.new_job_ids(50)
    assert minted == sorted(minted) and len(set(minted)) == len(minted)
    parsed = [uuid.UUID(i) for i in minted]
    assert {(u.version, u.variant) for u in parsed} == {(7, uuid.RFC_4122)}
    assert all(str(u) == i for u, i in zip(parsed, minted, strict=True))
    assert {u.int >> 80 for u in parsed[2000:3000]} == {1_800_000_000_001}


@pytest.mark.parametrize("committed", [True, False])
def test_a_connection_lost_under_a_plain_bulk_falls_back_with_the_same_ids(store, monkeypatch, committed):
    """The connection breaks during the plain write, after or before its commit: the bulk is
    written again by the resolving path with the same ids, and every job is stored once."""
    if store.dialect != "postgres":
        pytest.skip("a lost connection is PostgreSQL's (SQLite has none)")
    import psycopg

    from tenure.engine.postgres.session import PostgresSession

    real = PostgresSession.job_insert_plain
    broke: list[int] = []

    def breaking(self, chunks, templates, now):
        if not broke:
            broke.append(1)
            if committed:
                real(self, chunks, templates, now)
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return real(self, chunks, templates, now)

    monkeypatch.setattr(PostgresSession, "job_insert_plain", breaking)
    ids = store.jobs.enqueue_many([{"kind": "k", "payload": i, "queue": "lost"} for i in range(N)])
    assert broke == [1] and len(set(ids)) == N
    stored = jobs_in(store, "lost")
    assert sorted(j.id for j in stored) == sorted(ids) and sorted(j.payload for j in stored) == list(range(N))
