"""What a flow task sees: :class:`TaskContext` (its run, its inputs, its durable steps), and the
two ways a run stops short: :class:`TaskFailed` and :class:`RunInterrupted`; :func:`_make_dead`
settles a run dead when no retry can cure it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..durable import Steps, what_then
from ..errors import NestedRootCall, TenureError
from .registry import TaskImpl

if TYPE_CHECKING:
    from ..open_tx import Refusals
    from ..records import Job
    from ..store import Store
    from ..worker import CancelEvent, JobContext


log = logging.getLogger("tenure.flow")

class TaskFailed(RuntimeError):
    """A task raised (or returned a value that cannot be stored). The attempt fails with this
    message in ``last_error`` and is retried like any failed job; ``__cause__`` is the original."""

    def __init__(self, message: str, *, node_id: str, task: str) -> None:
        super().__init__(message)
        self.node_id = node_id
        self.task = task


class RunInterrupted(RuntimeError):
    """The run stopped because its cancellation was set (the worker stopping) before every node
    finished. The attempt fails; a later attempt resumes from the saved nodes."""

    def __init__(self, message: str, reason: Any = None) -> None:
        super().__init__(message)
        self.reason = reason


class TaskContext:
    """What a task receives: the run's input, its dependencies' values, the run's cancellation and
    the run id to thread into side effects as an idempotency key (spec 7.6, 7.7)."""

    __slots__ = ("node_id", "task", "version", "input", "needs", "flow", "_job_ctx", "_steps", "_run_id")

    def __init__(self, job_ctx: JobContext, flow: str, node_id: str, impl: TaskImpl, run_input: Any,
                 needs: Mapping[str, Any], run_id: str | None = None) -> None:
        self._job_ctx = job_ctx
        self._run_id = run_id  # a distributed run's node job runs under its own job id
        self.flow = flow
        self.node_id = node_id
        self.task = impl.name
        self.version = impl.version
        self.input = run_input
        self.needs: Mapping[str, Any] = MappingProxyType(dict(needs))
        self._steps: Steps | None = None

    def __getitem__(self, node_id: str) -> Any:
        """The value of a node this one needs."""
        try:
            return self.needs[node_id]
        except KeyError:
            raise KeyError(f"node {self.node_id!r} does not need {node_id!r} "
                           f"(its needs: {sorted(self.needs)})") from None

    @property
    def run_id(self) -> str:
        """The run id, which is the run's job id (also in a distributed run's node job)."""
        return self._run_id or self._job_ctx.job.id

    job_id = run_id

    @property
    def idempotency_key(self) -> str:
        """Stable across every attempt of the run: ``"<run id>:<node id>"``. Pass it to what the
        task touches so a re-run after a crash does not repeat an effect."""
        return f"{self.run_id}:{self.node_id}"

    @property
    def cancelled(self) -> CancelEvent:
        """The run's cancellation: the job handler's own ``ctx.cancelled`` (``is_set()``,
        ``wait(timeout)``, ``await wait_async()``, ``reason``)."""
        return self._job_ctx.cancelled

    @property
    def job(self) -> Job:
        return self._job_ctx.job

    @property
    def attempt(self) -> int:
        return self._job_ctx.lease.attempt

    @property
    def generation(self) -> int:
        """The generation of the attempt running this task (what its checkpoint is stamped with)."""
        return self._job_ctx.lease.generation

    @property
    def store(self) -> Store:
        return self._job_ctx.store

    # -- durable steps (tenure.durable): the node parks; the run holds no slot meanwhile -------
    def _durable(self) -> Steps:
        if self._steps is None:
            job_ctx = self._job_ctx
            self._steps = Steps(job_ctx.store, lambda: job_ctx.lease, scope=f"{self.node_id}:")
        return self._steps

    def sleep(self, seconds: Any) -> None:
        """Durable sleep: the run parks for ``seconds`` (no slot, no lease); when it is claimed
        again this node runs again from its start and this step returns at once."""
        self._durable().sleep(seconds)

    def sleep_until(self, when: Any) -> None:
        """Durable sleep until ``when`` (epoch ms or a datetime)."""
        self._durable().sleep_until(when)

    def wait_for_signal(self, key: str, timeout: Any = None) -> Any:
        """The payload of the next signal of ``key`` (``store.signals.send``), the run parked
        until it comes; :class:`tenure.errors.SignalTimeout` after ``timeout`` seconds."""
        return self._durable().wait_for_signal(key, timeout)

    def map(self, kind: str, payloads: Any, **options: Any) -> list[Any]:
        """Dynamic fan-out: one child job of ``kind`` per payload, spread over every worker; their
        results in order once all are done (the run parked until then)."""
        return self._durable().map(kind, payloads, **options)

    def call(self, kind: str, payload: Any = None, **options: Any) -> Any:
        """A child job or a child workflow (``call("other-flow", {"input": ...})``) and its result."""
        return self._durable().call(kind, payload, **options)

    def _raise_swallowed(self, outcome: Any) -> None:
        """After the task returned (``outcome`` is its value) or raised (``outcome`` is the
        exception): when one of its steps parked and the task did not let the park through (an
        ``except`` caught it), log a WARNING and raise that park, so the node parks as the step
        asked instead of being saved (or failed) on a step that had not finished."""
        steps = self._steps
        if steps is None or steps.pending is None:
            return
        park = steps.pending
        if outcome is park and not steps.caught:  # raised by the step and let through: as asked
            return
        did = what_then(park, not isinstance(outcome, BaseException), outcome)
        log.warning("node %r of run %r swallowed the park of a durable step (an except caught "
                    "tenure.durable.Park, %s) and then %s; the node parks as the step asked",
                    self.node_id, self.run_id, park, did)
        raise park

    def _refusal(self, noted: Refusals, ok: bool, value: Any) -> BaseException | None:
        """After the task returned (``ok``) or raised ``value``: the root call refused inside one of
        its own transactions (TN2071, in ``noted``) that the node fails with, whatever the task did
        next (None: none was). When the task did not let the refusal through (an ``except`` caught
        it, and the error its block raised at its end), logs a WARNING saying so."""
        err = noted.refused
        if err is None or isinstance(value, NestedRootCall):
            return err if err is None else value
        log.warning("node %r of run %r swallowed a root call refused inside its own transaction (%s) "
                    "and then %s; the node fails with that refusal", self.node_id, self.run_id, err,
                    what_then(err, ok, value))
        return err

    def __repr__(self) -> str:
        return f"<TaskContext run={self.run_id!r} node={self.node_id!r} task={self.task!r}@{self.version!r}>"


def _make_dead(ctx: JobContext, err: TenureError) -> None:
    """A refusal no retry can cure: settle the attempt ``dead`` now, with the refusal as
    ``last_error``. The worker's own settlement of the same attempt is then a no-op."""
    try:
        ctx.store.jobs.fail(ctx.lease, err, dead=True)
    except TenureError as exc:
        log.warning("could not mark run %s dead after a refused resume: %s", ctx.job.id, exc)
