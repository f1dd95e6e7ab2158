"""How long one database call of a worker or of the maintenance service may take.

A worker renews its leases every third of ``lease_ms``; a call that has not answered within that
third already puts the lease at risk, and one that never answers (a silent server, a partition)
would hang the worker forever. So each of its calls gets a deadline derived from the lease
(:func:`call_timeout_for_lease`), enforced by the engine (on PostgreSQL a client-side watchdog,
:mod:`tenure.engine.postgres.deadline`; SQLite calls are local and need none). A call cut at its
deadline fails like an unreachable store (TN0005): a settlement is retried while its lease lasts,
a claim's possibly committed leases are given back (docs/guarantees.md, "Liveness: deadlines and
lost connections").
"""

from __future__ import annotations

#: No call deadline is shorter (a loaded server's round trip must fit) ...
MIN_CALL_TIMEOUT_S = 1.0
#: ... or longer (a worker must notice a silent server well within a default lease).
MAX_CALL_TIMEOUT_S = 30.0
#: The maintenance service's calls (heartbeats, elections, bounded sweeps; not the vacuum, which
#: has its own cancellation).
MAINTENANCE_CALL_TIMEOUT_S = 10.0
#: How long a stopping worker gives its last registry write (best effort: the row is reaped later).
RELEASE_CALL_TIMEOUT_S = 0.5


def call_timeout_for_lease(lease_ms: int, ceiling_s: float | None = None) -> float:
    """The deadline (seconds) of each database call of a worker whose lease is ``lease_ms``: a
    third of the lease (one renewal period), within [:data:`MIN_CALL_TIMEOUT_S`,
    :data:`MAX_CALL_TIMEOUT_S`], and never above ``ceiling_s`` (the store's ``call_timeout``)."""
    seconds = min(max(lease_ms / 3000, MIN_CALL_TIMEOUT_S), MAX_CALL_TIMEOUT_S)
    if ceiling_s is not None:
        seconds = min(seconds, ceiling_s)
    return seconds
