"""The ``tenure`` command line: the operator's surface, over the same public API as user code.

Every command takes ``--url`` (default ``$TENURE_URL``, else ``sqlite:///tenure.db``) and
``--json``; prints tables for people and JSON for scripts; and exits with a one-line error, never a
traceback: status 2 for bad input (a usage error, a malformed value, a TN1xxx refusal), status 1
for everything else (an unreachable store, a fence refusal, a missing job). ``TENURE_DEBUG=1``
adds the traceback for bug reports. No credential is ever printed (``tenure.redact``: the store URL is
shown redacted, and every error line and debug traceback is scrubbed of the URL's secrets).

Tables use ``rich`` when it is installed (``tenure[cli]``) and stdout is a terminal; otherwise
plain aligned columns (stable for ``grep``/``awk``), so the CLI needs nothing beyond ``click``.

The package holds one module per command group (``jobs``, ``queues``, ``schedules``, ``worker``,
``stats``, ``maintain``, ``migrate``, ``dashboard``, ...); :mod:`tenure.cli.common` holds what they
share. ``tenure`` (the console script) is :func:`main`.
"""

from __future__ import annotations

# Importing each command module registers its commands on ``main``.
from . import (
    dashboard,
    demo,
    enqueue,
    jobs,
    maintain,
    migrate,
    queues,
    runs,
    schedules,
    signals,
    stats,
    worker,
)
from .common import (
    _SECRETS,
    EXIT_ERROR,
    EXIT_USAGE,
    _one_line,
    _remember_secret,
    emit_json,
    main,
    open_store,
    parse_duration,
    render_table,
)

__all__ = [
    "EXIT_ERROR", "EXIT_USAGE", "_SECRETS", "_one_line", "_remember_secret", "dashboard", "demo", "emit_json",
    "enqueue", "jobs", "main", "maintain", "migrate", "open_store", "parse_duration", "queues", "render_table",
    "runs", "schedules", "signals", "stats", "worker",
]
