"""Task arguments are checked at the call, not at run time: ``enqueue`` binds them to
the function's signature before anything is written (TN1002 naming the task and the argument),
the job context goes only where the function asks for it (``tenure.JobContext`` annotation, or an
unannotated ``ctx``) and is never an argument, and a stored plain JSON object is keyword
arguments. Rules: src/tenure/task_args.py, docs/tasks.md."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import Enum
from uuid import UUID

import pytest

import tenure
from tenure import JobContext
from tenure.errors import InvalidType
from tenure.testing import inline


@pytest.fixture
def app(engine_url):
    a = tenure.App(engine_url)
    yield a
    try:
        a.store.close(grace=1)
    except Exception:  # noqa: BLE001
        pass


def _drain(app: tenure.App, n: int) -> None:
    app.run_worker(max_jobs=n, install_signals=False, poll_interval=0.02, grace=1)


@pytest.mark.parametrize(
    ("args", "kwargs", "named"),
    [
        ((), {"too": "x"}, "'too'"),  # a typo: an unknown keyword
        ((), {"subject": "hi"}, "'to'"),  # a required argument missing
        (("a@b", "hi", "extra"), {}, "too many positional"),  # one positional too many
        (("a@b",), {"to": "a@b"}, "multiple values for argument 'to'"),
    ],
)
def test_enqueue_refuses_a_call_the_function_cannot_take_and_writes_nothing(app, args, kwargs, named):
    @app.task(name="mail.send")
    def send_email(to: str, subject: str = "") -> str:
        return to

    with pytest.raises(InvalidType) as info:
        send_email.enqueue(*args, **kwargs)
    err = info.value
    assert err.code == "TN1002" and isinstance(err, TypeError)
    assert "'mail.send'" in str(err) and named in str(err)
    with pytest.raises(InvalidType, match="'too'"):
        send_email.with_options(priority=3).enqueue(too="x")  # the same check on every enqueue path
    assert sum(app.store.jobs.counts().values()) == 0  # nothing was written
    with inline(app) as calls, pytest.raises(InvalidType, match="'mail.send'"):
        send_email.enqueue(*args, **kwargs)  # and in tests that run tasks inline
    assert calls == []


def test_the_context_goes_where_the_function_asks_for_it(app):
    """A ``JobContext`` annotation under any name; an unannotated ``ctx`` (kept for existing
    code), also as the first parameter; a ``ctx`` with another annotation is a plain argument."""

    @app.task(name="typed")
    def typed(name: str, job: JobContext) -> list:
        return [name, job.attempt, job.job.id]

    @app.task(name="legacy")
    def legacy(ctx, name: str) -> list:  # context first: the caller's positional goes to ``name``
        return [name, ctx.attempt]

    @app.task(name="plain")
    def plain(ctx: str, n: int = 1) -> str:  # a user argument that happens to be called ctx
        return ctx * n

    h1, h2, h3 = typed.enqueue("ada"), legacy.enqueue("bob"), plain.enqueue("ab", n=2)
    assert plain.signature.context is None
    _drain(app, 3)
    assert h1.result(timeout=5) == ["ada", 1, h1.id]
    assert h2.result(timeout=5) == ["bob", 1]
    assert h3.result(timeout=5) == "abab"


def test_the_context_parameter_can_never_be_passed(app):
    @app.task(name="legacy")
    def legacy(name: str, ctx) -> str:
        return name

    @app.task(name="typed")
    def typed(name: str, job: JobContext, **rest: object) -> str:
        return name

    for task, param in ((legacy, "ctx"), (typed, "job")):
        with pytest.raises(InvalidType) as info:
            task.enqueue("x", **{param: "mine"})
        assert info.value.code == "TN1002" and f"{param!r} is the job context" in str(info.value)
    with pytest.raises(InvalidType, match="too many positional"):
        legacy.enqueue("x", "mine")  # not positionally either
    assert sum(app.store.jobs.counts().values()) == 0

    with pytest.raises(InvalidType, match="only one parameter"):

        @app.task(name="twice")
        def twice(a: JobContext, b: JobContext) -> None: ...


def test_a_stored_plain_object_is_keyword_arguments(app):
    """What ``tenure enqueue KIND --payload '{"to": ...}'`` or a schedule writes: a JSON object
    that is not the ``{"args", "kwargs"}`` envelope is the keyword arguments (it used to be
    dropped, the function then called with none)."""

    @app.task(name="mail.send")
    def send_email(to: str, subject: str = "") -> list:
        return [to, subject]

    @app.task(name="add")
    def add(a: int, b: int = 0, *more: int, scale: int = 1, **extra: int) -> int:
        return (a + b + sum(more) + sum(extra.values())) * scale

    plain = app.store.jobs.enqueue("mail.send", {"to": "a@b", "subject": "hi"})
    envelope = app.store.jobs.enqueue("mail.send", {"args": ["c@d"]})
    handles = [add.enqueue(1), add.enqueue(1, 2, 3, scale=2), add.enqueue(a=5, z=1)]  # valid calls pass
    assert handles[1].get().payload == {"args": [1, 2, 3], "kwargs": {"scale": 2}}
    _drain(app, 5)
    assert app.store.jobs.get(plain).result == ["a@b", "hi"]
    assert app.store.jobs.get(envelope).result == ["c@d", ""]
    assert [h.result(timeout=5) for h in handles] == [1, 12, 6]


class Color(Enum):
    RED = "red"
    BLUE = "blue"


def test_datetime_date_decimal_uuid_and_enum_arguments_round_trip_by_annotation(app):
    """Values JSON cannot hold are stored as text for parameters annotated with their type and
    handed back as that type (they used to be refused at enqueue); any other place stays JSON."""
    when = datetime(2026, 12, 3, 9, 30, tzinfo=UTC)
    ref = uuid.UUID("12345678-1234-5678-1234-567812345678")

    @app.task(name="bill")
    def bill(
        when: datetime,
        day: date,
        amount: Decimal,
        ref: UUID,
        color: Color,
        job: JobContext,
        later: datetime | None = None,
    ) -> list:
        return [
            when == datetime(2026, 12, 3, 9, 30, tzinfo=UTC) and when.tzinfo is not None,
            type(day) is date and day == date(2026, 12, 3),
            amount == Decimal("10.10") and isinstance(amount, Decimal),
            ref == uuid.UUID("12345678-1234-5678-1234-567812345678"),
            color is Color.BLUE,
            later,
            job.attempt,
        ]

    h = bill.enqueue(when, date(2026, 12, 3), amount=Decimal("10.10"), ref=ref, color=Color.BLUE)
    assert h.get().payload == {
        "args": ["2026-12-03T09:30:00+00:00", "2026-12-03"],
        "kwargs": {"amount": "10.10", "ref": str(ref), "color": "blue"},
    }
    with pytest.raises(InvalidType, match="JSON"):
        bill.enqueue(
            when, date(2026, 12, 3), amount=Decimal(1), ref=ref, color=Color.RED, later=[when]
        )  # not top level
    with pytest.raises(InvalidType, match="JSON"):
        bill.enqueue(when, when, amount=Decimal(1), ref=ref, color=Color.RED)  # a datetime is not a date
    _drain(app, 1)
    assert h.result(timeout=5) == [True, True, True, True, True, None, 1]
    with inline(app) as calls:
        bill.enqueue(when, date(2026, 12, 3), amount=Decimal("10.10"), ref=ref, color=Color.BLUE, later=when)
    assert calls[0].result()[:6] == [True, True, True, True, True, when]  # inline decodes the same way
