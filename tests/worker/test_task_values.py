"""Dataclass arguments and plugged-in types ("Serialization"): a parameter annotated with
a dataclass is stored as a JSON object of its fields, each field through its own annotation (nested
dataclasses, lists, dicts, Optional, datetime/Decimal/...), and handed back as the dataclass; a type
registered with ``register_type`` round-trips the same way; a value nothing can store is refused at
enqueue with TN1002 naming the task and the argument, and nothing is written. Both engines."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from decimal import Decimal

import pytest

import tenure
from tenure.errors import InvalidType
from tenure.task_args import checked_payload
from tenure.task_values import _REGISTERED, register_type


class Money:
    """A user type tenure knows nothing about."""

    def __init__(self, cents: int, currency: str) -> None:
        self.cents, self.currency = cents, currency

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and (self.cents, self.currency) == (other.cents, other.currency)


@dataclasses.dataclass(frozen=True)
class Line:
    sku: str
    price: Decimal


@dataclasses.dataclass(frozen=True)
class Order:
    id: int
    at: datetime
    lines: list[Line]
    total: Money
    note: str | None = None


@pytest.fixture
def money():
    register_type(Money, encode=lambda m: {"cents": m.cents, "currency": m.currency},
                  decode=lambda d: Money(d["cents"], d["currency"]))
    yield
    _REGISTERED.pop(Money, None)


@pytest.fixture
def app(engine_url, money):
    a = tenure.App(engine_url)
    yield a
    a.store.close(grace=1)


ORDER = Order(7, datetime(2026, 12, 3, 9, 30, tzinfo=UTC), [Line("a", Decimal("1.50")), Line("b", Decimal("2"))],
              Money(350, "EUR"))


def test_a_dataclass_argument_round_trips_by_its_fields_annotations(app):
    @app.task(name="shop.place")
    def place(order: Order, tips: dict[str, Money] | None = None, extra: list[Order] | None = None) -> list:
        return [order == ORDER, type(order.lines[0].price).__name__, order.at.tzinfo is not None,
                {k: (type(m).__name__, m.cents) for k, m in (tips or {}).items()}, extra[0] == ORDER if extra else None]

    handle = place.enqueue(ORDER, tips={"x": Money(5, "USD")}, extra=[ORDER])
    stored = handle.get().payload
    assert stored["args"][0] == {"id": 7, "at": "2026-12-03T09:30:00+00:00",
                                 "lines": [{"sku": "a", "price": "1.50"}, {"sku": "b", "price": "2"}],
                                 "total": {"cents": 350, "currency": "EUR"}, "note": None}
    assert stored["kwargs"]["tips"] == {"x": {"cents": 5, "currency": "USD"}}
    app.run_worker(max_jobs=1, install_signals=False, poll_interval=0.02, grace=1)
    ok, price_type, aware, tips, extra = handle.result(timeout=5)
    assert (ok, price_type, aware, extra) == (True, "Decimal", True, True)
    assert tips == {"x": ["Money", 5]}  # dict[str, Money]: each value decoded by the registered type


def test_the_result_of_the_round_trip_in_the_task(app):
    seen: list = []

    @app.task(name="shop.total")
    def total(order: Order, tip: Money | None = None) -> str:
        seen.append((order, tip))
        return f"{sum(line.price for line in order.lines)} {order.total.currency} {tip.cents if tip else 0}"

    handle = total.enqueue(ORDER, tip=Money(25, "EUR"))
    app.run_worker(max_jobs=1, install_signals=False, poll_interval=0.02, grace=1)
    assert handle.result(timeout=5) == "3.50 EUR 25"
    assert seen == [(ORDER, Money(25, "EUR"))]


def test_a_value_nothing_can_store_is_refused_naming_the_argument(app):
    @app.task(name="shop.note")
    def note(order: Order, label: str = "") -> None: ...

    with pytest.raises(InvalidType, match=r"task 'shop.note': argument 'label' cannot be stored") as info:
        note.enqueue(ORDER, label={1, 2})
    assert info.value.code == "TN1002"
    with pytest.raises(InvalidType, match="argument 'order' cannot be stored"):
        note.enqueue(dataclasses.replace(ORDER, note=object()))  # a field JSON cannot hold
    assert sum(app.store.jobs.counts().values()) == 0  # nothing was written


def test_the_cli_json_form_of_a_dataclass_is_checked_with_the_app(app):
    @app.task(name="shop.ship")
    def ship(order: Order) -> None: ...

    good = {"order": {"id": 1, "at": "2026-01-01T00:00:00+00:00", "lines": [], "total": {"cents": 0, "currency": "EUR"}}}
    assert checked_payload(app, "shop.ship", good)["kwargs"]["order"]["id"] == 1
    with pytest.raises(InvalidType, match="does not parse"):
        checked_payload(app, "shop.ship", {"order": {"id": 1, "typo": 2}})


def test_register_type_takes_a_class_and_callables():
    with pytest.raises(TypeError):
        register_type("Money", encode=str, decode=str)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        register_type(Money, encode=None, decode=str)  # type: ignore[arg-type]
