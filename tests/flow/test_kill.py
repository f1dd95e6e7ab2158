"""kill -9 mid-run (spec 7.3, 7.5, 5.1), on both engines, with real processes.

A worker process runs ``a -> b -> c -> d``; ``c`` blocks; the test SIGKILLs the process. A second
worker, whose injected clock is past the dead worker's lease (no sleeping for it), reclaims the
run: it restores ``a`` and ``b`` and runs only ``c`` and ``d``. Task invocations are counted in a
side file written by both processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import tenure
from tenure.flow import RUN_NODE, Runner, describe_run

from ._kill_flow import CHILD_LEASE_MS, build, calls
from ._support import rows, wait_for, wait_state

CHILD = Path(__file__).with_name("_kill_flow.py")


def test_kill_9_mid_run_then_the_next_attempt_reruns_only_the_unfinished_nodes(engine_url, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CHILD.parent), os.environ.get("PYTHONPATH", "")])}
    store = tenure.connect(engine_url)
    job_id = store.jobs.enqueue("kill-me", {"input": {"n": 4}}, id="run-kill")
    child = subprocess.Popen([sys.executable, str(CHILD), engine_url, str(tmp_path)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (tmp_path / "c-started").exists() or child.poll() is not None, timeout=30,
                 what="the child's node c to start")
        assert child.poll() is None, child.stderr.read().decode()
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    pid = child.pid
    assert calls(tmp_path) == [("a", pid), ("b", pid), ("c", pid)]
    job = store.jobs.get(job_id)
    assert job.state == "leased" and job.lease_generation == 1  # nobody settled it
    assert [(n, g) for n, _, g in rows(store, job_id)] == [(RUN_NODE, 1), ("a", 1), ("b", 1)]
    view = describe_run(store, job_id)
    assert [(n["id"], n["status"]) for n in view["nodes"]] == [
        ("a", "done"), ("b", "done"), ("c", "running"), ("d", "pending")]
    store.close()

    # A second worker whose clock is past the dead worker's lease reclaims the run.
    later = tenure.connect(engine_url, clock=lambda: time.time_ns() // 1_000_000 + CHILD_LEASE_MS + 60_000)
    runner = Runner(later, [build(tmp_path, block_c=False)], poll_interval=0.05).start()
    try:
        job = wait_state(later, job_id, "done", timeout=20)
    finally:
        runner.stop()
    assert job.result == {"total": 41, "run": "run-kill"} and job.attempts == 2
    # a and b were restored, not re-run; only the unfinished c and d ran again, in this process
    assert calls(tmp_path) == [("a", pid), ("b", pid), ("c", pid), ("c", os.getpid()), ("d", os.getpid())]
    assert rows(later, job_id) == []
    later.close()
