"""The flow of the kill -9 test, and (run as a script) the worker process that gets killed.

``python _kill_flow.py <store url> <workdir> [distributed]`` starts a real worker running the flow
``a -> b -> c -> d``; node ``c`` writes ``c-started`` and blocks forever, so the parent can
SIGKILL the process mid-run. Every task invocation appends one line to ``<workdir>/calls.log``
(O_APPEND, so lines from both processes interleave safely)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from tenure.flow import Flow

CHILD_LEASE_MS = 60_000


def record(workdir: Path, node: str) -> None:
    """Append ``<node> <pid>`` to the side file."""
    fd = os.open(workdir / "calls.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, f"{node} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def calls(workdir: Path) -> list[tuple[str, int]]:
    """Every task invocation so far, as ``(node, pid)``, in order."""
    path = workdir / "calls.log"
    if not path.exists():
        return []
    return [(node, int(pid)) for node, pid in (line.split() for line in path.read_text().splitlines())]


def build(workdir: Path, *, block_c: bool) -> Flow:
    flow = Flow("kill-me", revision="1", output="d")

    @flow.task(version=1)
    def a(ctx):
        record(workdir, "a")
        return {"n": ctx.input["n"]}

    @flow.task(needs=["a"], version=1)
    def b(ctx):
        record(workdir, "b")
        return ctx["a"]["n"] * 10

    @flow.task(needs=["b"], version=1)
    def c(ctx):
        record(workdir, "c")
        if block_c:
            (workdir / "c-started").write_text(str(os.getpid()))
            threading.Event().wait()  # until SIGKILL
        return ctx["b"] + 1

    @flow.task(needs=["c"], version=1)
    def d(ctx):
        record(workdir, "d")
        return {"total": ctx["c"], "run": ctx.run_id}

    return flow


def main(url: str, workdir: str, mode: str = "in-process") -> None:
    import tenure
    from tenure.flow import Runner

    store = tenure.connect(url)
    runner = Runner(store, [build(Path(workdir), block_c=True)], lease=CHILD_LEASE_MS / 1000, poll_interval=0.05,
                    distributed=mode == "distributed", concurrency=2)
    runner.start()
    (Path(workdir) / "worker-up").write_text(str(os.getpid()))
    threading.Event().wait()


if __name__ == "__main__":
    main(*sys.argv[1:4])
