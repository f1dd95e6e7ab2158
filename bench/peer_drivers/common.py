"""The line protocol every peer driver speaks with ``python -m bench.peers``.

The drivers in this folder run under the peers' own virtualenv (``bench/.peers-venv``), never the
project's, and are started as scripts (``.peers-venv/bin/python bench/peer_drivers/X_driver.py``),
so they import nothing from ``bench`` or ``tenure``: only this module, found beside them.

* ``setup``: build the peer's store and queue N no-op jobs (untimed), then print one JSON line.
* ``work``: build one worker, print ``ready``, start it on ``go`` (the parent's clock starts when
  it sends that line), stop it gracefully on ``stop`` and print one JSON line: how many times the
  handler ran and on how many distinct jobs.
"""

import json
import sys
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
         run: Callable[[Any], Any] = lambda result: result) -> None:
    """``setup TARGET N`` or ``work TARGET ARG...`` (integer arguments); ``run`` drives what the
    command returns (``asyncio.run`` for a coroutine; nothing for a plain function)."""
    cmd, target, *rest = argv
    if cmd not in ("setup", "work"):
        raise SystemExit(f"unknown command {cmd!r}")
    run((setup if cmd == "setup" else work)(target, *(int(x) for x in rest)))
