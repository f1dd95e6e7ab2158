"""kill -9 of a worker in the middle of a durable run, on both engines, with real
processes: the run waits for a signal (parked: nothing to kill), fans out 5 children, then its
worker is SIGKILLed inside the next node. A second worker, whose injected clock is past the dead
worker's lease, resumes it: the wait answers the signal it recorded (a second signal of the same
key stays unreceived), the fan-out answers the children's recorded results (no child runs twice),
and only the interrupted node and the rest run again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import tenure

from ._kill_durable import CHILD_LEASE_MS, build, handlers
from ._kill_flow import calls
from ._support import wait_for, wait_state

CHILD = Path(__file__).with_name("_kill_durable.py")


def test_kill_9_after_a_signal_and_a_fan_out_resumes_without_repeating_either(engine_url, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CHILD.parent), os.environ.get("PYTHONPATH", "")])}
    store = tenure.connect(engine_url)
    run = store.jobs.enqueue("kill-durable", {"input": {"n": 5}}, id="run-kd")
    key = f"go:{run}"
    child = subprocess.Popen([sys.executable, str(CHILD), engine_url, str(tmp_path)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def parked():
            job = store.jobs.get(run)
            return job.state == "pending" and job.attempts == 1 or child.poll() is not None
        wait_for(parked, timeout=30, what="the run to park on its signal")
        assert child.poll() is None, child.stderr.read().decode()
        assert store.jobs.get(run).lease_until is None  # parked: no lease for a kill to strand
        store.signals.send(key, {"approved": True})
        wait_for(lambda: (tmp_path / "b-started").exists() or child.poll() is not None, timeout=30,
                 what="node b to start after the wait and the fan-out")
        assert child.poll() is None, child.stderr.read().decode()
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    pid = child.pid
    before = calls(tmp_path)
    assert sorted(n for n, _ in before if n.startswith("sq")) == [f"sq{i}" for i in range(5)]
    assert store.jobs.get(run).state == "leased"  # nobody settled the killed attempt
    store.signals.send(key, {"approved": "again"})  # must not be received: the wait is recorded
    store.close()

    later = tenure.connect(engine_url, clock=lambda: time.time_ns() // 1_000_000 + CHILD_LEASE_MS + 60_000)
    flow = build(tmp_path, block_b=False)
    worker = later.jobs.create_worker(handlers(tmp_path, flow, later), concurrency=3, poll_interval=0.05).start()
    try:
        job = wait_state(later, run, "done", timeout=30)
    finally:
        worker.stop(2)
    assert job.result == {"sum": sum(i * i for i in range(5)), "signal": {"approved": True}}
    assert later.signals.pending(key) == 1  # the second signal: still there, for nobody
    after = calls(tmp_path)[len(before):]
    assert after == [("b", os.getpid()), ("end", os.getpid())]  # a, wait, fan and the children: not again
    names = [n for n, _ in calls(tmp_path)]
    assert names.count("a") == 1 and names.count("wait-got") == 1 and names.count("fan") == 2
    assert all(p == pid for _, p in before)
    later.close()
