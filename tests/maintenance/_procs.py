"""Child-process side of the maintenance tests: imported by name in spawned processes, so it stays
a plain module with no pytest dependency. Each function reports to the parent through ``out``."""

from __future__ import annotations

import time


class _Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _retry_busy(fn):
    """Call ``fn``; a classified busy store (TN0003) is retried, anything else propagates."""
    while True:
        try:
            return fn()
        except Exception as exc:
            if getattr(exc, "code", None) != "TN0003":
                raise
            time.sleep(0.001)


def fire_steps(url: str, name: str, instants: list[int], barrier, out) -> None:
    """Walk the injected clock through ``instants`` in lockstep with the other processes (a barrier
    at every step), firing due schedules at each; report how many jobs this process enqueued."""
    import tenure

    fired, error = 0, None
    try:
        clock = _Clock(instants[0])
        store = tenure.connect(url, clock=clock)
        try:
            store.jobs  # noqa: B018 - open before the race
            for t in instants:
                clock.now = t
                barrier.wait(timeout=60)
                fired += _retry_busy(store.schedules.fire_due)
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the test with it
        error = f"{type(exc).__name__}: {exc}"
    out.put((name, fired, error))


def lead_then_hang(url: str, now: int, ttl_ms: int, out) -> None:
    """Take the maintenance leadership at ``now`` (injected clock), report it, then hang until
    killed: a leader that dies without resigning."""
    import tenure

    try:
        store = tenure.connect(url, clock=_Clock(now))
        m = store.maintenance
        m.configure(leader_ttl=ttl_ms / 1000)
        out.put((m.owner, m.elect(), None))
    except Exception as exc:  # noqa: BLE001 - a child process reports any failure to the parent
        out.put((None, False, f"{type(exc).__name__}: {exc}"))
        return
    time.sleep(600)
