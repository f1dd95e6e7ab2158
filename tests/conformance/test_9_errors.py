"""spec §9: errors."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import threading
import time

import pytest

import tenure
from tenure import errors
from tenure.errors import (
    DeadlineExceeded,
    InvalidArgument,
    InvalidType,
    LeaseExpired,
    LeaseNotHeld,
    LeaseRequired,
    LeaseSuperseded,
    NestedRootCall,
    PageCancelled,
    ReadOnlyStore,
    ScopeSettled,
    StoreBusy,
    StoreClosed,
)

from ._support import claim1, refused

EXPECTED_CODES = {
    LeaseNotHeld: "TN2065",
    LeaseSuperseded: "TN2066",
    LeaseExpired: "TN2067",
    LeaseRequired: "TN2068",
    ScopeSettled: "TN2070",
    NestedRootCall: "TN2071",
    StoreClosed: "TN2063",
    ReadOnlyStore: "TN0002",
    StoreBusy: "TN0003",
    InvalidArgument: "TN1001",
    InvalidType: "TN1002",
    PageCancelled: "TN2072",
    DeadlineExceeded: "TN2075",
}


def test_9_1_one_table_of_stable_codes():
    """spec 9.1: every error has a stable .code; the fence's five codes (TN2065-
    TN2069) sit in the single table; argument errors are also TypeError / ValueError."""
    for cls, code in EXPECTED_CODES.items():
        assert cls.code == code, cls
        assert cls("x").code == code
    from tenure.errors import ResumeMismatch

    assert ResumeMismatch.code == "TN2069"
    table = errors.ERROR_TABLE
    for code in ("TN2065", "TN2066", "TN2067", "TN2068", "TN2069"):
        assert code in table, code
    for cls in [*EXPECTED_CODES, ResumeMismatch]:
        assert table[cls.code] is cls
    codes = [cls.code for cls in table.values()]
    assert len(codes) == len(set(codes))
    assert issubclass(InvalidArgument, ValueError) and issubclass(InvalidType, TypeError)
    assert issubclass(LeaseRequired, TypeError)


def test_9_1_no_refusal_returns_a_falsy_value(jobs, clock):
    """spec 9.1: where a silent False used to be, every refusal raises its code."""
    jobs.enqueue("k", id="j")
    a = claim1(jobs, lease_ms=100).lease
    clock.set(a.expires_at)
    b = claim1(jobs, lease_ms=100).lease
    refusals = [
        ("TN2066", lambda: jobs.complete(a, 1)),
        ("TN2066", lambda: jobs.fail(a, "x")),
        ("TN2066", lambda: jobs.renew(a)),
        ("TN2066", lambda: jobs.checkpoints(a).save("n", 1)),
        ("TN2065", lambda: jobs.complete(dataclasses.replace(b, job_id="nope"), 1)),
        ("TN2065", lambda: jobs.cancel("nope")),
        ("TN2065", lambda: jobs.requeue("nope")),
        ("TN2068", lambda: jobs.cancel("j")),
        ("TN2068", lambda: jobs.requeue("j")),
        ("TN2068", lambda: jobs.complete("j", "w", 1)),
    ]
    for code, call in refusals:
        with refused(code):
            call()
    clock.set(b.expires_at)
    with refused("TN2067"):
        jobs.complete(b, 1)


@pytest.mark.parametrize("kind", [3, None, b"k", ["k"]], ids=repr)
def test_9_2_non_string_kind_is_a_type_error(jobs, kind):
    """spec 9.2: a kind that is not a string is a TypeError at the call."""
    with pytest.raises(TypeError) as ei:
        jobs.enqueue(kind, {})
    assert getattr(ei.value, "code", None) == "TN1002"
    assert jobs.counts() == dict.fromkeys(jobs.counts(), 0)


def test_9_2_malformed_handler_map_and_double_start(jobs):
    """spec 9.2: a malformed handler map and a worker started twice are TypeErrors."""
    if not hasattr(jobs, "create_worker"):
        pytest.skip("store.jobs.create_worker does not exist yet")
    for handlers in ({"k": 1}, {3: lambda p, ctx: None}, ["k"]):
        with pytest.raises(TypeError):
            jobs.create_worker(handlers)
    worker = jobs.create_worker({"k": lambda payload, ctx: None})
    worker.start()
    try:
        with pytest.raises(TypeError):
            worker.start()
    finally:
        worker.stop()


# -- 9.3 / 9.5: storage classification ---------------------------------------------------------------


def _needs_sqlite(target):
    if target.engine != "sqlite":
        pytest.skip("a file lock and a read-only file are SQLite situations")


def _ro_url(target) -> str:
    return f"{target.url}?mode=ro"


def _open_read_only(target, clock, rand):
    try:
        return tenure.connect(_ro_url(target), clock=clock, random=rand)
    except errors.InvalidURL as exc:
        if os.geteuid() == 0:
            pytest.skip(f"running as root (chmod is ignored) and the sqlite URL has no ?mode=ro: {exc}")
        raise


def test_9_3_external_write_lock_is_store_busy(store, target, open_store):
    """spec 9.3: a file locked by another connection yields StoreBusy (TN0003)
    after the bounded busy timeout, never a raw sqlite3.OperationalError."""
    _needs_sqlite(target)
    store.jobs.enqueue("k", id="before-lock")
    short = open_store(busy_timeout=0.2)
    short.jobs.get("before-lock")
    locker = sqlite3.connect(str(target.path), isolation_level=None, timeout=0)
    locker.execute("begin exclusive")
    try:
        for call in (
            lambda: short.jobs.enqueue("k", id="during-lock"),
            lambda: short.jobs.claim(["k"], owner="w"),
        ):
            started = time.monotonic()
            with pytest.raises(Exception) as ei:  # classified below
                call()
            assert not isinstance(ei.value, sqlite3.Error), repr(ei.value)
            assert getattr(ei.value, "code", None) == "TN0003", repr(ei.value)
            assert isinstance(ei.value, StoreBusy)
            assert time.monotonic() - started < 5
    finally:
        locker.rollback()
        locker.close()
    assert short.jobs.enqueue("k", id="after-lock") == "after-lock"
    assert short.jobs.get("during-lock") is None


def test_9_3_read_only_file_write_is_classified(store, target, clock, rand, open_store):
    """spec 9.3: writing through a read-only store raises a coded storage error
    (TN0002), not sqlite3.OperationalError; reads still work."""
    _needs_sqlite(target)
    store.jobs.enqueue("k", id="existing")
    store.close()
    ro = _open_read_only(target, clock, rand)
    open_store.opened.append(ro)
    assert ro.jobs.get("existing").state == "pending"
    with pytest.raises(Exception) as ei:  # classified below
        ro.jobs.enqueue("k", id="new")
    assert not isinstance(ei.value, sqlite3.Error), repr(ei.value)
    assert getattr(ei.value, "code", None) == "TN0002", repr(ei.value)


def test_9_4_closed_store_raises_its_own_code(store, clock):
    """spec 9.4: after close(), every call raises StoreClosed (TN2063) itself, not
    wrapped in another classification."""
    jobs = store.jobs
    jobs.enqueue("k", id="j")
    lease = claim1(jobs).lease
    store.close()
    calls = {
        "enqueue": lambda: jobs.enqueue("k"),
        "get": lambda: jobs.get("j"),
        "claim": lambda: jobs.claim(["k"], owner="w"),
        "complete": lambda: jobs.complete(lease, 1),
        "fail": lambda: jobs.fail(lease, "x"),
        "renew": lambda: jobs.renew(lease),
        "checkpoint": lambda: jobs.checkpoints(lease).save("n", 1),
        "counts": lambda: jobs.counts(),
        "page": lambda: jobs.page(),
        "cancel": lambda: jobs.cancel("j", lease=lease),
        "requeue": lambda: jobs.requeue("j"),
        "sweep": lambda: jobs.sweep(settled_before=clock()),
        "transaction": lambda: store.transaction().__enter__(),
        "store.jobs": lambda: store.jobs.enqueue("k"),
    }
    for name, call in calls.items():
        with pytest.raises(Exception) as ei:  # classified below
            call()
        assert type(ei.value) is StoreClosed, f"{name}: {ei.value!r}"
        assert ei.value.code == "TN2063"


def test_9_5_read_only_store_without_queue_tables(engine, tmp_path, clock, rand):
    """spec 9.5: on a read-only database that has no queue tables, the first use of
    store.jobs raises ReadOnlyStore (TN0002) naming the cause, not a raw driver error."""
    if engine != "sqlite":
        pytest.skip("a read-only file is a SQLite situation")
    path = tmp_path / "app.db"
    conn = sqlite3.connect(str(path))
    conn.execute("create table app_things (id integer primary key)")
    conn.commit()
    conn.close()
    url = f"sqlite:///{path}?mode=ro"
    try:
        ro = tenure.connect(url, clock=clock, random=rand)
    except errors.InvalidURL as exc:
        if os.geteuid() == 0:
            pytest.skip(f"running as root (chmod is ignored) and the sqlite URL has no ?mode=ro: {exc}")
        raise
    try:
        with pytest.raises(Exception) as ei:  # classified below
            ro.jobs.counts()
        assert not isinstance(ei.value, sqlite3.Error), repr(ei.value)
        assert getattr(ei.value, "code", None) == "TN0002", repr(ei.value)
        assert "read" in str(ei.value).lower() and "only" in str(ei.value).lower(), str(ei.value)
        with pytest.raises(ReadOnlyStore):
            ro.jobs.enqueue("k")
    finally:
        ro.close()
    conn = sqlite3.connect(str(path))
    assert [r[0] for r in conn.execute("select name from sqlite_master where type='table'")] == ["app_things"]
    conn.close()


def test_9_5_chmod_read_only_file(engine, tmp_path, clock, rand):
    """spec 9.5 (chmod variant): a 0444 file in a 0555 directory behaves like
    mode=ro. Root ignores file modes, so this only runs as an ordinary user."""
    if engine != "sqlite":
        pytest.skip("a read-only file is a SQLite situation")
    if os.geteuid() == 0:
        pytest.skip("running as root: chmod does not make a file read-only (see the ?mode=ro test)")
    d = tmp_path / "ro"
    d.mkdir()
    path = d / "app.db"
    sqlite3.connect(str(path)).close()
    path.chmod(0o444)
    d.chmod(0o555)
    try:
        ro = tenure.connect(f"sqlite:///{path}", clock=clock, random=rand)
        try:
            with pytest.raises(ReadOnlyStore):
                ro.jobs.counts()
        finally:
            ro.close()
    finally:
        d.chmod(0o755)
        path.chmod(0o644)


def test_9_6_job_failure_is_data(jobs, clock):
    """spec 9.6: a job's own failure is recorded (last_error, §4 states) and
    fail() itself returns normally."""
    job_id = jobs.enqueue("k", max_attempts=1)
    jobs.fail(claim1(jobs).lease, ValueError("bad input"))  # returns normally: the failure is data
    job = jobs.get(job_id)
    assert (job.state, job.last_error) == ("dead", "bad input")


def test_9_6_worker_never_raises_a_job_failure(jobs, clock):
    """spec 9.6: with an always-raising handler, start and stop raise nothing and
    the failure lands in last_error."""
    if not hasattr(jobs, "create_worker"):
        pytest.skip("store.jobs.create_worker does not exist yet")
    calls = threading.Event()

    def handler(payload, ctx):
        calls.set()
        raise RuntimeError("always")

    job_id = jobs.enqueue("k", max_attempts=1)
    worker = jobs.create_worker({"k": handler})
    worker.start()
    try:
        assert calls.wait(10), "the worker never ran the handler"
        deadline = time.monotonic() + 10
        while jobs.get(job_id).state != "dead" and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        worker.stop()
    job = jobs.get(job_id)
    assert (job.state, job.last_error) == ("dead", "always")
