"""Child-process side of spec 3.1: drain one database with real time.

Imported by name in spawned processes (``multiprocessing`` spawn context), so it must stay a
plain importable module with no pytest dependency.
"""

from __future__ import annotations

import time

#: How long each claimed job is held before it is completed (seconds).
HOLD_S = 0.001


def _retry_busy(fn):
    """Call ``fn``; a classified busy store (TN0003) is retried, anything else propagates."""
    while True:
        try:
            return fn()
        except Exception as exc:
            if getattr(exc, "code", None) != "TN0003":
                raise


def drain(url: str, owner: str, barrier, out) -> None:
    """Claim and complete until nothing is left; report every lease handed out."""
    import tenure

    handed_out, error = [], None
    try:
        store = tenure.connect(url)
        try:
            jobs = store.jobs
            barrier.wait(timeout=30)
            while True:
                claim = _retry_busy(lambda: jobs.claim(["k"], owner=owner, lease_ms=120_000))
                if claim is None:
                    break
                lease = claim.lease
                handed_out.append((lease.job_id, lease.generation, lease.token))
                # Held a moment, as a handler would: claiming and completing back to back, the
                # process the barrier released first could drain all 240 jobs before the others
                # ran at all (seen on a loaded machine: [0, 0, 0, 240]), and the test proved nothing.
                time.sleep(HOLD_S)
                _retry_busy(lambda lease=lease: jobs.complete(lease, {"by": owner}))
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the test with it
        error = f"{type(exc).__name__}: {exc}"
    out.put((owner, handed_out, error))
