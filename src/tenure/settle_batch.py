"""The bookkeeping of a settlement batch: the first settlement of each lease wins (D1), answers
spread back to the caller's order, item-specific failures told from batch-wide ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .engine.rows import JobRow
from .errors import (
    InvalidType,
    LeaseExpired,
    LeaseSuperseded,
    StorageError,
    StoreLimitExceeded,
    TenureError,
)
from .fence import check_lease
from .records import Lease

if TYPE_CHECKING:
    pass


def first_of_each(items: Sequence[tuple[Lease, Any]]) -> tuple[Sequence[tuple[Lease, Any]], list[int] | None]:
    """One batch holding the SAME lease (job id and token) more than once: only the first item is
    sent to the store, and each later one is answered as that first one was (docs/spec.md D1: the
    first settlement from an attempt stands; a repeat changes nothing and is no error). Answers
    ``(items to send, position of each original item among them)``, the positions None when every
    lease is distinct (the common case, answered without a copy)."""
    keys = [(lease.job_id, lease.token) for lease, _ in items]
    if len(set(keys)) == len(keys):
        return items, None
    first: dict[tuple[str, str], int] = {}
    sent: list[tuple[Lease, Any]] = []
    where: list[int] = []
    for key, item in zip(keys, items, strict=True):
        at = first.get(key)
        if at is None:
            at = first[key] = len(sent)
            sent.append(item)
        where.append(at)
    return sent, where


def as_met_before_claim(errors: list[TenureError | None], items: Sequence[tuple[Lease, Any]],
                         claimed: list[JobRow], now: int) -> list[TenureError | None]:
    """A completion refused in a settle-and-claim whose OWN claim then took the same job: the row
    read for the answer already shows that claim (generation + 1) and would call the lease
    superseded. That claim could take the job only because the lease had ended, so the answer is
    the refusal the completion met: expired (TN2067), as it is when the job is settled alone
    (docs/spec.md 6.13, D2)."""
    generations = {r.id: r.lease_generation for r in claimed}
    out = list(errors)
    for i, ((lease, _), err) in enumerate(zip(items, errors, strict=True)):
        if isinstance(err, LeaseSuperseded) and generations.get(lease.job_id) == lease.generation + 1 \
                and lease.expires_at <= now:
            out[i] = LeaseExpired(
                f"cannot complete job {lease.job_id!r}: its lease (generation {lease.generation}) expired "
                f"{now - lease.expires_at} ms ago", job_id=lease.job_id, overrun_ms=now - lease.expires_at)
    return out


def spread(answers: list, where: list[int] | None) -> list:
    """Each original item's answer: its first occurrence's (see :func:`first_of_each`)."""
    return answers if where is None else [answers[i] for i in where]


def item_specific(exc: BaseException) -> bool:
    """Whether the database refused a settle batch for what an item holds (a data error, a
    trigger, text the driver cannot encode), rather than for being busy, unreachable or closed:
    only then is each item worth writing alone."""
    if isinstance(exc, TenureError):
        # the generic class, or a hard limit a value passed; busy/unavailable/full are not
        return type(exc) is StorageError or isinstance(exc, StoreLimitExceeded)
    return isinstance(exc, ValueError)  # UnicodeEncodeError, a driver's DataError spelt raw


def merge(settled: list[TenureError | None], unstorable: dict[int, TenureError],
           n: int) -> list[TenureError | None]:
    """Answers in the caller's order: the settled items' answers around the unstorable ones."""
    if not unstorable:
        return settled
    it = iter(settled)
    return [unstorable[i] if i in unstorable else next(it) for i in range(n)]


def check_items(items: Any, what: str) -> list:
    """``items`` as a list, each a ``(Lease, value)`` pair with the lease's fields in range."""
    items = list(items)
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise InvalidType(f"{what} takes (lease, value) pairs, got {item!r}")
        check_lease(item[0], what, ())
    return items
