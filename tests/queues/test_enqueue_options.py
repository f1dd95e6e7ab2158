"""The table of enqueue options (src/tenure/enqueue_options.py) on both engines: every surface
accepts exactly the options the table gives it and refuses the rest with a coded error, writing
nothing; an option added to the table reaches every surface; every option a job carries
round-trips through enqueue, enqueue_many, a task default, a queue default and a schedule."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from itertools import count
from typing import Any

import pytest

import tenure
from tenure import bulk
from tenure import enqueue_options as eo
from tenure.errors import TenureError
from tests.queues._helpers import column

#: A value each option takes on every surface that takes it (alone, with no other option).
VALID: dict[str, Any] = {
    "kind": "k", "payload": {"a": 1}, "id": "given-id", "queue": "q", "priority": 1,
    "run_at": 1_800_000_000_000, "delay": 1, "max_attempts": 2, "timeout": 5, "tags": ["t"], "meta": {"m": 1},
    "conn": None, "singleton_key": "s", "singleton_for": 60, "singleton_next_slot": False, "debounce": 5,
    "group_key": "g", "retry_delay": 1, "retry_backoff": True, "retry_delay_max": 10, "retention": 100,
    "delete_after": 100, "dead_letter": "dlq", "depends_on": [], "on_parent_failure": "run",
    "policy": "standard", "concurrency_limit": 2, "group_limit": 1, "rate_limit": "10/s",
    "group_rate_limit": "5/s", "fairness": "round_robin", "group_weights": {"g": 2},
}
_n = count()


def _app(store) -> tenure.App:
    return tenure.App(store=store)


def _noop() -> None:
    return None


#: How each surface is given ``{name: value}``; each call raises a coded refusal or takes it.
SURFACES: dict[str, Callable[[Any, dict[str, Any]], Any]] = {
    eo.ENQUEUE: lambda store, o: store.jobs.enqueue("k", None, **o),
    eo.MANY: lambda store, o: store.jobs.enqueue_many([{"kind": "k", **o}]),
    eo.TASK: lambda store, o: _app(store).task(name=f"t.{next(_n)}", **o)(_noop),
    eo.SIGNATURE: lambda store, o: _app(store).task(name=f"s.{next(_n)}")(_noop).s().set(**o),
    eo.QUEUE: lambda store, o: store.queues.create(f"q.{next(_n)}", **o),
    eo.PUBLISH: lambda store, o: store.queues.publish("ev", None, **o),
    eo.SCHEDULE: lambda store, o: store.schedules.add(f"s{next(_n)}", "0 * * * *", "k", options=o),
    eo.FILE: lambda store, o: bulk.load(store, [json.dumps({"kind": "k", **o})]),
}


def test_every_surface_of_the_table_is_exercised_here_or_introspected() -> None:
    # django and cli are read from their declarations: tests/core/test_enqueue_options.py
    assert set(SURFACES) | {eo.DJANGO, eo.CLI} == set(eo.SURFACES)
    assert set(VALID) == set(eo.OPTIONS)


def _verdict(store, surface: str, name: str) -> TenureError | None:
    try:
        SURFACES[surface](store, {name: VALID[name]})
    except TenureError as exc:
        return exc
    return None


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_a_surface_takes_exactly_the_table_s_options_and_refuses_the_rest(store, surface) -> None:
    accepted = eo.names(surface)
    wrong = []
    for name in eo.OPTIONS:
        if surface in (eo.ENQUEUE, eo.PUBLISH) and name == "payload" or surface == eo.ENQUEUE and name == "kind":
            continue  # a positional argument: a keyword of the same name is Python's TypeError
        before = store.jobs.page(limit=1000).items
        exc = _verdict(store, surface, name)
        if (exc is None) != (name in accepted):
            wrong.append(f"{name}: {'taken' if exc is None else exc!r}")
        elif exc is not None:
            assert exc.code in ("TN1001", "TN4001") and name in str(exc), repr(exc)
            assert store.jobs.page(limit=1000).items == before, f"{name} wrote something"
    assert wrong == [], f"{surface} disagrees with the table"


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_a_misspelt_option_is_one_coded_error_naming_the_nearest(store, surface) -> None:
    exc, queues = None, store.queues.list()
    try:
        SURFACES[surface](store, {"max_atempts": 3})
    except TenureError as e:
        exc = e
    assert exc is not None and exc.code == "TN1001", exc
    assert "did you mean 'max_attempts'?" in str(exc)
    assert store.jobs.page().items == [] and store.queues.list() == queues and store.schedules.list() == []


@pytest.fixture
def fake_option(monkeypatch) -> Iterator[str]:
    """An option added to the table for every surface that makes jobs (stored nowhere)."""
    fake = eo.Option("fake_option", "text", lambda x: x, "fake_column",
                     frozenset(eo.SURFACES) - {eo.QUEUE, eo.DJANGO, eo.CLI}, "spec §11", "a test's")
    options = {**eo.OPTIONS, fake.name: fake}
    monkeypatch.setattr(eo, "OPTIONS", options)
    monkeypatch.setattr(eo, "_BY_SURFACE",
                        {s: {n: o for n, o in options.items() if s in o.surfaces} for s in eo.SURFACES})
    yield fake.name


def test_an_option_added_to_the_table_reaches_every_surface(store, fake_option, monkeypatch) -> None:
    VALID[fake_option] = "x"
    try:
        taken = {s: _verdict(store, s, fake_option) for s in SURFACES if s != eo.QUEUE}
        assert taken == dict.fromkeys(taken), taken  # no surface keeps a private list
        # ... and one taken out of a surface in the table is refused there
        table = eo._BY_SURFACE
        for surface in taken:
            monkeypatch.setitem(table, surface, {n: o for n, o in table[surface].items() if n != fake_option})
            exc = _verdict(store, surface, fake_option)
            assert exc is not None and exc.code in ("TN1001", "TN4001"), (surface, exc)
    finally:
        del VALID[fake_option]


# -- round trips ------------------------------------------------------------------------------------

PARENT = "parent-job"
Enq = Callable[[], str]


def _get(store, job_id):
    return store.jobs.get(job_id)


#: option -> (the options given, what to read back given one enqueue function, what it must be).
ROUND_TRIPS: dict[str, tuple[dict[str, Any], Callable[[Any, Any, Enq], Any], Callable[[Any], Any]]] = {
    "id": ({"id": "given-id"}, lambda s, c, enq: enq(), lambda c: "given-id"),
    "queue": ({"queue": "q1"}, lambda s, c, enq: _get(s, enq()).queue, lambda c: "q1"),
    "priority": ({"priority": 7}, lambda s, c, enq: _get(s, enq()).priority, lambda c: 7),
    "run_at": ({"run_at": 1_800_000_000_000}, lambda s, c, enq: _get(s, enq()).run_at,
               lambda c: 1_800_000_000_000),
    "delay": ({"delay": 30}, lambda s, c, enq: _get(s, enq()).run_at - c(), lambda c: 30_000),
    "max_attempts": ({"max_attempts": 3}, lambda s, c, enq: _get(s, enq()).max_attempts, lambda c: 3),
    "timeout": ({"timeout": 20}, lambda s, c, enq: _get(s, enq()).timeout_ms, lambda c: 20_000),
    "tags": ({"tags": ["a", "b"]}, lambda s, c, enq: _get(s, enq()).tags, lambda c: ["a", "b"]),
    "meta": ({"meta": {"k": 1}}, lambda s, c, enq: _get(s, enq()).meta, lambda c: {"k": 1}),
    "singleton_key": ({"singleton_key": "sk"}, lambda s, c, enq: _get(s, enq()).singleton_key, lambda c: "sk"),
    "group_key": ({"group_key": "g"}, lambda s, c, enq: _get(s, enq()).group_key, lambda c: "g"),
    "singleton_for": ({"singleton_for": 60}, lambda s, c, enq: column(s, enq(), "singleton_on"),
                      lambda c: c() - c() % 60_000),
    # a second enqueue in the same bucket goes to the next bucket
    "singleton_next_slot": ({"singleton_key": "n", "singleton_for": 60, "singleton_next_slot": True},
                            lambda s, c, enq: [column(s, enq(), "singleton_on") for _ in range(2)],
                            lambda c: [c() - c() % 60_000, c() - c() % 60_000 + 60_000]),
    # a second enqueue while the first is pending is the same job
    "debounce": ({"singleton_key": "d", "debounce": 10},
                 lambda s, c, enq: (len({enq(), enq()}), column(s, enq(), "debounce_ms")), lambda c: (1, 10_000)),
    "retry_delay": ({"retry_delay": 5}, lambda s, c, enq: column(s, enq(), "retry_delay_ms"), lambda c: 5_000),
    "retry_backoff": ({"retry_backoff": True}, lambda s, c, enq: bool(column(s, enq(), "retry_backoff")),
                      lambda c: True),
    "retry_delay_max": ({"retry_delay_max": 60}, lambda s, c, enq: column(s, enq(), "retry_delay_max_ms"),
                        lambda c: 60_000),
    "retention": ({"retention": 100}, lambda s, c, enq: column(s, enq(), "keep_until"), lambda c: c() + 100_000),
    "delete_after": ({"delete_after": 3600}, lambda s, c, enq: column(s, enq(), "delete_after_ms"),
                     lambda c: 3_600_000),
    "dead_letter": ({"dead_letter": "dlq"}, lambda s, c, enq: _get(s, enq()).dead_letter, lambda c: "dlq"),
    "depends_on": ({"depends_on": [PARENT]},
                   lambda s, c, enq: [d.parent_id for d in s.jobs.dependencies(enq())], lambda c: [PARENT]),
    "on_parent_failure": ({"depends_on": [PARENT], "on_parent_failure": "run"},
                          lambda s, c, enq: [d.on_parent_failure for d in s.jobs.dependencies(enq())],
                          lambda c: ["run"]),
}


def _paths(store) -> dict[str, Callable[[str, dict[str, Any]], Enq | None]]:
    """Each way to give a job its options: answers an enqueue function, or None when the way
    does not take all of them (per the table)."""
    app = _app(store)

    def task(name: str, o: dict[str, Any]) -> Enq:
        t = app.task(name=f"task.{name}", **o)(_noop)
        return lambda: t.enqueue().id

    def queue_default(name: str, o: dict[str, Any]) -> Enq:
        store.queues.create(f"qd.{name}", **o)
        return lambda: store.jobs.enqueue(f"k.{name}", None, queue=f"qd.{name}")

    def schedule(name: str, o: dict[str, Any]) -> Enq:
        store.schedules.add(f"sched.{name}", "0 * * * *", f"k.{name}", options=o)
        return lambda: store.schedules.run_now(f"sched.{name}")

    return {
        eo.ENQUEUE: lambda name, o: lambda: store.jobs.enqueue(f"k.{name}", None, **o),
        eo.MANY: lambda name, o: lambda: store.jobs.enqueue_many([{"kind": f"k.{name}", **o}])[0],
        eo.TASK: task, eo.QUEUE: queue_default, eo.SCHEDULE: schedule,
    }


@pytest.mark.parametrize("path", [eo.ENQUEUE, eo.MANY, eo.TASK, eo.QUEUE, eo.SCHEDULE])
def test_every_option_a_job_carries_round_trips(store, clock, path) -> None:
    store.jobs.enqueue("parent", None, id=PARENT)
    accepted = eo.names(path)
    tried, wrong = [], []
    for name, (given, read, expected) in ROUND_TRIPS.items():
        if not set(given) <= accepted or (path == eo.SCHEDULE and name == "id"):
            continue  # a schedule's run_now mints its own id
        enq = _paths(store)[path](name, given)
        assert enq is not None
        tried.append(name)
        got, want = read(store, clock, enq), expected(clock)
        if got != want:
            wrong.append(f"{name}: {got!r} != {want!r}")
    assert wrong == []
    skipped = {"id"} if path == eo.SCHEDULE else set()
    assert set(tried) == (accepted & set(ROUND_TRIPS)) - skipped


def test_the_round_trips_cover_every_option_a_job_stores() -> None:
    job_options = {o.name for s in (eo.ENQUEUE, eo.MANY) for o in eo.on(s).values() if o.check is not None}
    assert job_options == set(ROUND_TRIPS)
    assert all(name in given for name, (given, _, _) in ROUND_TRIPS.items())


def test_a_queue_default_is_the_table_s_verdict_too(store) -> None:
    # the same option, refused the same way as a job option and as a queue default
    for surface in (eo.ENQUEUE, eo.QUEUE):
        try:
            SURFACES[surface](store, {"retry_delay_max": 0})
        except TenureError as exc:
            assert exc.code == "TN1001" and "retry_delay_max" in str(exc)
        else:
            raise AssertionError(f"{surface} took retry_delay_max=0")


def test_an_option_given_as_none_is_an_option_not_given(store) -> None:
    absent = {name: None for name in eo.names(eo.MANY) if name not in ("kind", "queue", "priority")}
    job_id = store.jobs.enqueue_many([{"kind": "k", **absent}])[0]
    job = store.jobs.get(job_id)
    assert job is not None and job.payload is None and job.max_attempts == 5 and job.run_at is not None


@pytest.mark.parametrize(("surface", "bad"), [
    (eo.TASK, {"max_attempts": 0}), (eo.TASK, {"timeout": -1}), (eo.TASK, {"dead_letter": "no spaces"}),
    (eo.SIGNATURE, {"priority": "high"}), (eo.SIGNATURE, {"on_parent_failure": "shrug"}),
])
def test_a_bad_default_is_refused_where_it_is_declared(store, surface, bad) -> None:
    with pytest.raises(TenureError) as info:
        SURFACES[surface](store, bad)
    assert info.value.code in ("TN1001", "TN1002") and next(iter(bad)) in str(info.value)


def test_with_options_checks_each_value_too(store) -> None:
    task = _app(store).task(name="with.options")(_noop)
    with pytest.raises(TenureError) as info:
        task.with_options(max_attempts=0)
    assert info.value.code == "TN1001" and "max_attempts" in str(info.value)
    assert task.with_options(max_attempts=2).options == {"max_attempts": 2}
