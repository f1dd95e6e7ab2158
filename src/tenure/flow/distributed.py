"""Distributed runs (``Runner(..., distributed=True)``): each node of a run is its own job.

The run's job becomes a **coordinator**. Each attempt of it checks the identity and restores the
recorded node values exactly as an in-process run does (so ``ResumeMismatch`` refuses the same
resumes), then:

1. records the value of every node job that finished (its result) as the node's checkpoint —
   the same checkpoint an in-process run writes, fenced by the run's lease;
2. starts a **node job** (kind ``"<flow>:node"``, id ``"<run id>~node:<node id>.<n>"``) for every
   node whose needs all have values, at most ``max_parallel`` open at once, in one transaction
   with its record (``__tenure_node_job:<node id>``) — so a replay never starts a node twice;
3. answers the output once every node has a value, else **parks** (no slot, no lease) until the
   first open node job settles (each node job wakes its run: ``wake_each``, migration 0014).

A node job runs the node's task on whichever worker claims it, with the run's input and its
needs' values in its payload, and checks the flow's revision and the task's declared version
against what the run recorded: a worker with other code refuses it by name (TN2069) and the run
is made ``dead`` as an in-process resume would be. A node job that ends ``dead`` fails the run's
attempt like a failing task (``TaskFailed``; the run's retry starts the node again as a new job,
``.<n+1>``). Cancelling the run cancels its queued node jobs and flags its running ones for their
holders (``ctx.cancelled``), in the cancel's own transaction (migration 0014).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING, Any

from .. import _validate as v
from ..durable import RECHECK_MS, SETTLED, Park
from ..errors import InvalidArgument, ResumeMismatch

if TYPE_CHECKING:
    from ..records import Job
    from ..worker import JobContext
    from .runner import _Bound

#: Checkpoint node ids of a coordinator's node-job records start with this (reserved).
NODE_JOB_PREFIX = "__tenure_node_job:"
#: What a node job's payload holds.
NODE_PAYLOAD_KEYS = frozenset({"run", "flow", "node", "task", "version", "revision", "input", "needs"})


def node_kind(flow_name: str) -> str:
    """The job kind of a flow's node jobs."""
    return f"{flow_name}:node"


def _node_job_id(run_id: str, node_id: str, n: int) -> str:
    base = f"{run_id}~node:{node_id}"
    if len(base) + 12 > v.MAX_ID:
        base = "node-" + hashlib.sha256(base.encode("utf-8")).hexdigest()[:40]
    return f"{base}.{n}"


class DistributedRun:
    """One attempt of a run's coordinator (see the module docstring)."""

    def __init__(self, bound: _Bound, ctx: JobContext, run_input: Any, values: dict[str, Any]) -> None:
        self.bound = bound
        self.flow = bound.flow
        self.ctx = ctx
        self.input = run_input
        self.values = values

    def execute(self) -> Any:
        from .context import TaskFailed, _make_dead

        ctx, store = self.ctx, self.ctx.store
        records = {k[len(NODE_JOB_PREFIX):]: val for k, val in ctx.checkpoints.load().items()
                   if k.startswith(NODE_JOB_PREFIX)}
        open_ids = self._collect(records)
        failed = [(n, r) for n, r in records.items() if n not in self.values and r.get("failed")]
        fresh = [(n, r) for n, r in failed if r.get("attempt") == ctx.attempt]
        if fresh:  # a node job died in this attempt's look: fail the attempt like a failing task
            node_id, rec = fresh[0]
            if str(rec.get("last_error") or "").startswith(f"[{ResumeMismatch.code}]"):
                err = ResumeMismatch(f"node {node_id!r} of run {ctx.job.id!r} was refused by the worker that "
                                     f"claimed it: {rec['last_error']}", job_id=ctx.job.id, node=node_id)
                _make_dead(ctx, err)
                raise err
            task = self.flow.nodes[node_id].task
            raise TaskFailed(f"node {node_id!r} (task {task!r}) failed: its job {rec['job']} ended "
                             f"{rec['state']}: {rec.get('last_error')}", node_id=node_id, task=task)
        if len(self.values) == len(self.flow.nodes):
            return self._output()
        if ctx.cancelled.is_set():
            from ..errors import TenureError
            from .context import RunInterrupted

            reason = ctx.cancelled.reason
            if isinstance(reason, TenureError):
                raise reason  # a lost lease or an operator's cancel: the worker records it as such
            raise RunInterrupted(f"run {ctx.job.id!r} of flow {self.flow.name!r} was interrupted ({reason})", reason)
        open_ids += self._start(records, len(open_ids))
        with store._session() as s:
            now = store._now_or(s, store._now())
        raise Park(now + RECHECK_MS, any_of=open_ids)

    def _output(self) -> Any:
        out = self.flow.output
        if isinstance(out, str):
            return self.values[out]
        names = self.flow.sinks() if out is None else out
        return {n: self.values[n] for n in names}

    def _collect(self, records: dict[str, dict[str, Any]]) -> list[str]:
        """Record the values of finished node jobs (and mark the dead ones); answers the ids of
        the node jobs still open."""
        from ..durable import _refused, _save
        from ..job_rows import row_to_job

        started = {n: r for n, r in records.items() if n not in self.values and not r.get("failed")}
        if not started:
            return []
        ctx, store = self.ctx, self.ctx.store
        open_ids: list[str] = []
        with store._transaction_session() as s:
            lease = ctx.lease
            now = store._now_or(s, store._now())
            if not s.job_lock(lease.job_id, lease.token, now):
                raise _refused(s, store, lease, now, "record the nodes of")
            jobs: dict[str, Job] = {j.id: j for j in (row_to_job(r) for r in s.job_get_many(
                [r["job"] for r in started.values()]))}
            for node_id, rec in started.items():
                job = jobs.get(rec["job"])
                if job is not None and job.state not in SETTLED:
                    open_ids.append(job.id)
                elif job is not None and job.state == "done":
                    _save(s, store, lease, node_id, job.result, now)
                    self.values[node_id] = job.result
                else:
                    marked = {**rec, "failed": True, "state": job.state if job else "missing",
                              "last_error": job.last_error if job else None, "attempt": lease.attempt}
                    _save(s, store, lease, NODE_JOB_PREFIX + node_id, marked, now)
                    records[node_id] = marked
        return open_ids

    def _start(self, records: dict[str, dict[str, Any]], open_count: int) -> list[str]:
        """Start a node job for each ready node (within ``max_parallel``); answers their ids."""
        from ..durable import _refused, _save

        flow, bound, ctx, store = self.flow, self.bound, self.ctx, self.ctx.store
        ready = [n for n in bound.order if n not in self.values
                 and (n not in records or records[n].get("failed"))
                 and all(d in self.values for d in flow.nodes[n].needs)]
        ready = ready[:max(0, flow.max_parallel - open_count)]
        if not ready:
            return []
        job = ctx.job
        specs = []
        recs: list[tuple[str, dict[str, Any]]] = []
        for node_id in ready:
            node = flow.nodes[node_id]
            n = int(records[node_id].get("n", 0)) + 1 if node_id in records else 1
            job_id = _node_job_id(job.id, node_id, n)
            payload = {"run": job.id, "flow": flow.name, "node": node_id, "task": node.task,
                       "version": bound.impls[node.task].version, "revision": flow.revision,
                       "input": self.input, "needs": {d: self.values[d] for d in node.needs}}
            specs.append(store.jobs._build_spec({"kind": node_kind(flow.name), "payload": payload, "id": job_id,
                                                 "queue": job.queue, "priority": job.priority}))
            recs.append((node_id, {"job": job_id, "n": n}))
        with store._transaction_session() as s:
            lease = ctx.lease
            now = store._now_or(s, store._now())
            if not s.job_lock(lease.job_id, lease.token, now):
                raise _refused(s, store, lease, now, "start the nodes of")
            got = store.queues.insert(s, specs, store._now())
            ids: list[str] = [i if i is not None else str(rec["job"]) for i, (_, rec) in zip(got, recs, strict=True)]
            s.job_set_wake_parent(ids, lease.job_id, each=True)
            for node_id, rec in recs:
                _save(s, store, lease, NODE_JOB_PREFIX + node_id, rec, now)
        store._wake_local()
        for node_id, rec in recs:
            records[node_id] = rec
        return ids


class NodeHandler:
    """The job handler of a flow's node jobs: runs one node's task on this worker."""

    def __init__(self, bound: _Bound) -> None:
        self._bound = bound

    def __call__(self, payload: Any, ctx: JobContext) -> Any:
        from .context import TaskContext, _make_dead

        bound = self._bound
        flow = bound.flow
        if not isinstance(payload, dict) or set(payload) != NODE_PAYLOAD_KEYS:
            err = InvalidArgument(f"a node job of flow {flow.name!r} takes the payload its run "
                                             f"wrote ({sorted(NODE_PAYLOAD_KEYS)}), got {payload!r:.200}",
                                             problem="bad_payload")
            _make_dead(ctx, err)
            raise err
        node_id = payload["node"]
        node = flow.nodes.get(node_id)
        impl = bound.impls.get(node.task) if node is not None else None
        changes = []
        if payload["revision"] != flow.revision:
            changes.append(f"the document revision changed from {payload['revision']!r} to {flow.revision!r}")
        if node is None or impl is None:
            changes.append(f"node {node_id!r} is not in this document")
        elif payload["version"] != impl.version:
            changes.append(f"{node.task!r} moved from version {payload['version']!r} to {impl.version!r}")
        if changes:
            mismatch = ResumeMismatch(f"cannot run node {node_id!r} of run {payload['run']!r} of flow "
                                      f"{flow.name!r}: " + "; ".join(changes) + ". Deploy the code the run "
                                      "started under, or restart the run (tenure.flow.restart)",
                                      job_id=payload["run"], flow=flow.name, changes=changes)
            _make_dead(ctx, mismatch)
            raise mismatch
        assert node is not None and impl is not None
        tctx = TaskContext(ctx, flow.name, node_id, impl, payload["input"], payload["needs"], run_id=payload["run"])
        try:
            out = asyncio.run(impl.fn(tctx)) if impl.is_async else impl.fn(tctx)
        except Exception as exc:
            tctx._raise_swallowed(exc)  # a step's park the task caught: the node job parks on it
            raise
        tctx._raise_swallowed(out)
        return out

