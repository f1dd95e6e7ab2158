"""Helpers for the worker tests: waiting on a condition (never on a lease: tests move the injected
clock instead), an outcome recorder, a drain sampled for its attempts in flight, and the SQL
placeholder of a store's dialect."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
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


@dataclass
class SampledDrain:
    """What :func:`sampled_drain` saw."""

    #: ``payload["i"]`` of every handler call, in call order.
    seen: list[int] = field(default_factory=list)
    #: The most attempts in flight (``stats()["in_flight"]``) any sample read.
    peak: int = 0
    #: The settler threads running right after ``start()``.
    settlers: set[str] = field(default_factory=set)
    #: The threads ``on_outcome`` was called on: those that settled something.
    settled_on: set[str] = field(default_factory=set)
    #: The worker's stats after it stopped.
    stats: dict[str, Any] = field(default_factory=dict)


def sampled_drain(store, make_worker, n: int, slow_share: float, slow_s: float, timeout: float,
                  **options: Any) -> SampledDrain:
    """Enqueue ``n`` jobs of kind ``k`` (payload ``{"i": i}``) and drain them with one worker made
    with ``options``, whose handler sleeps ``slow_s`` on a random ``slow_share`` of its calls
    (uneven handlers: batches finish at different times), while a thread started before the
    worker samples its attempts in flight until every job has settled (fails after ``timeout``
    seconds). The worker is then stopped; the test fails unless it stopped drained."""
    out = SampledDrain()
    store.jobs.enqueue_many([{"kind": "k", "payload": {"i": i}} for i in range(n)])
    done = threading.Event()

    def handler(payload, ctx):
        out.seen.append(payload["i"])
        if random.random() < slow_share:
            time.sleep(slow_s)

    def watch():
        while not done.is_set():
            out.peak = max(out.peak, w.stats()["in_flight"])
            time.sleep(0.0002)

    w = make_worker(store, {"k": handler}, on_outcome=lambda event: out.settled_on.add(threading.current_thread().name),
                    **options)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()  # first: on SQLite a drain may end before a watcher started after it samples
    w.start()
    out.settlers.update(t.name for t in threading.enumerate() if t.name.startswith("tenure-settle"))
    try:
        wait_for(lambda: w.stats()["completions"] >= n, timeout, interval=0.01, what=f"{n} completions")
    finally:
        done.set()
        watcher.join()
    assert w.stop().drained
    out.stats = w.stats()
    return out


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
