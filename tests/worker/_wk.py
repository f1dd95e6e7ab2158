"""Helpers for the worker tests: waiting on a condition (never on a lease: tests move the injected
clock instead), an outcome recorder, and the SQL placeholder of a store's dialect."""

from __future__ import annotations

import threading
import time
from typing import Any


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.002, what: str = "the condition") -> Any:
    """Poll ``predicate`` until it answers something truthy (which is returned); fail after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class Outcomes:
    """An ``on_outcome`` observer that records every event (thread-safe)."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self._lock = threading.Lock()

    def __call__(self, event: dict) -> None:
        with self._lock:
            self.events.append(dict(event))

    def __len__(self) -> int:
        return len(self.events)

    def wait(self, n: int, timeout: float = 10.0) -> list[dict]:
        wait_for(lambda: len(self.events) >= n, timeout, what=f"{n} outcome(s), have {self.events}")
        return list(self.events)

    def of(self, outcome: str) -> list[dict]:
        return [e for e in self.events if e["outcome"] == outcome]


def ph(store) -> str:
    """The application-SQL placeholder of the store's dialect."""
    return "?" if store.dialect == "sqlite" else "%s"


def counter_table(store, name: str) -> None:
    """(Re)create a one-row counter table ``name(id, n)`` with ``n = 0``, through the store's own
    transaction (so it works on both engines)."""
    with store.transaction() as tx:
        tx.execute(f"DROP TABLE IF EXISTS {name}")
        tx.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
        tx.execute(f"INSERT INTO {name} (id, n) VALUES (1, 0)")


def counter_value(store, name: str) -> int:
    with store.transaction() as tx:
        return tx.execute(f"SELECT n FROM {name} WHERE id = 1").fetchone()[0]
