"""tenure.flow: durable workflows — DAGs of tasks run as one job, checkpointed node by node,
resumed after a crash, and refused by name when a resume would not be the same run
(spec §7). See ``docs/workflows.md``.

```python
from tenure.flow import Flow, Runner

flow = Flow("sync-report", revision="1", output="report")

@flow.task(version=1)
def fetch(ctx): ...

@flow.task(needs=["fetch"], version=1)
def report(ctx): ...

runner = Runner(store, flows=[flow]).start()
store.jobs.enqueue("sync-report", {"input": {"day": "2026-08-05"}})
```

The queue core never imports this package (asserted by test): it builds only on the public
store API — ``ctx.checkpoints``, ``ctx.cancelled``, ``jobs.fail``.
"""

from __future__ import annotations

from .context import RunInterrupted, TaskContext, TaskFailed
from .document import DEFAULT_MAX_PARALLEL, Flow, Node
from .identity import RUN_NODE, RunIdentity, input_hash, task_versions_hash
from .registry import Registry, TaskImpl
from .runner import FlowHandler, Runner
from .runs import DESCRIBE_VERSION, describe_run, restart

__all__ = [
    "DEFAULT_MAX_PARALLEL", "DESCRIBE_VERSION", "RUN_NODE", "Flow", "FlowHandler", "Node", "Registry",
    "RunIdentity", "RunInterrupted", "Runner", "TaskContext", "TaskFailed", "TaskImpl", "describe_run",
    "input_hash", "restart", "task_versions_hash",
]
