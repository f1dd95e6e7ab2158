"""Engine rows to public records: a job row to a frozen :class:`~tenure.records.Job` (JSON decoded,
token dropped) or a :class:`~tenure.records.Claim`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from . import _sanitize
from .engine.rows import JobRow
from .errors import (
    UnreadableJob,
)
from .records import Claim, Job, Lease, Progress, Undecodable

if TYPE_CHECKING:
    pass


#: The largest lease generation a row can hold (an INTEGER column on both engines).
MAX_GENERATION = 2**31 - 1

_loads = json.loads

_R = TypeVar("_R")


def positional_builder(cls: type[_R]) -> Callable[..., _R]:
    """A faster constructor of the frozen, slotted dataclass ``cls``, taking every field
    positionally: an instance of ``cls`` equal to ``cls(*values)``. A frozen dataclass's own
    ``__init__`` stores each field through ``object.__setattr__``: for the 28 fields of a
    :class:`Job` that was ~5 µs, the largest item of a claim's Python cost (docs/performance.md,
    "SQLite drain"). Here a mutable twin with the same slots stores them at slot speed, then the
    object takes ``cls`` as its class (same layout, so the interpreter allows it). Where that is
    refused (a layout that differs), answers ``cls`` itself."""
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    target: Any = cls

    def __post_init__(self: Any) -> None:
        self.__class__ = target

    twin = dataclasses.make_dataclass(f"_{cls.__name__}Fields", names, slots=True, eq=False, repr=False,
                                      namespace={"__post_init__": __post_init__})
    try:
        probe = twin(*range(len(names)))
    except TypeError:  # layouts differ: keep the plain constructor
        return cls
    if type(probe) is not cls or probe != cls(*range(len(names))):
        return cls
    return twin


_job = positional_builder(Job)
_lease = positional_builder(Lease)
_claim = positional_builder(Claim)


def _decoded(r: JobRow) -> Job:
    """The public record for an engine row: JSON decoded, token dropped. Raises what the decoder
    raises on a column that cannot be decoded."""
    p, res, h, e, t, m = r.payload, r.result, r.headers, r.errors, r.tags, r.meta
    return _job_of(r, None if p is None else _loads(p), None if res is None else _loads(res),
                   None if h is None else _loads(h), [] if e is None else _loads(e),
                   [] if t is None else _loads(t), {} if m is None else _loads(m))


def _job_of(r: JobRow, payload: Any, result: Any, headers: Any, errors: Any, tags: Any, meta: Any) -> Job:
    """The :class:`Job` of row ``r`` with its JSON columns given already decoded. Positional, in
    :class:`Job`'s field order (the fast builder takes every field so; JobRow's fields are Job's,
    in order: tests/core/test_engine_contract.py)."""
    return _job(r.id, r.kind, payload, r.state, r.run_at, r.attempts, r.max_attempts, r.lease_until,
                r.lease_owner, r.lease_generation, r.last_error, result, r.created_at, r.updated_at, r.queue,
                r.priority, r.timeout_ms, r.singleton_key, r.group_key, r.dead_letter, r.origin_id, headers,
                errors, r.cancel_requested_at, tags, meta, _progress(r.progress), r.waiting_on or 0)


def _progress(text: str | None) -> Progress | None:
    """The stored progress column as a record; None when absent or unreadable (progress is a
    report, never a reason to hide the job)."""
    if text is None:
        return None
    try:
        d = _loads(text)
        return Progress(float(d["fraction"]), d.get("note"), d.get("at"), d.get("attempt"))
    except Exception:  # noqa: BLE001 - foreign text in a report column
        return None


def row_to_job(r: JobRow) -> Job:
    """The public record for an engine row: JSON decoded, token dropped. Never fails on what the
    row holds: a column that cannot be decoded reads as a :class:`~tenure.records.Undecodable`
    marker, so ``get()``, ``page()`` and every listing still show the job."""
    try:
        return _decoded(r)
    except Exception:  # noqa: BLE001 - RecursionError, ValueError: whatever foreign text holds
        return _tolerant(r)


def _tolerant(r: JobRow) -> Job:
    """:func:`_decoded`, each column that cannot be decoded read as an Undecodable marker."""
    dec = _sanitize.decode_column
    e, t, m = r.errors, r.tags, r.meta
    return _job_of(r, dec(r.payload), dec(r.result), dec(r.headers), [] if e is None else dec(e),
                   [] if t is None else dec(t), {} if m is None else dec(m))


def row_to_claim(r: JobRow) -> Claim:
    """The claim of a freshly leased row; :class:`UnreadableJob` (TN0008) when a column cannot be
    decoded (the caller settles that job dead alone, :meth:`Jobs._claims`)."""
    try:
        job = _decoded(r)
    except Exception as exc:
        job = _tolerant(r)
        bad = [(name, value) for name, value in (("payload", job.payload), ("result", job.result),
                                                 ("headers", job.headers)) if isinstance(value, Undecodable)]
        if bad or not isinstance(job.errors, Undecodable):  # an unreadable history alone still runs
            why = "; ".join(f"{name}: {val.reason}" for name, val in bad) or \
                f"{type(exc).__name__}: {_sanitize.message(exc)}"
            raise UnreadableJob(f"job {r.id!r} cannot be decoded ({why}); it was settled dead without "
                                "running", job_id=r.id) from exc
    assert job.lease_owner is not None and job.lease_until is not None  # a claimed row is leased
    assert r.lease_token is not None
    return _claim(job, _lease(job.id, r.lease_token, job.lease_generation, job.attempts, job.lease_owner,
                              job.lease_until), bool(r.reclaimed))


def lease_of(r: JobRow, owner: str | None = None) -> Lease:
    """The lease a leased row holds (its token, generation, attempt, owner and expiry); ``owner``
    overrides the row's (a renewal answers the caller's own)."""
    assert r.lease_token is not None and r.lease_until is not None  # a leased row
    return _lease(r.id, r.lease_token, r.lease_generation, r.attempts, owner or r.lease_owner or "", r.lease_until)
