"""Looking at runs from the outside: :func:`describe_run` (for ``tenure runs show`` and the
dashboard) and :func:`restart` (start a refused or dead run again from scratch).

Both use only the public store API, so the CLI, the dashboard and user code see the same thing.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument, InvalidType, LeaseNotHeld
from .document import Flow
from .identity import RUN_NODE, is_legacy
from .registry import RESERVED_PREFIX

if TYPE_CHECKING:
    from ..store import Store

#: The version of the dict :func:`describe_run` answers; bumped only on an incompatible change.
DESCRIBE_VERSION = 1


def _read_checkpoints(store: Store, job_id: str, generation: int) -> list[Any]:
    return [c for c in store.jobs.checkpoints_of(job_id) if c.generation <= generation]


def describe_run(store: Store, job_id: str, *, flow: Flow | None = None) -> dict[str, Any] | None:
    """A workflow run as plain JSON-ready data, or None when no job has that id.

    The answer (stable; ``"version"`` says which shape)::

        {
          "version": 1,
          "job_id": "r-1", "kind": "sync-report", "state": "leased",   # the job's state
          "attempts": 2, "generation": 2, "lease_until": 1700000030000,
          "last_error": None, "result": None,                          # result once done
          "identity": {"flow", "revision", "input_hash", "task_versions", "task_versions_hash"}
                      or None (none recorded, or pruned after completion),
          "legacy": False,          # True: the recorded identity has no task versions
          "nodes": [                # dependencies first
            {"id": "fetch", "task": "fetch", "needs": [], "status": "done",
             "value": {...}, "generation": 1},
            {"id": "transform", "task": "transform", "needs": ["fetch"], "status": "running",
             "value": None, "generation": None},
            ...
          ],
        }

    Each node also has ``"waiting"``: what it is parked on (its unfinished durable steps, and in a
    distributed run its node job), e.g. ``[{"kind": "signal", "key": "approval:r-1", "until":
    None}]`` or ``[{"kind": "sleep", "until": 1700000030000}]``; empty once it has a value.

    ``status`` is ``done`` (a value is recorded), ``running`` (no value, every dependency done,
    and the job holds a live lease: the current attempt is running it or about to, subject to the
    flow's ``max_parallel``), ``ready`` (the same but no live lease: waiting for its next attempt,
    or for a reclaim after a crash) or ``pending`` (a dependency is not done). "Live" is judged
    by the store's injected clock, else this host's wall clock. The node list comes from ``flow`` when
    given, else from the shape the run recorded with its identity, else it lists only the
    recorded nodes. After completion the checkpoints are pruned: ``identity`` is None and, given
    ``flow``, every node is ``done`` with ``value`` None (the output is in ``result``).
    """
    if not isinstance(job_id, str):
        raise InvalidType("job_id must be a string")
    job = store.jobs.get(job_id)
    if job is None:
        return None
    rows = _read_checkpoints(store, job_id, job.lease_generation)
    record = next((r.value for r in rows if r.node_id == RUN_NODE), None)
    waits = _waits(rows)
    recorded = {r.node_id: r for r in rows if not r.node_id.startswith(RESERVED_PREFIX)}
    identity = None
    shape: dict[str, dict[str, Any]] | None = None
    if isinstance(record, dict):
        identity = {k: record.get(k) for k in ("flow", "revision", "input_hash", "task_versions",
                                                "task_versions_hash") if k in record}
        if isinstance(record.get("nodes"), dict):
            shape = record["nodes"]
    order: list[str]
    if flow is not None:
        shape = flow.shape()
        order = list(flow.order)
    elif shape is not None:
        order = _topological(shape)
    else:
        order = []
    now = int(store.clock()) if store.clock is not None else time.time_ns() // 1_000_000
    leased = job.state == "leased" and job.lease_until is not None and job.lease_until > now
    nodes = []
    for node_id in order + [n for n in recorded if n not in (shape or {})]:
        spec = (shape or {}).get(node_id, {})
        needs = list(spec.get("needs", []))
        cp = recorded.get(node_id)
        if cp is not None:
            status = "done"
        elif job.state == "done" and flow is not None:
            status = "done"
        elif all(d in recorded for d in needs):
            status = "running" if leased else "ready"
        else:
            status = "pending"
        nodes.append({"id": node_id, "task": spec.get("task", node_id), "needs": needs, "status": status,
                      "value": None if cp is None else cp.value,
                      "generation": None if cp is None else cp.generation,
                      "waiting": [] if cp is not None else waits.get(node_id, [])})
    return {
        "version": DESCRIBE_VERSION, "job_id": job.id, "kind": job.kind, "state": job.state,
        "attempts": job.attempts, "generation": job.lease_generation, "lease_until": job.lease_until,
        "last_error": job.last_error, "result": job.result, "identity": identity,
        "legacy": isinstance(record, dict) and is_legacy(record), "nodes": nodes,
    }


def _waits(rows: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """What each node is parked on, from its unfinished durable-step records (and, in a
    distributed run, its node job): ``{"kind": "sleep", "until"}``, ``{"kind": "signal", "key",
    "until"}``, ``{"kind": "children", "of", "count"}`` or ``{"kind": "node_job", "job"}``."""
    from ..durable import STEP_PREFIX
    from .distributed import NODE_JOB_PREFIX

    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        value = r.value if isinstance(r.value, dict) else {}
        if r.node_id.startswith(STEP_PREFIX) and not value.get("done"):
            node = r.node_id[len(STEP_PREFIX):].rpartition(":")[0]
            wait = {k: value[k] for k in ("kind", "until", "key", "of", "count") if k in value}
            out.setdefault(node, []).append(wait)
        elif r.node_id.startswith(NODE_JOB_PREFIX) and not value.get("failed"):
            out.setdefault(r.node_id[len(NODE_JOB_PREFIX):], []).append({"kind": "node_job", "job": value.get("job")})
    return out


def _topological(shape: dict[str, dict[str, Any]]) -> list[str]:
    """Dependencies first, ties in recorded order; tolerant of a malformed shape."""
    out: list[str] = []
    placed: set[str] = set()
    remaining = list(shape)
    while remaining:
        progressed = False
        for n in list(remaining):
            needs = shape[n].get("needs", []) if isinstance(shape[n], dict) else []
            if all(d in placed or d not in shape for d in needs):
                out.append(n)
                placed.add(n)
                remaining.remove(n)
                progressed = True
        if not progressed:
            out.extend(remaining)
            break
    return out


def restart(store: Store, job_id: str, *, new_id: str | None = None) -> str:
    """Start a settled run (``dead``, e.g. refused with TN2069, or ``cancelled``) again from
    scratch: a NEW job of the same kind, payload and ``max_attempts``, with no checkpoints.
    Answers the new job's id. Pass ``new_id`` to make the restart idempotent. The old job keeps
    its checkpoints and ``last_error`` for inspection until it is swept."""
    job = store.jobs.get(job_id)
    if job is None:
        raise LeaseNotHeld(f"cannot restart run {job_id!r}: no such job", job_id=job_id)
    if job.state not in ("dead", "cancelled"):
        raise InvalidArgument(f"cannot restart run {job_id!r}: it is {job.state!r}; only a dead or "
                              "cancelled run is restarted from scratch (a live one resumes by itself)",
                              job_id=job_id, state=job.state)
    if new_id == job_id:
        raise InvalidArgument("a restarted run needs a new id: the old id still holds the old checkpoints")
    got = store.jobs.enqueue(job.kind, job.payload, id=new_id, max_attempts=job.max_attempts,
                             queue=job.queue, priority=job.priority)
    assert got is not None
    return got
