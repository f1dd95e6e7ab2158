"""Which coded refusal a fenced call gets when its guarded statement matched nothing (spec 3.9,
D2): TN2065 superseded, TN2066 not held, TN2067 expired; and the check that a Lease was passed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _validate as v
from .engine.rows import JobRow
from .errors import (
    LeaseExpired,
    LeaseNotHeld,
    LeaseRequired,
    LeaseSuperseded,
    TenureError,
)
from .records import Lease

if TYPE_CHECKING:
    pass


def refusal(row: JobRow | None, lease: Lease, now: int, what: str) -> TenureError | None:
    """Why a fenced call on ``lease`` matched nothing; ``None`` means the same attempt already
    settled the job (a repeat settlement is idempotent, D1)."""
    if row is None:
        return LeaseNotHeld(f"cannot {what} job {lease.job_id!r}: no such job (swept, or never enqueued)",
                            job_id=lease.job_id)
    state, generation, token, until = row.state, row.lease_generation, row.lease_token, row.lease_until
    if state == "leased":
        if token == lease.token and generation != lease.generation:
            return LeaseSuperseded(
                f"cannot {what} job {lease.job_id!r}: the lease says generation {lease.generation!r} but its "
                f"token is generation {generation}'s (a lease is used as claim or renew returned it)",
                job_id=lease.job_id, held=lease.generation, current=generation)
        if token == lease.token:
            assert until is not None  # a leased row has an expiry
            return LeaseExpired(
                f"cannot {what} job {lease.job_id!r}: its lease (generation {generation}) expired "
                f"{now - until} ms ago", job_id=lease.job_id, overrun_ms=now - until)
        if generation != lease.generation:
            return LeaseSuperseded(
                f"cannot {what} job {lease.job_id!r}: the lease of generation {lease.generation} was "
                f"superseded by a newer claim, generation {generation}", job_id=lease.job_id,
                held=lease.generation, current=generation)
        return LeaseSuperseded(
            f"cannot {what} job {lease.job_id!r}: the lease of generation {lease.generation} was retired "
            f"by a renewal (the current lease is also generation {generation}; use the lease renew returned)",
            job_id=lease.job_id, held=lease.generation, current=generation)
    if token is not None and token == lease.token and generation == lease.generation and \
            state in ("done", "failed", "dead"):
        return None
    return LeaseNotHeld(f"cannot {what} job {lease.job_id!r}: it is not leased (state {state!r}, generation "
                        f"{generation}); another attempt or an operator settled it", job_id=lease.job_id,
                        state=state)


def check_lease(lease: Any, what: str, extra: tuple) -> Lease:
    if isinstance(lease, Lease) and not extra:
        v.lease(lease, what)
        return lease
    if isinstance(lease, str):
        raise LeaseRequired(
            f"{what}({lease!r}, ...) is the pre-fence (id, owner) spelling: pass the Lease the claim "
            f"returned (claim.lease), e.g. jobs.{what}(claim.lease, ...)")
    if extra:
        raise LeaseRequired(f"{what}() takes the Lease and one value; got extra arguments {extra!r}")
    raise LeaseRequired(f"{what}() needs the Lease the claim returned (claim.lease), got "
                        f"{type(lease).__name__}")
