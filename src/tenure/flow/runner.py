"""Running workflows as jobs: the :class:`Runner` registers each flow as a job kind.

``store.jobs.enqueue("sync-report", {"input": {...}})`` starts a run; the job id is the run id and
the run's output becomes the job's ``result`` (spec §7, spec 7.2). One attempt of a run:

1. reads the run's checkpoints (``ctx.checkpoints``: generations up to its own);
2. checks the recorded identity (:mod:`tenure.flow.identity`): a fresh run records it, an agreeing
   resume writes nothing, a disagreeing one is refused with
   :class:`~tenure.errors.ResumeMismatch` (TN2069) and the job is made ``dead`` at once with the
   refusal in ``last_error`` (D6);
3. restores the recorded nodes without running them, then runs the rest as their dependencies
   complete — sync tasks on a per-run thread pool, async tasks on a per-run event loop, at most
   :attr:`Flow.max_parallel` at once — saving each node's value through the fenced checkpoint
   store as it completes (so a stale attempt's save is refused and writes nothing);
4. returns the output; the worker's ``complete`` stores it, marks the job done and prunes the
   checkpoints in one transaction.

A task failure fails the attempt (retried with backoff; siblings already running are allowed to
finish, and their values are kept). Cancellation — the worker stopping, a lost lease, an operator's
``cancel`` — reaches every running task through ``ctx.cancelled``; no new node starts after it.
At a shutdown, a node's park still parks the run (due at once if other nodes were cut short): it
is not turned into a failure (docs/workflows.md, "Cancellation").
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..durable import Park
from ..errors import FENCE_CODES, InvalidArgument, InvalidType, ResumeMismatch, TenureError
from ..open_tx import Refusals, refusals
from ..worker.attempt import SHUTDOWN
from ..worker.config import WorkerConfig
from .context import RunInterrupted, TaskContext, TaskFailed, _make_dead
from .document import Flow
from .identity import RUN_NODE, RunIdentity, differences, is_legacy, refuse
from .registry import RESERVED_PREFIX, Registry, TaskImpl

if TYPE_CHECKING:
    from ..store import Store
    from ..worker import JobContext, StopResult, Worker

log = logging.getLogger("tenure.flow")

#: How often (seconds) a run's scheduler looks at the cancellation event while tasks run.
CANCEL_POLL = 0.02


class _Bound:
    """A flow with its tasks resolved against the runner's registry."""

    __slots__ = ("flow", "impls", "versions", "order", "distributed")

    def __init__(self, flow: Flow, registry: Registry | None, distributed: bool = False) -> None:
        self.flow = flow
        self.distributed = distributed
        self.impls = flow.resolve(registry)
        self.versions = {name: impl.version for name, impl in self.impls.items()}
        self.order = flow.order


def parse_payload(kind: str, payload: Any) -> Any:
    """The run's input from a job payload: ``{"input": ...}`` (or None for no input)."""
    if payload is None:
        return None
    if isinstance(payload, dict) and set(payload) == {"input"}:
        return payload["input"]
    raise InvalidArgument(f"a run of flow {kind!r} takes the payload {{\"input\": ...}}, got "
                          f"{payload!r:.200}", problem="bad_payload")


class FlowHandler:
    """The job handler for one flow: ``handler(payload, ctx)`` runs one attempt of a run."""

    def __init__(self, bound: _Bound) -> None:
        self._bound = bound

    @property
    def flow(self) -> Flow:
        return self._bound.flow

    def __call__(self, payload: Any, ctx: JobContext) -> Any:
        bound = self._bound
        try:
            run_input = parse_payload(bound.flow.name, payload)
            identity = RunIdentity.of(bound.flow, run_input, bound.versions)
            values = _restore(ctx, bound, identity)
        except (ResumeMismatch, InvalidArgument) as err:
            if isinstance(err, InvalidArgument) and err.details.get("problem") != "bad_payload":
                raise
            _make_dead(ctx, err)
            raise
        if bound.distributed:
            from .distributed import DistributedRun

            return DistributedRun(bound, ctx, run_input, values).execute()
        return _Run(bound, ctx, run_input, values).execute()


def _restore(ctx: JobContext, bound: _Bound, identity: RunIdentity) -> dict[str, Any]:
    """Check the recorded identity and answer the recorded node values (spec §7).

    Fresh run: records the identity. Agreeing resume: writes nothing. Legacy record without node
    values: upgrades the identity in place. Anything else: :class:`ResumeMismatch`."""
    flow = bound.flow
    job_id = ctx.job.id
    checkpoints = ctx.checkpoints
    recorded = checkpoints.load()
    record = recorded.pop(RUN_NODE, None)
    values = {k: v for k, v in recorded.items() if not k.startswith(RESERVED_PREFIX)}
    unknown = [k for k in values if k not in flow.nodes]
    if not isinstance(record, dict):
        if values:
            raise refuse(job_id, flow.name, [], legacy_values=sorted(values))
        checkpoints.save(RUN_NODE, identity.record())
        return {}
    changes = differences(record, identity)
    if is_legacy(record):
        if values or changes:
            raise refuse(job_id, flow.name, changes, legacy_values=sorted(values) or None,
                         unknown_nodes=unknown or None)
        checkpoints.save(RUN_NODE, identity.record())  # the legacy rule: upgrade in place
        return {}
    if changes or unknown:
        raise refuse(job_id, flow.name, changes, unknown_nodes=unknown or None)
    return values


class _Run:
    """One attempt of one run: schedules the nodes that have no recorded value."""

    def __init__(self, bound: _Bound, ctx: JobContext, run_input: Any, values: dict[str, Any]) -> None:
        self.bound = bound
        self.flow = bound.flow
        self.ctx = ctx
        self.input = run_input
        self.values = values
        self.checkpoints = ctx.checkpoints

    def execute(self) -> Any:
        flow = self.flow
        if len(self.values) < len(flow.nodes):
            asyncio.run(self._schedule())
        return self._output()

    def _output(self) -> Any:
        out = self.flow.output
        if isinstance(out, str):
            return self.values[out]
        names = self.flow.sinks() if out is None else out
        return {n: self.values[n] for n in names}

    # -- scheduling --------------------------------------------------------------------------------
    async def _schedule(self) -> None:  # noqa: C901 - the DAG scheduler loop, kept whole
        flow, bound, cancelled = self.flow, self.bound, self.ctx.cancelled
        nodes = flow.nodes
        waiting = [n for n in bound.order if n not in self.values]
        running: dict[asyncio.Future[Any], str] = {}
        async_tasks: list[asyncio.Future[Any]] = []
        failure: BaseException | None = None
        parked: list[Park] = []
        parked_ids: set[str] = set()
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(max_workers=flow.max_parallel,
                                  thread_name_prefix=f"tenure-flow-{flow.name}")
        try:
            while True:
                if failure is None and not cancelled.is_set():
                    for node_id in list(waiting):
                        if len(running) >= flow.max_parallel:
                            break
                        node = nodes[node_id]
                        if all(dep in self.values for dep in node.needs):
                            waiting.remove(node_id)
                            impl = bound.impls[node.task]
                            needs = {dep: self.values[dep] for dep in node.needs}
                            fut: asyncio.Future[Any]
                            if impl.is_async:
                                fut = asyncio.ensure_future(self._run_async(node_id, impl, needs))
                                async_tasks.append(fut)
                            else:
                                fut = loop.run_in_executor(pool, self._run_sync, node_id, impl, needs)
                            running[fut] = node_id
                if not running:
                    break
                done, _ = await asyncio.wait(running, timeout=CANCEL_POLL,
                                             return_when=asyncio.FIRST_COMPLETED)
                if cancelled.is_set():
                    for fut in async_tasks:
                        if not fut.done():
                            fut.cancel()
                for fut in done:
                    node_id = running.pop(fut)
                    try:
                        self.values[node_id] = fut.result()
                    except asyncio.CancelledError:
                        pass
                    except Park as park:  # a durable step: the node resumes when the run is woken
                        parked.append(park)
                        parked_ids.add(node_id)
                    except BaseException as exc:  # noqa: BLE001 - reported after the siblings finish
                        failure = _first(failure, exc)
        finally:
            pool.shutdown(wait=False)
        done_all = len(self.values) == len(nodes)
        if failure is not None and not done_all:
            if isinstance(failure, TenureError) and failure.code in FENCE_CODES:
                raise failure
            if cancelled.is_set():
                raise self._interrupted() from failure
            raise failure
        if not done_all and parked and (not cancelled.is_set() or cancelled.reason is SHUTDOWN):
            # The worker parks the run: no slot, no lease until it wakes. A shutdown does not turn
            # the park into a failure (a plain handler's park at shutdown parks too): that would use
            # up a retry and lose the parked steps' records, which only the park saves.
            if cancelled.is_set() and self._cut_short(parked_ids):
                parked.append(Park(self.ctx.store._now_wall()))  # the rest runs again at once
            raise Park.merge(parked)
        if not done_all:
            raise self._interrupted()

    def _cut_short(self, parked_ids: set[str]) -> bool:
        """Whether a node the cancellation stopped could run now: unfinished, not parked, every node
        it needs done (it was interrupted, or never started)."""
        nodes = self.flow.nodes
        return any(n not in self.values and n not in parked_ids and all(d in self.values for d in nodes[n].needs)
                   for n in self.bound.order)

    def _interrupted(self) -> BaseException:
        reason = self.ctx.cancelled.reason
        if isinstance(reason, TenureError):
            return reason  # a lost lease or an operator's cancel: the worker records it as such
        done = [n for n in self.bound.order if n in self.values]
        return RunInterrupted(f"run {self.ctx.job.id!r} of flow {self.flow.name!r} was interrupted "
                              f"({reason}); nodes saved: {done or 'none'}", reason)

    # -- one node ----------------------------------------------------------------------------------
    def _context(self, node_id: str, impl: TaskImpl, needs: dict[str, Any]) -> TaskContext:
        return TaskContext(self.ctx, self.flow.name, node_id, impl, self.input, needs)

    def _failed(self, node_id: str, impl: TaskImpl, exc: BaseException) -> TaskFailed:
        err = TaskFailed(f"node {node_id!r} (task {impl.name!r} version {impl.version!r}) failed: "
                         f"{type(exc).__name__}: {_text(exc)}", node_id=node_id, task=impl.name)
        err.__cause__ = exc
        return err

    def _run_sync(self, node_id: str, impl: TaskImpl, needs: dict[str, Any]) -> Any:
        tctx = self._context(node_id, impl, needs)
        with refusals() as noted:
            try:
                ok, value = True, impl.fn(tctx)
            except Exception as exc:  # noqa: BLE001 - the node's outcome, judged in _ended
                ok, value = False, exc
        value = self._ended(node_id, impl, tctx, noted, ok, value)
        self._save(node_id, impl, value)
        return value

    async def _run_async(self, node_id: str, impl: TaskImpl, needs: dict[str, Any]) -> Any:
        tctx = self._context(node_id, impl, needs)
        with refusals() as noted:  # this node's task: its own context
            try:
                ok, value = True, await impl.fn(tctx)
            except Exception as exc:  # noqa: BLE001 - judged in _ended; a CancelledError goes through
                ok, value = False, exc
        value = self._ended(node_id, impl, tctx, noted, ok, value)
        await asyncio.to_thread(self._save, node_id, impl, value)
        return value

    def _ended(self, node_id: str, impl: TaskImpl, tctx: TaskContext, noted: Refusals, ok: bool,
               value: Any) -> Any:
        """A node's task returned (``ok``) or raised ``value``: answers the value to save, or raises
        what the node ends with. A root call refused inside the task's own transaction (TN2071)
        fails the node whatever the task did next; then a park of one of its steps parks it, caught
        or not; then a failure fails it (:class:`TaskFailed`)."""
        refused = tctx._refusal(noted, ok, value)
        if refused is not None:
            raise self._failed(node_id, impl, refused) from refused
        tctx._raise_swallowed(value)  # a step parked and the task caught it: park, save nothing
        if ok:
            return value
        if isinstance(value, Park):
            raise value
        raise self._failed(node_id, impl, value) from value

    def _save(self, node_id: str, impl: TaskImpl, value: Any) -> None:
        try:
            self.checkpoints.save(node_id, value)
        except (InvalidArgument, InvalidType) as exc:
            raise self._failed(node_id, impl, exc) from exc


def _first(current: BaseException | None, new: BaseException) -> BaseException:
    """Keep the first failure, but a fence refusal (the attempt lost its lease) wins."""
    if current is None:
        return new
    if isinstance(new, TenureError) and new.code in FENCE_CODES and not (
            isinstance(current, TenureError) and current.code in FENCE_CODES):
        return new
    return current


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001
        return "<unprintable>"


class Runner:
    """Runs flows as job kinds on a worker (spec 7.2, 7.8, 7.9).

    ```python
    runner = Runner(store, flows=[flow], registry=tasks, concurrency=4, stop_grace=10, lease="10s")
    runner.start()          # or: store.jobs.create_worker({**runner.handlers(), ...}).start()
    store.jobs.enqueue("sync-report", {"input": {"day": "2026-08-05"}})
    ...
    runner.stop()           # uses stop_grace=10 unless stop(grace) says otherwise
    ```
    Every flow is validated and its tasks resolved at construction (flow's own registry first,
    then ``registry``). The worker's settings are ``config`` (a :class:`tenure.WorkerConfig`) with
    the keyword ``options`` applied (``concurrency``, ``lease`` in seconds, ``stop_grace``,
    ``queues``, ...), validated here, before any worker exists.
    ``distributed=True`` runs each node of a run as its own job, on any worker that has this
    runner's :meth:`handlers` (:mod:`tenure.flow.distributed`); the default runs a run's nodes
    in the process holding its lease.
    """

    def __init__(self, store: Store, flows: Iterable[Flow], *, registry: Registry | None = None,
                 distributed: bool = False, config: WorkerConfig | None = None, **options: Any) -> None:
        if not isinstance(distributed, bool):
            raise InvalidType(f"distributed must be True or False, got {distributed!r}")
        if isinstance(flows, Flow):
            flows = [flows]
        self.store = store
        self.registry = registry
        self._flows: dict[str, _Bound] = {}
        for flow in flows:
            if not isinstance(flow, Flow):
                raise InvalidType(f"Runner takes tenure.flow.Flow objects, got {type(flow).__name__}")
            if flow.name in self._flows:
                raise InvalidArgument(f"two flows are named {flow.name!r}: a job kind maps to one flow",
                                      problem="duplicate_flow")
            self._flows[flow.name] = _Bound(flow, registry, distributed)
        self.distributed = distributed
        if not self._flows:
            raise InvalidArgument("Runner needs at least one flow", problem="empty")
        #: The worker settings every worker this runner creates starts from.
        self.config = WorkerConfig.build(config, options)
        self.worker: Worker | None = None
        self._lock = threading.Lock()

    @property
    def flows(self) -> dict[str, Flow]:
        """The flows by job kind."""
        return {name: b.flow for name, b in self._flows.items()}

    @property
    def stop_grace(self) -> float:
        """The declared default grace of :meth:`stop`."""
        return self.config.stop_grace

    def task_versions(self, kind: str) -> dict[str, Any]:
        """The canonical ``{task: declared version}`` map a run of ``kind`` records."""
        return dict(sorted(self._flows[kind].versions.items()))

    def handlers(self) -> dict[str, Callable[..., Any]]:
        """``{flow name: handler}``, to merge into any worker's handler map; a distributed runner
        adds ``{"<flow name>:node": handler}`` for each flow's node jobs."""
        out: dict[str, Callable[..., Any]] = {name: FlowHandler(b) for name, b in self._flows.items()}
        if self.distributed:
            from .distributed import NodeHandler, node_kind

            out.update({node_kind(name): NodeHandler(b) for name, b in self._flows.items()})
        return out

    def create_worker(self, **overrides: Any) -> Worker:
        """A (not yet started) worker for the flows, with the runner's settings (``overrides``, each
        a :class:`tenure.WorkerConfig` field, win)."""
        return self.store.jobs.create_worker(self.handlers(), WorkerConfig.build(self.config, overrides))

    def start(self) -> Runner:
        """Create and start the runner's worker. Refused while it is running."""
        with self._lock:
            if self.worker is not None and self.worker.running:
                raise InvalidType("this runner is already running; stop() it before start() again")
            self.worker = self.create_worker()
            self.worker.start()
        return self

    def stop(self, grace: float | None = None) -> StopResult:
        """Stop the worker: cancel running tasks and wait up to ``grace`` seconds (default: the
        runner's declared ``stop_grace``). Never raises; answers ``{drained, in_flight}``."""
        from ..worker import StopResult

        worker = self.worker
        if worker is None:
            return StopResult(True, 0)
        return worker.stop(self.stop_grace if grace is None else grace)

    def stats(self) -> dict[str, int]:
        """The worker's counters (empty before :meth:`start`)."""
        return {} if self.worker is None else self.worker.stats()

    def __enter__(self) -> Runner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
