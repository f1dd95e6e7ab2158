"""What the worker logs, and how ``tenure worker --log-level/--log-format`` sets logging up.

Everything goes through the standard :mod:`logging` module, under loggers named ``tenure.*``:

- ``tenure.jobs``: one record per settled attempt that did not simply complete — WARNING for a
  failed attempt that will be retried (with its traceback), ERROR for a job that is now dead
  (with its traceback), INFO for a snooze, a cancelled attempt and a released one, DEBUG for a
  completion. Each record carries ``job_id``, ``kind``, ``queue``, ``attempt`` and ``outcome`` as
  attributes (the JSON format prints them).
- ``tenure.worker``: lifecycle at INFO (started, stopping, stopped) and the worker's own trouble.

Configure it like any library's logging (``logging.getLogger("tenure").setLevel(...)``), or let
the CLI do it: :func:`configure` installs one handler on the ``tenure`` logger.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

jobs_log = logging.getLogger("tenure.jobs")

LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
#: Attributes of a job record that the JSON format prints when present.
JOB_FIELDS = ("job_id", "kind", "queue", "attempt", "outcome", "worker")
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _fields(job: Any, attempt: int, outcome: str, owner: str | None) -> dict[str, Any]:
    return {
        "job_id": job.id,
        "kind": job.kind,
        "queue": job.queue,
        "attempt": attempt,
        "outcome": outcome,
        "worker": owner,
    }


def _exc_info(error: Any) -> Any:
    if isinstance(error, BaseException):
        cause = error.__cause__ if error.__traceback__ is None and error.__cause__ is not None else error
        return (type(cause), cause, cause.__traceback__)
    return None


def failed(job: Any, attempt: int, error: Any, settled: Any, owner: str | None) -> None:
    """Log one failed attempt: ERROR when ``settled`` (the job's record after the failure) is dead,
    else WARNING with when it runs again. ``error`` is the exception (logged with its traceback)."""
    from . import _sanitize

    full = _sanitize.message(error)
    message = _sanitize.error_text(full)  # as last_error stores it: capped, NUL/surrogates escaped
    # a traceback would print a message too long for last_error whole: leave it to the history
    exc_info = _exc_info(error) if len(full) <= _sanitize.MAX_ERROR_CHARS else None
    if getattr(settled, "state", None) == "cancelled":  # a cancel request raced the failure
        event(
            logging.INFO,
            job,
            attempt,
            "cancelled",
            f"failed ({message}) with a cancel requested: cancelled",
            owner,
        )
        return
    if getattr(settled, "state", None) == "dead":
        jobs_log.error(
            "job %s (%s) is dead after attempt %d: %s",
            job.id,
            job.kind,
            attempt,
            message,
            exc_info=exc_info,
            extra=_fields(job, attempt, "dead", owner),
        )
        return
    run_at = getattr(settled, "run_at", None)
    when = (
        "" if run_at is None else f"; retrying at {time.strftime('%H:%M:%S', time.gmtime(run_at / 1000))} UTC"
    )
    jobs_log.warning(
        "job %s (%s) attempt %d failed: %s%s",
        job.id,
        job.kind,
        attempt,
        message,
        when,
        exc_info=exc_info,
        extra=_fields(job, attempt, "failed", owner),
    )


def event(level: int, job: Any, attempt: int, outcome: str, text: str, owner: str | None) -> None:
    """Log one other attempt outcome (``snoozed``, ``cancelled``, ``released``, ``lost``...)."""
    if jobs_log.isEnabledFor(level):
        jobs_log.log(
            level,
            "job %s (%s) attempt %d %s",
            job.id,
            job.kind,
            attempt,
            text,
            extra=_fields(job, attempt, outcome, owner),
        )


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``message``, the job fields when
    present, and ``traceback`` for a record with an exception."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in JOB_FIELDS:
            if hasattr(record, name):
                out[name] = getattr(record, name)
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


JsonFormatter.converter = time.gmtime


def configure(level: str = "INFO", fmt: str = "text", stream: Any = None) -> logging.Handler:
    """Send the ``tenure`` loggers to ``stream`` (stderr) at ``level``, as ``text`` or ``json``
    lines; answers the handler installed (replacing one this function installed before)."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {fmt!r}")
    root = logging.getLogger("tenure")
    for h in list(root.handlers):
        if getattr(h, "_tenure_cli", False):
            root.removeHandler(h)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler._tenure_cli = True  # type: ignore[attr-defined]
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        formatter = logging.Formatter(_TEXT_FORMAT)
        formatter.converter = time.gmtime
        handler.setFormatter(formatter)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
    root.propagate = False
    return handler
