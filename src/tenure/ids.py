"""Job ids tenure mints for jobs enqueued without one: time-ordered UUIDv7 (RFC 9562), so sorting
by id is sorting by creation time and "newest first" is a keyset walk of the primary key
(``page(order="newest")``; docs/operations.md, "Order").

The standard library's ``uuid.uuid7`` (Python 3.14+) when present, else the ``uuid6`` package's;
both keep ids minted by one process strictly increasing, also within one millisecond."""

from __future__ import annotations

import uuid

try:
    _uuid7 = uuid.uuid7  # type: ignore[attr-defined]
except AttributeError:  # Python < 3.14
    from uuid6 import uuid7 as _uuid7


def new_job_id() -> str:
    """A fresh time-ordered job id: a UUIDv7 in its canonical text form."""
    return str(_uuid7())
