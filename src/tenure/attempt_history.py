"""The error history of a job: one bounded entry per failed attempt.

Every fenced failure (``jobs.fail``, the worker's settlement of a handler that raised, a
timeout) appends one entry to the row's ``errors`` in the same statement that settles the
attempt, so the history can never disagree with the state. An entry is a JSON object:

- ``attempt``: the attempt number (``Lease.attempt``);
- ``at``: when it was recorded (epoch ms, the store's clock);
- ``type``: the exception's class path (``builtins.KeyError``, ``myapp.errors.Throttled``), or
  None for a failure given as a plain message (``jobs.fail(lease, "text")``, a timeout);
- ``message``: ``str(exc)`` (the class name when that is empty), at most :data:`MAX_MESSAGE` chars;
- ``traceback``: the formatted traceback, at most :data:`MAX_TRACEBACK` chars (its end, where the
  raising frame is), or None;
- ``owner``: the lease owner (which worker ran it), and, from a worker, ``duration_ms``.

The list is bounded: it keeps the FIRST entry (how it started failing) and the most recent
:data:`MAX_ENTRIES` - 1; the engines trim it inside the settling statement.
"""

from __future__ import annotations

import json
import traceback as _tb
from typing import Any

from . import _sanitize
from ._validate import error_message
from .engine.rows import HISTORY_KEEP
from .records import Lease

#: Entries kept per job: the first and the most recent ``MAX_ENTRIES - 1``.
MAX_ENTRIES = HISTORY_KEEP + 1
#: Characters kept of a message (the start) and of a traceback (the end).
MAX_MESSAGE = 2_000
MAX_TRACEBACK = 8_000


def type_path(exc: BaseException) -> str:
    """The class path of an exception: ``module.QualName`` (``builtins.KeyError``)."""
    cls = type(exc)
    return f"{cls.__module__}.{cls.__qualname__}"


def format_traceback(exc: BaseException) -> str | None:
    """The exception's traceback as text, bounded to its last :data:`MAX_TRACEBACK` chars; None
    when it was never raised (no frames). Never raises."""
    if exc.__traceback__ is None:
        return None
    try:
        text = "".join(_tb.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:  # noqa: BLE001 - a broken __str__ or frame must not lose the failure
        return None
    if len(text) > MAX_TRACEBACK:
        text = "...\n" + text[-(MAX_TRACEBACK - 4) :]
    return text


def entry(error: Any, lease: Lease, now: int | None, **details: Any) -> dict[str, Any]:
    """The history entry of one failed attempt. ``error`` is the exception (or a message);
    ``now`` None means the engine's clock (filled in as None: ``at`` is then the row's time, set
    by the caller). ``details`` (``duration_ms`` ...) are added as given."""
    exc = _cause(error)
    message = error_message(error)
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    out: dict[str, Any] = {
        "attempt": lease.attempt,
        "at": now,
        "type": None if exc is None else type_path(exc),
        "message": message,
        "traceback": None if exc is None else format_traceback(exc),
        "owner": lease.owner,
    }
    out.update(details)
    # storable on every engine: no NUL (PostgreSQL's jsonb refuses \u0000), no lone surrogate
    return {k: _sanitize.storable_text(val) if isinstance(val, str) else val for k, val in out.items()}


def entry_json(error: Any, lease: Lease, now: int | None, **details: Any) -> str:
    """:func:`entry` as the JSON text the engines append."""
    return json.dumps(entry(error, lease, now, **details), ensure_ascii=False, default=str)


def _cause(error: Any) -> BaseException | None:
    """The exception a history entry describes: a :class:`tenure.Discard` made by a task's
    ``discard_on`` (or raised ``from`` another exception) describes the exception behind it."""
    if not isinstance(error, BaseException):
        return None
    from .handler_control import Control

    if isinstance(error, Control) and error.__cause__ is not None:
        return error.__cause__
    return error


def attempt_rows(job: Any) -> list[dict[str, Any]]:
    """The job's attempts as the dashboard lists them, oldest first: one row per history entry
    (``outcome`` ``failed``, or ``dead`` for the failure that ended it), then the latest attempt
    when it did not fail (``completed``, ``running`` or ``cancelled``). Each row has ``attempt``,
    ``at``, ``owner``, ``duration_ms``, ``outcome``, ``error`` and ``traceback`` (None when
    unknown). Entries dropped by the bound are not listed."""
    rows: list[dict[str, Any]] = []
    errors = list(job.errors or [])
    for i, e in enumerate(errors):
        last = i == len(errors) - 1
        outcome = "dead" if last and job.state == "dead" and e.get("attempt") == job.attempts else "failed"
        kind = e.get("type")
        rows.append(
            {
                "attempt": e.get("attempt"),
                "at": e.get("at"),
                "owner": e.get("owner"),
                "duration_ms": e.get("duration_ms"),
                "outcome": outcome,
                "error": f"{kind}: {e.get('message')}" if kind else e.get("message"),
                "traceback": e.get("traceback"),
            }
        )
    latest = errors[-1].get("attempt") if errors else 0
    if job.attempts and job.attempts != latest:
        latest_outcome = {"done": "completed", "leased": "running", "cancelled": "cancelled"}.get(job.state)
        if latest_outcome is not None:
            rows.append(
                {
                    "attempt": job.attempts,
                    "at": job.updated_at if latest_outcome != "running" else None,
                    "owner": job.lease_owner,
                    "duration_ms": None,
                    "outcome": latest_outcome,
                    "error": None,
                    "traceback": None,
                }
            )
    return rows
