"""The flow of the durable kill -9 test, and (run as a script) the worker process that gets killed.

``python _kill_durable.py <store url> <workdir>`` starts a real worker running the flow
``a -> wait (a signal) -> fan (5 children) -> b -> end`` and the children's kind ``sq``. Node ``b``
writes ``b-started`` and blocks forever, so the parent can SIGKILL the process after the wait
and the fan-out are checkpointed. Every invocation appends one line to ``<workdir>/calls.log``."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from tenure.flow import Flow

if __package__:
    from ._kill_flow import record
else:  # run as a script: tests/flow is sys.path[0]
    from _kill_flow import record

CHILD_LEASE_MS = 60_000


def build(workdir: Path, *, block_b: bool) -> Flow:
    flow = Flow("kill-durable", revision="1", output="end")

    @flow.task(version=1)
    def a(ctx):
        record(workdir, "a")
        return ctx.input["n"]

    @flow.task(needs=["a"], version=1)
    def wait(ctx):
        record(workdir, "wait")
        got = ctx.wait_for_signal(f"go:{ctx.run_id}")
        record(workdir, "wait-got")
        return got

    @flow.task(needs=["a", "wait"], version=1)
    def fan(ctx):
        record(workdir, "fan")
        return ctx.map("sq", list(range(ctx["a"])))

    @flow.task(needs=["fan"], version=1)
    def b(ctx):
        record(workdir, "b")
        if block_b:
            (workdir / "b-started").write_text(str(os.getpid()))
            threading.Event().wait()  # until SIGKILL
        return sum(ctx["fan"])

    @flow.task(needs=["b", "wait"], version=1)
    def end(ctx):
        record(workdir, "end")
        return {"sum": ctx["b"], "signal": ctx["wait"]}

    return flow


def handlers(workdir: Path, flow: Flow, store) -> dict:
    from tenure.flow import Runner

    def sq(payload, ctx):
        record(workdir, f"sq{payload}")
        return payload * payload

    return {**Runner(store, [flow]).handlers(), "sq": sq}


def main(url: str, workdir: str) -> None:
    import tenure

    store = tenure.connect(url)
    flow = build(Path(workdir), block_b=True)
    worker = store.jobs.create_worker(handlers(Path(workdir), flow, store), concurrency=3,
                                      lease=CHILD_LEASE_MS / 1000, poll_interval=0.05)
    worker.start()
    (Path(workdir) / "worker-up").write_text(str(os.getpid()))
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
