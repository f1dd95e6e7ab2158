"""A queue's settings checked once: each option's verdict (limits, rates, fairness, policy; a
duration's is :func:`tenure.durations.ms`, through :mod:`tenure.enqueue_options`, which says which
option takes which) and the dead-letter chain without cycles."""

from __future__ import annotations

import json
from typing import Any

from . import _validate as v
from .errors import DeadLetterCycle, InvalidArgument, InvalidType
from .rate_window import parse_rate

#: The uniqueness policies, as pg-boss names them (see docs/queues.md for what each allows).
POLICIES: tuple[str, ...] = ("standard", "short", "singleton", "stately", "exclusive", "strict_fifo")

#: The fairness modes of a queue's claim across its group keys (docs/queues.md, "Fairness").
FAIRNESS: tuple[str, ...] = ("round_robin",)

_LIMIT_MAX = 1_000_000


def _flag(value: Any, what: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise InvalidType(f"{what} must be True or False, got {value!r}")


def _limit(value: Any, what: str) -> int | None:
    return v.positive_int(value, what, maximum=_LIMIT_MAX, allow_none=True)


#: Largest round-robin weight, and most groups with a weight of their own.
MAX_WEIGHT = 1_000
MAX_WEIGHTED_GROUPS = 10_000


def _weights(value: Any) -> str | None:
    """``{group_key: weight}`` (weights 1 to :data:`MAX_WEIGHT`) -> its JSON text; None clears."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidType(f"group_weights must be a dict of group key -> weight, got {type(value).__name__}")
    if len(value) > MAX_WEIGHTED_GROUPS:
        raise InvalidArgument(f"group_weights names {len(value)} groups: at most {MAX_WEIGHTED_GROUPS:,}")
    for key, weight in value.items():
        v.key(key, "a group_weights key")
        v.positive_int(weight, f"the weight of group {key!r}", maximum=MAX_WEIGHT)
    return json.dumps(dict(sorted(value.items())), separators=(",", ":"))


def _fairness(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidType(f"fairness must be a string, one of {', '.join(FAIRNESS)}, or None")
    if value not in FAIRNESS:
        raise InvalidArgument(f"unknown fairness {value!r}: one of {', '.join(FAIRNESS)}, or None")
    return value


def _rate(value: Any, what: str) -> tuple[int | None, int | None]:
    rate = parse_rate(value, what)
    return (None, None) if rate is None else (rate.limit, rate.period_ms)


def _policy(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidType(f"policy must be a string, one of {', '.join(POLICIES)}")
    if value not in POLICIES:
        raise InvalidArgument(f"unknown policy {value!r}: one of {', '.join(POLICIES)}")
    return value


def _refuse_cycle(name: str, graph: dict[str, str | None]) -> None:
    """:class:`DeadLetterCycle` when following dead-letter queues from ``name`` comes back to it:
    along such a cycle one job's copies would die and be copied forever (docs/queues.md)."""
    path, current = [name], graph.get(name)
    while current is not None and len(path) <= len(graph):
        path.append(current)
        if current == name:
            raise DeadLetterCycle(
                f"queue {name!r} cannot dead-letter to {graph[name]!r}: the dead-letter queues would form "
                f"a cycle ({' -> '.join(path)}), along which one job's copies would run forever",
                queue=name, cycle=path)
        current = graph.get(current)
