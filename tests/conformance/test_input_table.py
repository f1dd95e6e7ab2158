"""One verdict per input (docs/guarantees.md, "One verdict per input").

ONE table of bad inputs. Each row is fed to a SQLite store AND a PostgreSQL store; both must raise
the same exception class with the same code, the message must name the field, and nothing may be
written (the stores' whole visible state is compared before and after). Before this table, the
same input could be stored by SQLite and refused by PostgreSQL with TN0001 (``priority=2**31``,
NUL in an id), reported as TN0005 "could not reach" (a ~1 MB ``singleton_key``), or escape as a raw
``UnicodeEncodeError``/``TypeError``/``OverflowError``.

A second table holds the values AT each bound, which both engines must accept and store alike.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

import pytest

import tenure
from tenure.errors import InvalidArgument, InvalidSchedule, InvalidType, PayloadTooLarge
from tenure.records import Lease
from tests.conftest import PG_URL, empty_pg, require_pg

from ._support import Clock, Rand

HELD = "held-job"  # a job claimed once at setup; rows that need a lease use its lease
PENDING = "pending-job"
TEN_YEARS_S = 10 * 365 * 86_400


@dataclasses.dataclass
class Ctx:
    store: object
    lease: Lease

    @property
    def jobs(self):
        return self.store.jobs

    def forged(self, **changes) -> Lease:
        return dataclasses.replace(self.lease, **changes)


def _handler(payload, ctx):  # never runs: workers in this table are refused at construction
    return None


def _enq(**kw):
    return lambda c: c.jobs.enqueue("k", **kw)


def _many(items):
    return lambda c: c.jobs.enqueue_many(items)


def _worker(**kw):
    return lambda c: c.jobs.create_worker({"k": _handler}, **kw)


A1, A2, SCH = InvalidArgument, InvalidType, InvalidSchedule

#: (row id, call, exception class, code, text the message must contain: the field's name)
ROWS = [
    # -- kind / queue names ------------------------------------------------------------------------
    ("kind-int", lambda c: c.jobs.enqueue(5), A2, "TN1002", "kind"),
    ("kind-empty", lambda c: c.jobs.enqueue(""), A1, "TN1001", "kind"),
    ("kind-space", lambda c: c.jobs.enqueue("a b"), A1, "TN1001", "kind"),
    ("kind-nul", lambda c: c.jobs.enqueue("a\x00b"), A1, "TN1001", "kind"),
    ("kind-201", lambda c: c.jobs.enqueue("k" * 201), A1, "TN1001", "kind"),
    ("queue-space", _enq(queue="bad queue"), A1, "TN1001", "queue"),
    ("queue-none", _enq(queue=None), A2, "TN1002", "queue"),
    ("queue-surrogate", _enq(queue="q\ud800"), A1, "TN1001", "queue"),
    # -- payload ------------------------------------------------------------------------------------
    (
        "payload-too-large",
        lambda c: c.jobs.enqueue("k", "x" * (1 << 20)),
        PayloadTooLarge,
        "TN1003",
        "payload",
    ),
    ("payload-set", lambda c: c.jobs.enqueue("k", {1, 2}), A2, "TN1002", "payload"),
    # -- id -----------------------------------------------------------------------------------------
    ("id-int", _enq(id=123), A2, "TN1002", "job id"),
    ("id-empty", _enq(id=""), A1, "TN1001", "job id"),
    ("id-256", _enq(id="i" * 256), A1, "TN1001", "job id"),
    ("id-nul", _enq(id="a\x00b"), A1, "TN1001", "job id"),
    ("id-high-surrogate", _enq(id="a\ud800"), A1, "TN1001", "job id"),
    ("id-low-surrogate", _enq(id="\udfffz"), A1, "TN1001", "job id"),
    # -- priority: the column is a 32-bit INTEGER ---------------------------------------------------
    ("priority-2^31", _enq(priority=2**31), A1, "TN1001", "priority"),
    ("priority-below-int4", _enq(priority=-(2**31) - 1), A1, "TN1001", "priority"),
    ("priority-2^63", _enq(priority=2**63), A1, "TN1001", "priority"),
    ("priority-float", _enq(priority=1.5), A2, "TN1002", "priority"),
    ("priority-bool", _enq(priority=True), A2, "TN1002", "priority"),
    ("priority-str", _enq(priority="1"), A2, "TN1002", "priority"),
    # -- max_attempts -------------------------------------------------------------------------------
    ("max-attempts-0", _enq(max_attempts=0), A1, "TN1001", "max_attempts"),
    ("max-attempts-negative", _enq(max_attempts=-1), A1, "TN1001", "max_attempts"),
    ("max-attempts-huge", _enq(max_attempts=2**40), A1, "TN1001", "max_attempts"),
    ("max-attempts-float", _enq(max_attempts=2.0), A2, "TN1002", "max_attempts"),
    # -- delay / run_at -----------------------------------------------------------------------------
    ("delay-negative", _enq(delay=-1), A1, "TN1001", "delay"),
    ("delay-10^17", _enq(delay=10**17), A1, "TN1001", "delay"),
    ("delay-nan", _enq(delay=math.nan), A1, "TN1001", "delay"),
    ("delay-inf", _enq(delay=math.inf), A1, "TN1001", "delay"),
    ("delay-list", _enq(delay=[5]), A2, "TN1002", "delay"),
    ("delay-bool", _enq(delay=True), A2, "TN1002", "delay"),
    ("delay-text-not-a-duration", _enq(delay="5 parsecs"), A1, "TN1001", "delay"),
    ("delay-text-negative", _enq(delay="-5s"), A1, "TN1001", "delay"),
    ("timeout-text-0", _enq(timeout="0s"), A1, "TN1001", "timeout"),
    ("option-debounce-text-junk", _enq(debounce="soon"), A1, "TN1001", "debounce"),
    ("run-at-negative", _enq(run_at=-1), A1, "TN1001", "run_at"),
    ("run-at-year-10000", _enq(run_at=10**16), A1, "TN1001", "run_at"),
    ("run-at-nan", _enq(run_at=math.nan), A1, "TN1001", "run_at"),
    ("run-at-str", _enq(run_at="tomorrow"), A2, "TN1002", "run_at"),
    ("run-at-datetime-year-1", _enq(run_at=dt.datetime(1, 1, 1, tzinfo=dt.UTC)), A1, "TN1001", "run_at"),
    ("run-at-and-delay", _enq(run_at=1_700_000_000_000, delay=5), A1, "TN1001", "run_at"),
    # -- timeout / singleton_for: zero is refused, never read as "none" ----------------------------
    ("timeout-0", _enq(timeout=0), A1, "TN1001", "timeout"),
    ("timeout-0.0", _enq(timeout=0.0), A1, "TN1001", "timeout"),
    ("timeout-under-1ms", _enq(timeout=0.0001), A1, "TN1001", "timeout"),
    ("timeout-timedelta-0", _enq(timeout=dt.timedelta(0)), A1, "TN1001", "timeout"),
    ("timeout-negative", _enq(timeout=-5), A1, "TN1001", "timeout"),
    ("timeout-over-ten-years", _enq(timeout=TEN_YEARS_S + 1), A1, "TN1001", "timeout"),
    ("singleton-for-0", _enq(singleton_for=0), A1, "TN1001", "singleton_for"),
    ("singleton-for-negative", _enq(singleton_for=-1), A1, "TN1001", "singleton_for"),
    ("singleton-for-10^17", _enq(singleton_for=10**17), A1, "TN1001", "singleton_for"),
    # -- keys: text, at most 1024 UTF-8 bytes --------------------------------------------------------
    ("singleton-key-int", _enq(singleton_key=123), A2, "TN1002", "singleton_key"),
    ("singleton-key-nul", _enq(singleton_key="a\x00b"), A1, "TN1001", "singleton_key"),
    ("singleton-key-surrogate", _enq(singleton_key="a\ud83d"), A1, "TN1001", "singleton_key"),
    ("singleton-key-1025-bytes", _enq(singleton_key="x" * 1025), A1, "TN1001", "singleton_key"),
    ("singleton-key-1026-utf8-bytes", _enq(singleton_key="é" * 513), A1, "TN1001", "singleton_key"),
    ("singleton-key-1mb", _enq(singleton_key="x" * 1_000_000), A1, "TN1001", "singleton_key"),
    ("group-key-int", _enq(group_key=5), A2, "TN1002", "group_key"),
    ("group-key-nul", _enq(group_key="\x00"), A1, "TN1001", "group_key"),
    ("group-key-2000", _enq(group_key="g" * 2000), A1, "TN1001", "group_key"),
    # -- queue options given at enqueue -------------------------------------------------------------
    ("option-unknown", _enq(bogus=1), A1, "TN1001", "bogus"),
    ("option-retry-delay-negative", _enq(retry_delay=-1), A1, "TN1001", "retry_delay"),
    ("option-debounce-0", _enq(debounce=0), A1, "TN1001", "debounce"),
    ("option-retention-over-ten-years", _enq(retention=TEN_YEARS_S + 1), A1, "TN1001", "retention"),
    ("option-dead-letter-space", _enq(dead_letter="bad name"), A1, "TN1001", "dead_letter"),
    # -- enqueue_many: all validated before anything is written -------------------------------------
    ("many-int", lambda c: c.jobs.enqueue_many(5), A2, "TN1002", "enqueue_many"),
    ("many-none", lambda c: c.jobs.enqueue_many(None), A2, "TN1002", "enqueue_many"),
    ("many-str", lambda c: c.jobs.enqueue_many("kind"), A2, "TN1002", "enqueue_many"),
    ("many-dict", lambda c: c.jobs.enqueue_many({"kind": "k"}), A2, "TN1002", "enqueue_many"),
    ("many-item-int", _many([5]), A2, "TN1002", "enqueue_many"),
    ("many-item-no-kind", _many([{"payload": 1}]), A1, "TN1001", "kind"),
    ("many-second-bad", _many([{"kind": "k"}, {"kind": "k", "priority": 2**31}]), A1, "TN1001", "priority"),
    ("many-id-nul", _many([{"kind": "k", "id": "x\x00"}]), A1, "TN1001", "job id"),
    # -- reads and admin calls by id ----------------------------------------------------------------
    ("get-nul", lambda c: c.jobs.get("a\x00"), A1, "TN1001", "job id"),
    ("get-int", lambda c: c.jobs.get(5), A2, "TN1002", "job id"),
    ("get-256", lambda c: c.jobs.get("x" * 256), A1, "TN1001", "job id"),
    ("cancel-surrogate", lambda c: c.jobs.cancel("a\ud800"), A1, "TN1001", "job id"),
    ("requeue-empty", lambda c: c.jobs.requeue(""), A1, "TN1001", "job id"),
    ("checkpoints-of-nul", lambda c: c.jobs.checkpoints_of("\x00"), A1, "TN1001", "job id"),
    ("page-after-nul", lambda c: c.jobs.page(after="a\x00"), A1, "TN1001", "job id"),
    ("page-limit-0", lambda c: c.jobs.page(limit=0), A1, "TN1001", "limit"),
    ("page-limit-huge", lambda c: c.jobs.page(limit=10**9), A1, "TN1001", "limit"),
    ("page-state-unknown", lambda c: c.jobs.page(state="bogus"), A1, "TN1001", "state"),
    ("page-kind-nul", lambda c: c.jobs.page(kind="a\x00"), A1, "TN1001", "kind"),
    ("sweep-no-horizon", lambda c: c.jobs.sweep(), A2, "TN1002", "settled_before"),
    ("sweep-negative", lambda c: c.jobs.sweep(settled_before=-1), A1, "TN1001", "settled_before"),
    # -- claim ----------------------------------------------------------------------------------------
    ("claim-owner-empty", lambda c: c.jobs.claim("k", owner=""), A2, "TN1002", "owner"),
    ("claim-owner-nul", lambda c: c.jobs.claim("k", owner="o\x00"), A1, "TN1001", "owner"),
    ("claim-owner-surrogate", lambda c: c.jobs.claim("k", owner="o\udc80"), A1, "TN1001", "owner"),
    ("claim-owner-256", lambda c: c.jobs.claim("k", owner="o" * 256), A1, "TN1001", "owner"),
    ("claim-lease-10^19", lambda c: c.jobs.claim("k", owner="o", lease_ms=10**19), A1, "TN1001", "lease_ms"),
    ("claim-lease-2^63", lambda c: c.jobs.claim("k", owner="o", lease_ms=2**63), A1, "TN1001", "lease_ms"),
    ("claim-lease-0", lambda c: c.jobs.claim("k", owner="o", lease_ms=0), A1, "TN1001", "lease_ms"),
    ("claim-lease-float", lambda c: c.jobs.claim("k", owner="o", lease_ms=1.5), A2, "TN1002", "lease_ms"),
    ("claim-limit-0", lambda c: c.jobs.claim_many("k", owner="o", limit=0), A1, "TN1001", "limit"),
    ("claim-limit-huge", lambda c: c.jobs.claim_many("k", owner="o", limit=10**9), A1, "TN1001", "limit"),
    ("claim-kinds-empty", lambda c: c.jobs.claim([], owner="o"), A1, "TN1001", "kinds"),
    ("claim-kinds-nul", lambda c: c.jobs.claim(["a\x00"], owner="o"), A1, "TN1001", "kinds"),
    ("claim-queues-int", lambda c: c.jobs.claim("k", owner="o", queues=5), A2, "TN1002", "queues"),
    # -- settling calls with a held lease --------------------------------------------------------------
    ("renew-10^19", lambda c: c.jobs.renew(c.lease, 10**19), A1, "TN1001", "lease_ms"),
    ("renew-0", lambda c: c.jobs.renew(c.lease, 0), A1, "TN1001", "lease_ms"),
    ("renew-negative", lambda c: c.jobs.renew(c.lease, -5), A1, "TN1001", "lease_ms"),
    (
        "fail-backoff-base-10^20",
        lambda c: c.jobs.fail(c.lease, "x", backoff_base_ms=10**20),
        A1,
        "TN1001",
        "backoff_base_ms",
    ),
    (
        "fail-backoff-cap-negative",
        lambda c: c.jobs.fail(c.lease, "x", backoff_cap_ms=-1),
        A1,
        "TN1001",
        "backoff_cap_ms",
    ),
    (
        "fail-backoff-base-float",
        lambda c: c.jobs.fail(c.lease, "x", backoff_base_ms=1.5),
        A2,
        "TN1002",
        "backoff_base_ms",
    ),
    (
        "lease-generation-2^40",
        lambda c: c.jobs.complete(c.forged(generation=2**40)),
        A1,
        "TN1001",
        "generation",
    ),
    (
        "lease-generation-negative",
        lambda c: c.jobs.renew(c.forged(generation=-1)),
        A1,
        "TN1001",
        "generation",
    ),
    (
        "lease-generation-str",
        lambda c: c.jobs.fail(c.forged(generation="1"), "x"),
        A2,
        "TN1002",
        "generation",
    ),
    ("lease-token-nul", lambda c: c.jobs.complete(c.forged(token="t\x00")), A1, "TN1001", "token"),
    ("lease-token-int", lambda c: c.jobs.complete(c.forged(token=7)), A2, "TN1002", "token"),
    ("lease-job-id-nul", lambda c: c.jobs.complete(c.forged(job_id="a\x00")), A1, "TN1001", "job_id"),
    (
        "complete-many-token-nul",
        lambda c: c.jobs.complete_many([(c.forged(token="t\x00"), 1)]),
        A1,
        "TN1001",
        "token",
    ),
    ("complete-many-not-a-pair", lambda c: c.jobs.complete_many([c.lease]), A2, "TN1002", "complete_many"),
    (
        "fail-many-generation-2^40",
        lambda c: c.jobs.fail_many([(c.forged(generation=2**40), "x")]),
        A1,
        "TN1001",
        "generation",
    ),
    ("checkpoint-node-nul", lambda c: c.jobs.checkpoints(c.lease).save("n\x00", 1), A1, "TN1001", "node_id"),
    (
        "checkpoint-node-256",
        lambda c: c.jobs.checkpoints(c.lease).save("n" * 256, 1),
        A1,
        "TN1001",
        "node_id",
    ),
    # -- queues, fan-out, schedules --------------------------------------------------------------------
    ("queue-create-space", lambda c: c.store.queues.create("bad name"), A1, "TN1001", "queue"),
    (
        "queue-create-limit-2^31",
        lambda c: c.store.queues.create("q", concurrency_limit=2**31),
        A1,
        "TN1001",
        "concurrency_limit",
    ),
    ("queue-create-timeout-0", lambda c: c.store.queues.create("q", timeout=0), A1, "TN1001", "timeout"),
    (
        "queue-create-max-attempts-0",
        lambda c: c.store.queues.create("q", max_attempts=0),
        A1,
        "TN1001",
        "max_attempts",
    ),
    ("publish-event-nul", lambda c: c.store.publish("ev\x00"), A1, "TN1001", "event"),
    (
        "schedule-tz-localtime",
        lambda c: c.store.schedules.add("s", "* * * * *", "k", tz="localtime"),
        SCH,
        "TN4001",
        "localtime",
    ),
    (
        "schedule-tz-posixrules",
        lambda c: c.store.schedules.add("s", "* * * * *", "k", tz="posixrules"),
        SCH,
        "TN4001",
        "posixrules",
    ),
    (
        "schedule-tz-unknown",
        lambda c: c.store.schedules.add("s", "* * * * *", "k", tz="Not/AZone"),
        SCH,
        "TN4001",
        "tz",
    ),
    ("schedule-cron-bad", lambda c: c.store.schedules.add("s", "61 * * * *", "k"), SCH, "TN4001", "cron"),
    (
        "schedule-name-nul",
        lambda c: c.store.schedules.add("s\x00", "* * * * *", "k"),
        A1,
        "TN1001",
        "schedule name",
    ),
    (
        "schedule-option-timeout-0",
        lambda c: c.store.schedules.add("s", "* * * * *", "k", options={"timeout": 0}),
        A1,
        "TN1001",
        "timeout",
    ),
    # -- worker settings -------------------------------------------------------------------------------
    (
        "worker-backoff-base-over-ten-years",
        _worker(backoff_base=TEN_YEARS_S + 1),
        A1,
        "TN1001",
        "backoff_base",
    ),
    ("worker-backoff-cap-inf", _worker(backoff_cap=math.inf), A1, "TN1001", "backoff_cap"),
    ("worker-backoff-base-negative", _worker(backoff_base=-1), A1, "TN1001", "backoff_base"),
    ("worker-backoff-cap-text", _worker(backoff_cap="sixty"), A1, "TN1001", "backoff_cap"),
    ("worker-backoff-cap-list", _worker(backoff_cap=[60]), A2, "TN1002", "backoff_cap"),
    ("worker-poll-interval-nan", _worker(poll_interval=math.nan), A1, "TN1001", "poll_interval"),
    ("worker-stop-grace-huge", _worker(stop_grace=1e300), A1, "TN1001", "stop_grace"),
    ("worker-lease-10^16", _worker(lease=10**16), A1, "TN1001", "lease"),
    ("worker-lease-bool", _worker(lease=True), A2, "TN1002", "lease"),
    ("worker-option-unknown", _worker(lease_s=10), A1, "TN1001", "did you mean 'lease'"),
    ("worker-timeout-0", _worker(timeout=0), A1, "TN1001", "timeout"),
    ("worker-concurrency-0", _worker(concurrency=0), A1, "TN1001", "concurrency"),
    ("worker-owner-nul", _worker(owner="w\x00"), A1, "TN1001", "owner"),
    ("worker-owner-256", _worker(owner="w" * 256), A1, "TN1001", "owner"),
]


def _state(store) -> tuple:
    """Everything a refused call could have written, as both engines show it."""
    jobs = store.jobs
    return (
        jobs.counts(),
        jobs.page(limit=1000).items,
        jobs.checkpoints_of(HELD),
        store.queues.list(),
        store.schedules.list(),
    )


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """A SQLite store and a PostgreSQL store, each with one pending job and one claimed job."""
    urls = {
        "sqlite": f"sqlite:///{tmp_path_factory.mktemp('input_table') / 't.db'}",
        "postgres": PG_URL,
    }
    require_pg()  # skips loudly when PostgreSQL is absent
    empty_pg()
    out = {}
    for engine, url in urls.items():
        store = tenure.connect(url, clock=Clock(), random=Rand())
        store.jobs.enqueue("k", {"n": 1}, id=HELD)
        claim = store.jobs.claim("k", owner="table", lease_ms=600_000)
        assert claim.job.id == HELD
        store.jobs.enqueue("k", {"n": 2}, id=PENDING)
        out[engine] = Ctx(store, claim.lease)
    yield out
    for ctx in out.values():
        ctx.store.close()


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_one_verdict_per_input(both, row):
    """Each row: the same class and code from both engines, the field named, nothing written."""
    _, call, cls, code, field = row
    verdicts = {}
    for engine, ctx in both.items():
        before = _state(ctx.store)
        with pytest.raises(Exception) as ei:  # the class is compared below
            call(ctx)
        exc = ei.value
        verdicts[engine] = (type(exc), getattr(exc, "code", None))
        assert type(exc) is cls and exc.code == code, f"{engine}: {type(exc).__name__}: {exc}"
        assert field in str(exc), f"{engine}: the message does not name {field!r}: {exc}"
        assert _state(ctx.store) == before, f"{engine}: a refused input wrote something"
    assert verdicts["sqlite"] == verdicts["postgres"]


def test_the_table_covers_every_refusal_code():
    """The table is the documented one: every argument code appears, and rows are unique."""
    assert len({r[0] for r in ROWS}) == len(ROWS) >= 100
    assert {r[3] for r in ROWS} == {"TN1001", "TN1002", "TN1003", "TN4001"}


#: Values AT each bound: accepted by both engines and read back identically.
BOUNDARY = [
    ("priority-int4-max", {"priority": 2**31 - 1}, "priority", 2**31 - 1),
    ("priority-int4-min", {"priority": -(2**31)}, "priority", -(2**31)),
    ("id-255", {"id": "i" * 255}, "id", "i" * 255),
    ("id-unicode", {"id": "ジョブ-é-😀"}, "id", "ジョブ-é-😀"),
    ("singleton-key-1024-bytes", {"singleton_key": "é" * 512}, "singleton_key", "é" * 512),
    ("group-key-1024-bytes", {"group_key": "g" * 1024}, "group_key", "g" * 1024),
    ("timeout-1ms", {"timeout": 0.001}, "timeout_ms", 1),
    ("timeout-ten-years", {"timeout": TEN_YEARS_S}, "timeout_ms", TEN_YEARS_S * 1000),
    ("timeout-text-250ms", {"timeout": "250ms"}, "timeout_ms", 250),
    ("timeout-text-2h", {"timeout": "2h"}, "timeout_ms", 7_200_000),
    ("max-attempts-1", {"max_attempts": 1}, "max_attempts", 1),
]


@pytest.mark.parametrize("row", BOUNDARY, ids=[r[0] for r in BOUNDARY])
def test_values_at_the_bounds_are_stored_alike(both, row):
    _, kwargs, attr, want = row
    got = {}
    for engine, ctx in both.items():
        job_id = ctx.jobs.enqueue("k", **kwargs)
        got[engine] = getattr(ctx.jobs.get(job_id), attr)
        ctx.jobs.cancel(job_id)
    assert got == {"sqlite": want, "postgres": want}


def test_lease_and_backoff_at_ten_years_are_accepted(both):
    """A ten-year lease and a ten-year backoff are within bounds on both engines."""
    ten_years_ms = TEN_YEARS_S * 1000
    for ctx in both.values():
        renewed = ctx.jobs.renew(ctx.lease, ten_years_ms)
        assert renewed.expires_at == ctx.lease.expires_at - 600_000 + ten_years_ms
        ctx.lease = ctx.jobs.renew(renewed, 600_000)
        assert (
            ctx.jobs.create_worker(
                {"k": _handler}, backoff_base=TEN_YEARS_S, backoff_cap=TEN_YEARS_S, lease=TEN_YEARS_S
            ).backoff_cap_ms
            == ten_years_ms
        )
