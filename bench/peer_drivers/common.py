"""The line protocol every peer driver speaks with ``python -m bench.peers``.

The drivers in this folder run under the peers' own virtualenv (``bench/.peers-venv``), never the
project's, and are started as scripts (``.peers-venv/bin/python bench/peer_drivers/X_driver.py``),
so they import nothing from ``bench`` or ``tenure``: only this module, found beside them.

* ``setup``: build the peer's store and queue N no-op jobs (untimed), then print one JSON line.
* ``work``: build one worker, print ``ready``, start it on ``go`` (the parent's clock starts when
  it sends that line), stop it gracefully on ``stop`` and print one JSON line: how many times the
  handler ran and on how many distinct jobs.
* ``enqueue1``: queue N no-op jobs one call each (timed), print one JSON line (:func:`enqueued`).
* ``lwork`` / ``lenqueue``: the latency pair (``bench/peers_calls.py``): a running worker whose
  handler records how long after its enqueue each job started, and an enqueuer in another process
  that sends N jobs one at a time, GAP_US apart, each carrying :func:`stamp`.
"""

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any


def say(obj: Any) -> None:
    """One line to the parent: a bare word, or JSON."""
    print(obj if isinstance(obj, str) else json.dumps(obj), flush=True)


def expect(word: str) -> None:
    """Block until the parent sends ``word`` on its own line."""
    line = sys.stdin.readline()
    if line.strip() != word:
        raise SystemExit(f"expected {word!r} from bench.peers, got {line!r}")


def handled(seen: list[Any]) -> dict[str, int]:
    """The worker's report: handler calls, and distinct jobs among them."""
    return {"handled": len(seen), "distinct": len(set(seen))}


def main(argv: list[str], setup: Callable[..., Any], work: Callable[..., Any],
         run: Callable[[Any], Any] = lambda result: result, **more: Callable[..., Any]) -> None:
    """``setup TARGET N``, ``work TARGET ARG...`` or one of ``more`` (``enqueue1``, ``lwork``,
    ``lenqueue``: see ``bench/peers_calls.py``), integer arguments; ``run`` drives what the
    command returns (``asyncio.run`` for a coroutine; nothing for a plain function)."""
    cmd, target, *rest = argv
    commands = {"setup": setup, "work": work, **more}
    if cmd not in commands:
        raise SystemExit(f"unknown command {cmd!r}")
    run(commands[cmd](target, *(int(x) for x in rest)))


def cpu_seconds() -> float:
    """This process's CPU time, every thread (user + system)."""
    t = os.times()
    return t.user + t.system


def stamp() -> int:
    """The enqueue time a latency job carries: the machine clock the handler reads too."""
    return time.time_ns()


def latency_ms(stamped: int) -> float:
    """Milliseconds from ``stamped`` (:func:`stamp`) to now."""
    return (time.time_ns() - stamped) / 1e6


def enqueued(n: int, seconds: float, cpu: float) -> None:
    """The one-by-one enqueue report."""
    say({"enqueued": n, "seconds": round(seconds, 4), "cpu_s": round(cpu, 4)})
