"""The fenced checkpoint store of one attempt (spec §7): node values saved under the job id,
stamped with the attempt's generation."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _validate as v
from .errors import (
    InvalidType,
    LeaseNotHeld,
)
from .fence import refusal
from .job_rows import MAX_GENERATION, _loads
from .records import Checkpoint, Lease

if TYPE_CHECKING:
    from .jobs_base import _JobsBase


class Checkpoints:
    """The fenced checkpoint store of one attempt: node values saved under the job (run) id,
    stamped with the attempt's generation (spec §7)."""

    def __init__(self, view: _JobsBase, lease: Lease | Callable[[], Lease]) -> None:
        self._view = view
        self._lease = lease

    @property
    def lease(self) -> Lease:
        return self._lease() if callable(self._lease) else self._lease

    def save(self, node_id: str, value: Any) -> None:
        """Save one node's value; refused by code (and nothing written) when the lease is stale."""
        if not isinstance(node_id, str) or not node_id:
            raise InvalidType("node_id must be a non-empty string")
        v.text(node_id, "node_id", max_chars=v.MAX_ID)
        lease = self.lease
        store = self._view._store
        text = v.dump_json(value, "checkpoint value", store.max_payload_bytes)
        # The fence also matches the generation (docs/spec.md 2.13, 3.9): a lease whose generation is
        # not the row's (forged or garbled) is refused, so no row is ever stamped with it. One
        # that no column could hold matches nothing on either engine.
        gen = lease.generation
        if type(gen) is not int or not 0 <= gen <= MAX_GENERATION:
            gen = -1
        with self._view._session() as s:
            now = store._now()
            if not s.checkpoint_save(lease.job_id, node_id, text, gen, lease.token, now):
                raise refusal(s.job_get(lease.job_id), lease, store._now_or(s, now), "save a checkpoint of") \
                    or LeaseNotHeld(f"cannot save a checkpoint of job {lease.job_id!r}: the attempt settled it")

    def list(self) -> list[Checkpoint]:
        """Every node value of generations up to and including this attempt's."""
        lease = self.lease
        with self._view._session() as s:
            rows = s.checkpoint_list(lease.job_id, lease.generation)
        return [Checkpoint(lease.job_id, r.node_id, None if r.value is None else _loads(r.value), r.generation)
                for r in rows]

    def load(self) -> dict[str, Any]:
        """``{node_id: value}`` for generations <= this attempt's (its predecessors' work)."""
        return {c.node_id: c.value for c in self.list()}
