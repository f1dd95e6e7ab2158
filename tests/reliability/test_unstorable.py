"""Liveness: every outcome settles, and what enqueue accepts a worker can decode (items
2, 3 and 7; docs/guarantees.md, "Liveness: every outcome settles"). Both engines.

A failure message with a NUL or a lone surrogate, a result the store cannot hold, a 50 MB message,
a row foreign SQL made undecodable: each settles (within ``max_attempts``), never blocks the rest
of its batch, and every listing (``get``, ``page``, ``tenure jobs list/show``, the dashboard's
jobs API) still shows the job.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import pytest
from click.testing import CliRunner

import tenure
from tenure._sanitize import MAX_ERROR_CHARS, MAX_JSON_DEPTH
from tenure.errors import InvalidArgument, UnstorableValue
from tenure.records import Undecodable


def _deep(n: int) -> list:
    value: list = []
    for _ in range(n - 1):
        value = [value]
    return value


def _depth(value) -> int:
    d = 0
    while isinstance(value, list):
        d, value = d + 1, value[0] if value else None
    return d


class _Run:
    """A started worker over ``store`` with an outcome recorder; stopped by :meth:`stop`."""

    def __init__(self, store, handlers, **options) -> None:
        self.events: list[dict] = []
        self._lock = threading.Lock()
        options.setdefault("concurrency", 8)
        self.worker = store.jobs.create_worker(
            handlers, backoff_base=0, poll_interval=0.01, on_outcome=self._record, **options
        )
        self.worker.start()

    def _record(self, event: dict) -> None:
        with self._lock:
            self.events.append(dict(event))

    def stop(self) -> None:
        self.worker.stop(grace=2)


def _wait(predicate, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def _settled(store, ids) -> bool:
    return all(store.jobs.get(i).state in ("done", "dead") for i in ids)


def _sql(store, sql: str, *params) -> None:
    """Foreign SQL on the store's own database (``?`` placeholders, either dialect)."""
    if store.dialect != "sqlite":
        sql = sql.replace("?", "%s")
    with store.transaction() as tx:
        tx.execute(sql, params)


def _listings_work(store, url: str) -> list:
    """Every way an operator lists jobs answers, and shows every job: page(), get(), the CLI's
    ``jobs list``/``jobs show`` and the dashboard's jobs API and page."""
    from tenure.cli import main

    items = store.jobs.page(limit=1000).items
    for job in items:
        assert store.jobs.get(job.id) is not None
    runner = CliRunner()
    listed = runner.invoke(main, ["jobs", "list", "--url", url, "--json", "--limit", "1000"])
    assert listed.exit_code == 0, listed.output
    assert {j["id"] for j in json.loads(listed.output)["items"]} == {j.id for j in items}
    table = runner.invoke(main, ["jobs", "list", "--url", url])
    assert table.exit_code == 0, table.output
    for job in items:
        shown = runner.invoke(main, ["jobs", "show", job.id, "--url", url])
        assert shown.exit_code == 0, shown.output
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from tenure.dashboard.app import create_app

    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        api = client.get("/api/jobs", params={"limit": 500})
        assert api.status_code == 200, api.text
        assert {j["id"] for j in api.json()["items"]} == {j.id for j in items}
        for job in items:
            assert client.get(f"/api/jobs/{job.id}").status_code == 200
        assert client.get("/jobs").status_code == 200
    return items


# -- errors a store cannot hold as they are --------------------------------------------------


@pytest.mark.parametrize(
    "message,stored",
    [
        ("nul\x00byte", "nul\\x00byte"),
        ("lone\udc80surrogate", "lone\\udc80surrogate"),
        ("both\x00and\ud800", "both\\x00and\\ud800"),
    ],
    ids=["nul", "surrogate", "both"],
)
def test_an_unstorable_error_settles_within_max_attempts(any_store, engine_url, message, stored):
    """A handler raising an error with a NUL (PostgreSQL refuses it) or a lone surrogate (no engine
    can encode it) is retried, then dead after exactly ``max_attempts``; the other failures and
    completions of its settle batches are recorded too; listings work."""
    calls: list[str] = []

    def bad(payload, ctx):
        calls.append(payload)
        raise ValueError(message)

    def plain(payload, ctx):
        raise RuntimeError(f"plain {payload}")

    jobs = any_store.jobs
    bad_id = jobs.enqueue("bad", "b", max_attempts=2)
    plain_ids = [jobs.enqueue("plain", i, max_attempts=1) for i in range(3)]
    good_ids = [jobs.enqueue("good", i) for i in range(3)]
    run = _Run(any_store, {"bad": bad, "plain": plain, "good": lambda p, ctx: p})
    try:
        _wait(lambda: _settled(any_store, [bad_id, *plain_ids, *good_ids]), "every job to settle")
        time.sleep(0.05)  # a looping job would show more attempts by now
    finally:
        run.stop()
    job = jobs.get(bad_id)
    assert (job.state, job.attempts, job.last_error) == ("dead", 2, stored)
    assert len(calls) == 2
    for i, pid in enumerate(plain_ids):
        assert (jobs.get(pid).state, jobs.get(pid).last_error) == ("dead", f"plain {i}")
    assert [jobs.get(g).result for g in good_ids] == [0, 1, 2]
    _listings_work(any_store, engine_url)


def test_a_50_mb_error_is_stored_capped_head_and_tail(any_store):
    jobs = any_store.jobs
    jobs.enqueue("k", None, max_attempts=1)
    lease = jobs.claim("k", owner="w").lease
    huge = "HEAD " + "x" * (50 << 20) + " TAIL"
    job = jobs.fail(lease, ValueError(huge))
    stored = jobs.get(job.id).last_error
    assert job.state == "dead" and stored == job.last_error
    assert len(stored) <= MAX_ERROR_CHARS
    assert stored.startswith("HEAD xxx") and stored.endswith("xxx TAIL")
    head, marker, tail = stored.split("\n")
    cut = int(marker.removeprefix("... [").split(" ")[0])
    assert len(head) + cut + len(tail) == len(huge)  # the marker says how much was cut


def test_a_50_mb_error_from_a_handler_settles_on_a_short_lease(any_store, caplog):
    """Through the worker, with a lease far shorter than writing 50 MB would take on PostgreSQL:
    the capped message settles the attempt once, it is not reclaimed and rerun."""
    calls = []

    def huge(payload, ctx):
        calls.append(ctx.attempt)
        raise ValueError("HEAD " + "y" * (50 << 20) + " TAIL")

    job_id = any_store.jobs.enqueue("k", None, max_attempts=1)
    run = _Run(any_store, {"k": huge}, lease=2, concurrency=1)
    try:
        _wait(lambda: any_store.jobs.get(job_id).state == "dead", "the job to die")
    finally:
        run.stop()
    job = any_store.jobs.get(job_id)
    assert calls == [1] and job.attempts == 1
    assert len(job.last_error) <= MAX_ERROR_CHARS and job.last_error.endswith(" TAIL")
    logged = [r for r in caplog.records if r.name == "tenure.jobs" and getattr(r, "job_id", None) == job_id]
    assert logged and all(len(r.getMessage()) < MAX_ERROR_CHARS + 200 and r.exc_info is None for r in logged)


# -- results the store cannot hold --------------------------------------------------------------


@pytest.mark.parametrize(
    "result",
    [{"r": "x\udc80"}, {"r": object()}, _deep(MAX_JSON_DEPTH + 50)],
    ids=["lone-surrogate", "not-json", "too-deep"],
)
def test_an_unstorable_result_fails_the_attempt_with_tn1004(any_store, engine_url, result):
    calls: list[int] = []

    def handler(payload, ctx):
        calls.append(ctx.attempt)
        return result

    jobs = any_store.jobs
    job_id = jobs.enqueue("k", None, max_attempts=2)
    good = [jobs.enqueue("good", i) for i in range(4)]
    run = _Run(any_store, {"k": handler, "good": lambda p, ctx: {"n": p, "nul": "a\x00b"}})
    try:
        _wait(lambda: _settled(any_store, [job_id, *good]), "every job to settle")
        time.sleep(0.05)
    finally:
        run.stop()
    job = jobs.get(job_id)
    assert (job.state, job.attempts, job.result) == ("dead", 2, None)
    assert job.last_error.startswith("[TN1004]"), job.last_error
    assert calls == [1, 2]
    codes = [e.get("code") for e in run.events if e["job_id"] == job_id]
    assert codes == ["TN1004", "TN1004"]
    # a NUL inside a JSON string is stored escaped and reads back as it was returned
    assert [jobs.get(g).result for g in good] == [{"n": i, "nul": "a\x00b"} for i in range(4)]
    _listings_work(any_store, engine_url)
    if any_store.dialect == "sqlite":  # nothing that is not UTF-8 was committed
        conn = sqlite3.connect(engine_url.removeprefix("sqlite:///"))
        try:
            conn.execute("SELECT * FROM tenure_jobs").fetchall()
        finally:
            conn.close()


def test_a_lone_surrogate_result_is_refused_at_complete(any_store):
    """The direct API refuses it at the call (nothing written, the lease stays usable)."""
    jobs = any_store.jobs
    jobs.enqueue("k", None)
    lease = jobs.claim("k", owner="w").lease
    with pytest.raises(UnstorableValue) as info:
        jobs.complete(lease, {"r": "\ud800"})
    assert info.value.code == "TN1004" and isinstance(info.value, ValueError)
    assert jobs.get(lease.job_id).state == "leased"
    jobs.complete(lease, {"r": "fine"})
    assert jobs.get(lease.job_id).result == {"r": "fine"}


def test_one_unstorable_item_never_blocks_its_settle_batch(any_store):
    """complete_many: the storable items complete; the other attempt fails with TN1004 (answered
    with that error), whether its result was given as a value or as encoded text."""
    jobs = any_store.jobs
    for i in range(6):
        jobs.enqueue("k", i, max_attempts=3)
    leases = [c.lease for c in jobs.claim_many("k", owner="w", limit=6)]
    out = jobs.complete_many([(leases[0], 0), (leases[1], {"x": object()}), (leases[2], 2)])
    assert out[0] is None and out[2] is None and isinstance(out[1], UnstorableValue)
    out = jobs.complete_many(
        [(leases[3], '"ok"'), (leases[4], '"bad\udc80"'), (leases[5], '"ok"')], encoded=True
    )
    assert out[0] is None and out[2] is None and out[1].code == "TN1004"
    states = {lease.job_id: jobs.get(lease.job_id) for lease in leases}
    for i in (0, 2, 3, 5):
        assert states[leases[i].job_id].state == "done"
    for i in (1, 4):
        job = states[leases[i].job_id]
        assert job.state == "failed" and job.attempts == 1 and job.last_error.startswith("[TN1004]")


@pytest.fixture
def poison_trigger(any_store):
    """A trigger that makes the database itself refuse one item of a batch: a result of
    ``"poison"``, or a ``last_error`` holding a snowman. Dropped after the test."""
    if any_store.dialect == "sqlite":
        create = [
            """CREATE TRIGGER tenure_test_poison BEFORE UPDATE ON tenure_jobs
                     WHEN NEW.result = '"poison"' OR instr(NEW.last_error, '☃') > 0
                     BEGIN SELECT RAISE(ABORT, 'poisoned'); END"""
        ]
        drop = ["DROP TRIGGER IF EXISTS tenure_test_poison"]
    else:
        create = [
            """CREATE OR REPLACE FUNCTION tenure_test_poison() RETURNS trigger AS $$
                     BEGIN
                       IF NEW.result = '"poison"' OR strpos(NEW.last_error, '☃') > 0 THEN
                         RAISE EXCEPTION 'poisoned';
                       END IF;
                       RETURN NEW;
                     END $$ LANGUAGE plpgsql""",
            """CREATE TRIGGER tenure_test_poison BEFORE UPDATE ON tenure_jobs FOR EACH ROW
                     EXECUTE FUNCTION tenure_test_poison()""",
        ]
        drop = [
            "DROP TRIGGER IF EXISTS tenure_test_poison ON tenure_jobs",
            "DROP FUNCTION IF EXISTS tenure_test_poison()",
        ]
    for stmt in create:
        _sql(any_store, stmt)
    yield
    for stmt in drop:
        _sql(any_store, stmt)


def test_an_item_the_database_refuses_settles_alone(any_store, poison_trigger):
    """The database refuses one item of a settle batch (here a trigger; in life an encoding the
    server cannot hold): the others settle, and that one is failed (or, for a failure, stored
    with a plain-ASCII TN1004 message) instead of taking the batch down with it."""
    jobs = any_store.jobs
    for i in range(6):
        jobs.enqueue("k", i, max_attempts=3)
    leases = [c.lease for c in jobs.claim_many("k", owner="w", limit=6)]
    out = jobs.complete_many([(leases[0], "a"), (leases[1], "poison"), (leases[2], "c")])
    assert out[0] is None and out[2] is None and out[1].code == "TN1004"
    assert [jobs.get(lease.job_id).state for lease in leases[:3]] == ["done", "failed", "done"]
    assert jobs.get(leases[1].job_id).last_error.startswith("[TN1004]")
    res = jobs.fail_many([(leases[3], "plain"), (leases[4], "snow ☃ man"), (leases[5], "also plain")])
    assert [r.state for r in res] == ["failed"] * 3
    assert (res[0].last_error, res[2].last_error) == ("plain", "also plain")
    assert res[1].last_error.startswith("[TN1004]") and "snow \\u2603 man" in res[1].last_error


# -- payloads a worker cannot decode ---------------------------------------------------------------


def test_a_990_deep_payload_is_refused_at_enqueue(any_store):
    jobs = any_store.jobs
    for call in (
        lambda: jobs.enqueue("k", _deep(990)),
        lambda: jobs.enqueue_many([{"kind": "k", "payload": 1}, {"kind": "k", "payload": _deep(990)}]),
        lambda: jobs.enqueue("k", {"a": _deep(MAX_JSON_DEPTH)}),
    ):
        with pytest.raises(InvalidArgument) as info:
            call()
        assert info.value.code == "TN1001" and "nested" in str(info.value)
    assert sum(jobs.counts().values()) == 0
    with pytest.raises(UnstorableValue):
        jobs.enqueue("k", {"text": "\udc80"})
    # at the limit: accepted, and a worker decodes and runs it
    job_id = jobs.enqueue("k", _deep(MAX_JSON_DEPTH))
    run = _Run(any_store, {"k": lambda p, ctx: _depth(p)})
    try:
        _wait(lambda: jobs.get(job_id).state == "done", "the deep job to run")
    finally:
        run.stop()
    assert jobs.get(job_id).result == MAX_JSON_DEPTH


def test_an_undecodable_row_goes_dead_alone(any_store, engine_url):
    """Rows foreign SQL made undecodable (broken JSON; 100 000 levels of nesting): each claim
    settles them dead, alone, with TN0008, and never fails; their batch-mates run and complete;
    listings show them with an Undecodable payload."""
    jobs = any_store.jobs
    ids = [jobs.enqueue("k", {"n": i}) for i in range(6)]
    broken, deep = ids[1], ids[4]
    _sql(any_store, "UPDATE tenure_jobs SET payload = ? WHERE id = ?", '{"n": 1, "broken', broken)
    _sql(any_store, "UPDATE tenure_jobs SET payload = ? WHERE id = ?", "[" * 100_000 + "]" * 100_000, deep)
    ran: list[int] = []
    run = _Run(any_store, {"k": lambda p, ctx: ran.append(p["n"]) or p["n"]})
    try:
        _wait(lambda: _settled(any_store, ids), "every job to settle")
        time.sleep(0.05)
    finally:
        run.stop()
    assert sorted(ran) == [0, 2, 3, 5]
    for i, job_id in enumerate(ids):
        job = jobs.get(job_id)
        if job_id in (broken, deep):
            assert (job.state, job.attempts) == ("dead", 1)
            assert job.last_error.startswith("[TN0008]") and job_id in job.last_error
            assert isinstance(job.payload, Undecodable) and job.payload.reason
        else:
            assert (job.state, job.result) == ("done", i)
    assert run.worker.stats()["claim_errors"] == 0
    items = _listings_work(any_store, engine_url)
    assert len(items) == 6


def test_claim_many_answers_the_readable_rows_and_buries_the_rest(any_store):
    jobs = any_store.jobs
    ids = [jobs.enqueue("k", i, max_attempts=5) for i in range(3)]
    _sql(any_store, "UPDATE tenure_jobs SET payload = ? WHERE id = ?", "not json", ids[1])
    got = jobs.claim_many("k", owner="w", limit=10)
    assert sorted(c.job.id for c in got) == sorted([ids[0], ids[2]])
    dead = jobs.get(ids[1])
    assert (dead.state, dead.attempts, dead.max_attempts) == ("dead", 1, 5)
    assert dead.last_error.startswith("[TN0008]")
    assert jobs.claim_many("k", owner="w", limit=10) == []
    page = jobs.page()
    assert len(page.items) == 3 and isinstance(jobs.get(ids[1]).payload, Undecodable)


def test_the_decoder_marker_is_public():
    assert tenure.Undecodable is Undecodable


def test_sqlite_text_that_is_not_utf8_is_shown_and_dies_alone(tmp_path):
    """SQLite stores whatever bytes foreign SQL (or a tenure before this fix: a result with a
    lone surrogate) wrote, and the driver refuses to read text that is not UTF-8. Listings show
    such a row (its value a tenure.Undecodable), and a claim that meets one settles it dead alone
    with TN0008: its batch-mates run (the claim is undone and read again, never half-applied).
    PostgreSQL validates every text value, so this is SQLite's alone."""
    url = f"sqlite:///{tmp_path}/t.db"
    store = tenure.connect(url)
    jobs = store.jobs
    try:
        ids = [jobs.enqueue("k", {"n": i}) for i in range(5)]
        done = jobs.enqueue("old", None)
        lease = jobs.claim("old", owner="w").lease
        jobs.complete(lease, "fine")
        _sql(store, "UPDATE tenure_jobs SET payload = CAST(? AS TEXT) WHERE id = ?", b'{"n": "\xff"}', ids[2])
        _sql(store, "UPDATE tenure_jobs SET result = CAST(? AS TEXT) WHERE id = ?", b'"\xed\xb3\x80"', done)
        old = jobs.get(done)
        assert old.state == "done" and isinstance(old.result, Undecodable)
        assert old.result.reason == "the stored text is not UTF-8"
        ran: list[int] = []
        run = _Run(store, {"k": lambda p, ctx: ran.append(p["n"]) or p["n"]})
        try:
            _wait(lambda: _settled(store, ids), "every job to settle")
        finally:
            run.stop()
        assert sorted(ran) == [0, 1, 3, 4]
        bad = jobs.get(ids[2])
        assert (bad.state, bad.attempts) == ("dead", 1) and isinstance(bad.payload, Undecodable)
        assert bad.last_error.startswith("[TN0008]") and "not UTF-8" in bad.last_error
        assert run.worker.stats()["claim_errors"] == 0
        assert len(_listings_work(store, url)) == 6
        assert jobs.requeue(ids[2]) is True  # an operator's action on such a row works too
        assert jobs.cancel(ids[2]) is True
    finally:
        store.close()


def test_a_result_the_database_refuses_fails_the_attempt_in_the_worker(any_store, poison_trigger):
    """Through the worker's batched settler: the database refuses one result of a batch; the
    others complete, that attempt is reported and counted as failed with TN1004 (not as lost),
    and the job is dead after exactly max_attempts."""
    jobs = any_store.jobs
    bad = jobs.enqueue("k", "poison", max_attempts=2)
    good = [jobs.enqueue("k", f"ok{i}") for i in range(5)]
    run = _Run(any_store, {"k": lambda p, ctx: p})
    try:
        _wait(lambda: _settled(any_store, [bad, *good]), "every job to settle")
        time.sleep(0.05)
    finally:
        run.stop()
    job = jobs.get(bad)
    assert (job.state, job.attempts) == ("dead", 2) and job.last_error.startswith("[TN1004]")
    assert [jobs.get(g).result for g in good] == [f"ok{i}" for i in range(5)]
    events = [e for e in run.events if e["job_id"] == bad]
    assert [(e["outcome"], e.get("code")) for e in events] == [("failed", "TN1004")] * 2
    stats = run.worker.stats()
    assert stats["failures"] == 2 and stats["lost_settlements"] == 0


def test_an_unstorable_handler_transaction_result_fails_and_rolls_back(any_store, engine_url):
    """``tx.result`` with a lone surrogate inside ``ctx.transaction()``: the block rolls back (its
    write with it), the attempt fails with TN1004, the job is dead after max_attempts, listings
    work."""
    from tests.worker._wk import counter_table, counter_value, ph

    counter_table(any_store, "tenure_test_unstorable_tx")
    sql = f"UPDATE tenure_test_unstorable_tx SET n = n + {ph(any_store)} WHERE id = 1"

    def handler(payload, ctx):
        with ctx.transaction() as tx:
            tx.execute(sql, (1,))
            tx.result = {"r": "lone \udc80"}

    job_id = any_store.jobs.enqueue("k", max_attempts=2)
    run = _Run(any_store, {"k": handler})
    try:
        _wait(lambda: any_store.jobs.get(job_id).state == "dead", "the job to die")
    finally:
        run.stop()
    job = any_store.jobs.get(job_id)
    assert job.attempts == 2 and job.last_error.startswith("[TN1004]") and job.result is None
    assert counter_value(any_store, "tenure_test_unstorable_tx") == 0
    _listings_work(any_store, engine_url)
