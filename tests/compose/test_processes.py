"""across processes on both engines: a 3-step chain, a group of 20, a chord
whose callback receives all 20 results, and a dependency whose parent dies (its dependents are
cancelled, by default) — run by two worker processes that are SIGKILLed mid-step and replaced.
Every step completes exactly once in the store (one effect row each, written by the handler
transaction with its completion), every callback fires exactly once, no cancelled dependent ever
runs. Real leases (1 s), so a killed step comes back; the test waits on states, never a sleep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tenure
from tenure.errors import JobDead

from ._compose_tasks import FIRED, make_app

HERE = Path(__file__).resolve().parent
SRC = Path(tenure.__file__).resolve().parents[1]
LEASE_MS = 1000


class Workers:
    def __init__(self, url: str, tmp: Path) -> None:
        self.url, self.tmp, self.procs = url, tmp, []

    def spawn(self) -> subprocess.Popen:
        env = dict(os.environ, TENURE_URL=self.url, PYTHONPATH=os.pathsep.join([str(HERE), str(SRC)]))
        log = open(self.tmp / f"worker-{len(self.procs)}.log", "wb")
        proc = subprocess.Popen([sys.executable, str(HERE / "_compose_tasks.py"), "4", str(LEASE_MS)], env=env,
                                stdout=subprocess.DEVNULL, stderr=log)
        log.close()
        self.procs.append(proc)
        return proc

    def alive(self) -> list[subprocess.Popen]:
        return [p for p in self.procs if p.poll() is None]


@pytest.fixture
def workers(engine_url, tmp_path):
    w = Workers(engine_url, tmp_path)
    yield w
    for p in w.procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def _ledger(path: Path) -> list[list]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.timeout(240)
def test_chain_group_chord_and_a_dying_parent_under_sigkill(engine_url, workers, tmp_path):
    app = make_app(engine_url)
    store = app.store
    with store.transaction() as tx:
        tx.execute(f"DROP TABLE IF EXISTS {FIRED}")
        tx.execute(f"CREATE TABLE {FIRED} (job_id TEXT PRIMARY KEY, what TEXT NOT NULL)")
    ledger = str(tmp_path / "ledger.jsonl")
    add, total, fail = app.tasks["c_add"], app.tasks["c_sum"], app.tasks["c_fail"]

    chain = tenure.chain(add.s(1, 2, ledger), add.s(10, ledger), add.s(100, ledger)).enqueue()
    group = tenure.group([add.s(i, 1000, ledger) for i in range(20)]).enqueue()
    chord = tenure.chord(tenure.group([add.s(i, 0, ledger) for i in range(20)]), total.s(ledger)).enqueue()
    parent = fail.enqueue(ledger)
    doomed = [store.jobs.enqueue("c_add", {"args": [0, 1, ledger]}, depends_on=[parent.id]) for _ in range(2)]
    grandchild = store.jobs.enqueue("c_add", {"args": [0, 1, ledger]}, depends_on=[doomed[0]])
    steps = chain.ids + group.ids + chord.ids

    for _ in range(2):
        workers.spawn()
    kills, seen, killed_pids = 0, 0, set()
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        counts = store.jobs.counts()
        if counts["done"] == len(steps) and not counts["pending"] and not counts["leased"]:
            break
        lines = _ledger(Path(ledger))
        fresh, seen = lines[seen:], len(lines)
        if kills < 3:
            # a step just started in a live worker: kill that worker mid-step, start another
            victim = next((p for _job, _attempt, pid, _what in fresh for p in workers.alive()
                           if p.pid == pid and pid not in killed_pids), None)
            if victim is not None:
                os.kill(victim.pid, signal.SIGKILL)
                victim.wait()
                killed_pids.add(victim.pid)
                kills += 1
                workers.spawn()
        time.sleep(0.01)

    assert chain.result(timeout=30) == 1 + 2 + 10 + 100
    assert group.result(timeout=30) == [i + 1000 for i in range(20)]
    assert chord.result(timeout=30) == {"sum": sum(range(20)), "n": 20}
    with pytest.raises(JobDead):
        parent.result(timeout=30)
    for job_id in [*doomed, grandchild]:
        job = store.jobs.get(job_id)
        assert job.state == "cancelled" and job.last_error.startswith("TN2103"), job

    executions = _ledger(Path(ledger))
    assert kills == 3, f"only {kills} kills landed mid-step"
    pids = {pid for _job, _attempt, pid, _what in executions}
    assert len(pids) >= 3  # two workers at least, plus the replacements of the killed ones
    ran = {job for job, *_ in executions}
    assert not ran & {*doomed, grandchild}, "a cancelled dependent ran"
    with store.transaction() as tx:
        fired = tx.execute(f"SELECT job_id, what FROM {FIRED}").fetchall()
    fired_ids = [f[0] for f in fired]
    # every step completed exactly once in the store: one effect row per step, no other
    assert sorted(fired_ids) == sorted(steps)
    assert sum(1 for f in fired if f[1] == "sum") == 1  # the chord's callback fired exactly once
    for job_id in steps:
        job = store.jobs.get(job_id)
        assert job.state == "done"
        assert [job_id, job.attempts] in [[e[0], e[1]] for e in executions]  # the landing attempt ran
    reexecuted = {job for job, attempt, *_ in executions if attempt > 1}
    assert reexecuted, "no kill landed mid-step"
    store.close()
