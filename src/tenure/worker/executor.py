"""The executor: runs each attempt's handler, on a slot thread (sync) or the worker's event
loop (async), and hands what it returned or raised to the completer.

Sync attempts reach the slot threads through a :class:`~tenure.worker.slots.SlotPool`: a slot
thread that finishes a handler takes the next queued attempt itself instead of parking."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from typing import Any

from .. import _validate as v
from ..errors import (
    UnstorableValue,
)
from ..open_tx import REFUSAL_SINK
from ..tracing import run_span, run_span_or_none
from .attempt import _RUNNING, SHUTDOWN, Attempt, cancels_task
from .context import swallowed_park, swallowed_refusal
from .lifecycle import DETACHED, RUNNING, SETTLING
from .slots import SlotPool
from .state import WorkerState

log = logging.getLogger("tenure.worker")


class Executor(WorkerState):
    """Runs handlers (see the module docstring)."""

    def _slot(self, slots: SlotPool) -> None:
        gate = threading.Lock()  # this thread parks on it (see SlotPool.take)
        gate.acquire()
        take, finish, running = slots.take, self._finish, _RUNNING
        while True:
            attempt = take(gate)
            if attempt is None:
                return
            running.attempt = attempt  # see Attempt.cancel_by_operator
            try:
                span = run_span_or_none(attempt.job, attempt.lease.attempt)
                if span is None:  # no trace to record: no context manager either
                    result = _call(attempt)
                else:
                    with span:
                        result = _call(attempt)
            except BaseException as exc:  # noqa: BLE001 - a handler cannot break the loop (6.22)
                running.attempt = None
                finish(attempt, False, exc)
            else:
                running.attempt = None
                finish(attempt, True, result)

    def _spawn_async(self, attempts: list[Attempt]) -> None:
        """Start a batch of async attempts on the worker's event loop with ONE wake-up of the loop:
        ``run_coroutine_threadsafe`` per attempt wrote to the loop's self-pipe once per job."""
        loop = self._loop
        assert loop is not None  # started with the worker when any handler is async
        for attempt in attempts:
            attempt.loop = loop
        loop.call_soon_threadsafe(self._start_tasks, loop, attempts)

    def _start_tasks(self, loop: asyncio.AbstractEventLoop, attempts: list[Attempt]) -> None:
        """On the event loop: a task per attempt (each keeps itself on its attempt, see below)."""
        for attempt in attempts:
            loop.create_task(self._run_async(attempt))

    async def _run_async(self, attempt: Attempt) -> None:
        task = attempt.task = asyncio.current_task()
        assert task is not None  # this coroutine runs as a task
        if attempt.cancelled.is_set() and cancels_task(attempt.cancelled.reason):
            task.cancel()  # set before the task existed: Attempt.cancel had no task to cancel
        REFUSAL_SINK.set(attempt)  # this task's own context: a refused root call fails the attempt
        try:
            with run_span(attempt.job, attempt.lease.attempt):
                result = await attempt.handler(attempt.job.payload, attempt.ctx)
        except BaseException as exc:  # noqa: BLE001
            self._finish(attempt, False, exc)
        else:
            self._finish(attempt, True, result)

    def _finish(self, attempt: Attempt, ok: bool, value: Any) -> None:
        """The handler returned (ok) or raised: queue its settlement, unless it cannot settle.
        Never raises (it runs on a slot thread or the event loop)."""
        try:
            if attempt.progress is not None and attempt.state is not DETACHED:
                attempt.progress.flush()  # the last report is stored before the attempt settles
            if attempt.state is DETACHED:
                return  # stop() gave up on it: write nothing, count nothing (6.26)
            with attempt.settle_lock:
                taken = attempt.state is RUNNING
                if taken:
                    attempt.state = SETTLING
            if not taken:  # the handler transaction or the timeout already settled it
                self._release(attempt)
                return
            if attempt.timed_out:
                ok, value = False, "job timed out"
            elif attempt.refused is not None:  # a root call inside its own block: whatever came after
                ok, value = False, swallowed_refusal(attempt, ok, value)
            elif attempt.steps is not None and (park := swallowed_park(attempt, ok, value)) is not None:
                ok, value = False, park  # a durable step parked: whatever the handler did after it
            elif ok:
                if value is not None:
                    try:
                        value = v.dump_json(value, "the handler's result", self.store.max_payload_bytes)
                    except Exception as exc:  # noqa: BLE001 - whatever a strange object raises
                        # The attempt fails with TN1004 (retried within max_attempts), never loops.
                        ok, value = False, exc if isinstance(exc, UnstorableValue) else UnstorableValue(
                            f"the handler's result cannot be stored: {v.error_message(exc)}")
            elif isinstance(value, asyncio.CancelledError) and attempt.cancelled.reason is SHUTDOWN:
                value = "the worker stopped while the job ran (cancelled)"
            self._to_settle((attempt, ok, value))
        except BaseException:  # last resort: the lease expires, the job is reclaimed
            log.exception("finishing job %s failed", attempt.job.id)

    def _to_settle(self, item: tuple[Attempt, bool, Any]) -> None:
        """Hand a finished attempt to be settled (the completer may settle it here instead)."""
        self._done.put(item)


def _call(attempt: Attempt) -> Any:
    """Run a sync slot's handler; an awaitable it returns is run to its end on a loop of its own.
    A root call refused inside the handler's own transaction is noted on ``attempt.refused``."""
    token = REFUSAL_SINK.set(attempt)
    try:
        result = attempt.handler(attempt.job.payload, attempt.ctx)
        if result is not None and inspect.isawaitable(result):
            result = asyncio.run(_await(result))
    finally:
        REFUSAL_SINK.reset(token)
    return result


async def _await(awaitable: Any) -> Any:
    return await awaitable
