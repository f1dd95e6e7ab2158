"""Real processes: kill -9 a worker process mid-job and another completes the
job after the lease, exactly once; ``handle.result()`` across processes; ``App.run_worker`` with
SIGTERM (graceful) and a second signal (at once); cross-process pickup within milliseconds
(spec 6.5); the handler transaction under kill -9 chaos.

Worker processes run ``tests/worker/_tasks.py``. Across processes the clock cannot be injected, so
these tests use short real leases (500 ms) and wait for the job's state, never a fixed sleep.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import tenure
from tenure.errors import JobDead

from ._tasks import make_app
from ._wk import counter_table, counter_value, wait_for

HERE = Path(__file__).resolve().parent
SRC = Path(tenure.__file__).resolve().parents[1]


def _env(url: str) -> dict[str, str]:
    return dict(os.environ, TENURE_URL=url, PYTHONPATH=os.pathsep.join([str(HERE), str(SRC)]),
                TENURE_LOG_LEVEL="INFO")


class Workers:
    """Worker processes running ``_tasks.py``; all killed at teardown."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.url, self.tmp = url, tmp_path
        self.procs: list[subprocess.Popen] = []

    def spawn(self, *args: str) -> subprocess.Popen:
        log = open(self.tmp / f"worker-{len(self.procs)}.log", "wb")  # closed by the child's exit
        proc = subprocess.Popen([sys.executable, str(HERE / "_tasks.py"), *args], env=_env(self.url),
                                stdout=subprocess.DEVNULL, stderr=log)
        proc.log_path = log.name  # type: ignore[attr-defined]
        log.close()
        self.procs.append(proc)
        return proc

    def alive(self) -> list[subprocess.Popen]:
        return [p for p in self.procs if p.poll() is None]

    def kill_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.fixture
def workers(engine_url, tmp_path):
    w = Workers(engine_url, tmp_path)
    yield w
    w.kill_all()


@pytest.fixture
def app(engine_url):
    a = make_app(engine_url)
    yield a
    a.store.close()


def _ledger(path: Path) -> list[list]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_kill_9_mid_job_another_worker_completes_it_exactly_once(app, workers, tmp_path):
    """A worker process is killed with SIGKILL while its handler runs; after the lease (500 ms)
    another worker process reclaims the job and completes it: one settlement, two executions."""
    ledger = tmp_path / "ledger.jsonl"
    for _ in range(2):
        workers.spawn("--lease-ms", "500", "--poll", "0.05")
    handle = app.tasks["stall_first"].enqueue(ledger=str(ledger))
    first = wait_for(lambda: _ledger(ledger), timeout=30, what="the first attempt to start")[0]
    assert first[:2] == [handle.id, 1]
    victim = first[2]
    os.kill(victim, signal.SIGKILL)
    t_kill = time.monotonic()
    result = handle.result(timeout=30)
    took = time.monotonic() - t_kill
    survivors = {p.pid for p in workers.alive()}
    assert victim not in survivors and result["pid"] in survivors
    assert result["attempt"] == 2
    assert took < 10, f"recovery took {took:.1f} s with a 500 ms lease"
    job = handle.get()
    assert (job.state, job.attempts, job.lease_generation) == ("done", 2, 2)
    assert [(r[1], r[2]) for r in _ledger(ledger)] == [(1, victim), (2, result["pid"])]
    assert app.store.jobs.counts()["done"] == 1


def test_run_worker_results_across_processes_and_sigterm_is_graceful(app, workers, tmp_path):
    """``handle.result()`` answers a result computed in another process (and raises JobDead with
    the last error for a dead job); SIGTERM stops ``run_worker`` gracefully: the handler in flight
    finishes, its job is done, the process exits 0."""
    proc = workers.spawn("--concurrency", "2", "--poll", "0.05")
    assert app.tasks["add"].enqueue(2, 3).result(timeout=30) == 5
    with pytest.raises(JobDead) as ei:
        app.tasks["fail_always"].enqueue("no such mailbox").result(timeout=10)
    assert ei.value.code == "TN2080" and "no such mailbox" in str(ei.value)
    ledger = tmp_path / "busy.jsonl"
    busy = app.tasks["busy"].enqueue(0.4, str(ledger))
    wait_for(lambda: _ledger(ledger), timeout=10, what="the busy handler to start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    assert busy.result(timeout=1) == "finished"
    assert [r[3] for r in _ledger(ledger)] == ["start", "end"]
    log = Path(proc.log_path).read_text()
    assert "tenure worker started" in log and "stopping gracefully" in log and "tenure worker stopped" in log


def test_run_worker_second_signal_exits_at_once(app, workers, tmp_path):
    """A second SIGTERM while the graceful stop waits for a handler exits at once (status 130); the
    job is released first: pending again now, its retries left unchanged, never claimed
    back by the stopping worker."""
    proc = workers.spawn("--stop-grace", "30", "--lease-ms", "60000")
    ledger = tmp_path / "busy.jsonl"
    busy = app.tasks["busy"].enqueue(30, str(ledger))
    wait_for(lambda: _ledger(ledger), timeout=30, what="the busy handler to start")
    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "stopping gracefully" in Path(proc.log_path).read_text(), what="the graceful stop")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    # "At once" means well before the 30 s stop grace; a loaded 2-core machine took 3 s to let the
    # process release the job and exit, so the bound is a third of the grace, not 2 s.
    try:
        status = proc.wait(10)
    except subprocess.TimeoutExpired:
        pytest.fail("no exit 10 s after the second signal:\n" + Path(proc.log_path).read_text())
    assert status == 130, Path(proc.log_path).read_text()
    assert time.monotonic() - t0 < 10
    job = busy.get()
    assert (job.state, job.attempts, job.max_attempts) == ("pending", 1, 6), Path(proc.log_path).read_text()
    assert [r[3] for r in _ledger(ledger)] == ["start"]


_ENQUEUER = """
import sys, time, tenure
store = tenure.connect(sys.argv[1])
store.jobs  # open (and check the schema) before the clock starts
for i in range(int(sys.argv[2])):
    t = time.time()
    store.jobs.enqueue("xp", {"t": t})
    time.sleep(0.05)
store.close()
"""


def test_6_5_a_job_from_another_process_starts_within_milliseconds(live_store, make_worker, engine_url):
    """spec 6.5 (tenure goes further than the seed's "within one poll"): with
    poll_interval=60 s, jobs enqueued by another process start within milliseconds (SQLite:
    the ``PRAGMA data_version`` watcher; PostgreSQL: LISTEN/NOTIFY); no poll was needed."""
    latencies, done = [], threading.Event()

    def handler(payload, ctx):
        latencies.append(time.time() - payload["t"])
        if len(latencies) == 5:
            done.set()

    w = make_worker(live_store, {"xp": handler}, poll_interval=60, maintenance=False)
    w.start()
    time.sleep(0.05)
    out = subprocess.run([sys.executable, "-c", _ENQUEUER, engine_url, "5"], env=_env(engine_url),
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    assert done.wait(10), f"only {len(latencies)} of 5 jobs started"
    latencies.sort()
    print(f"cross-process enqueue->start on {live_store.dialect}: "
          f"median {latencies[2] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms")
    # Typically a few ms on both engines; the bounds are generous for loaded machines (a
    # PostgreSQL round trip there can take tens of ms, and a pickup needs three or four).
    assert latencies[2] < (0.05 if live_store.dialect == "sqlite" else 0.25), latencies
    assert latencies[-1] < 1.0, latencies
    assert w.stats()["polls"] == 0 and w.stats()["wakes"] >= 1


TABLE = "tn_w_chaos_counter"


@pytest.mark.parametrize("mode", ["tx", "plain"])
def test_handler_transaction_under_kill_9_chaos(app, workers, tmp_path, mode):
    """Under chaos: worker processes are SIGKILLed right after a handler incremented a
    counter (inside ``ctx.transaction()`` for "tx", before it committed; outside it for "plain").
    With the handler transaction the counter ends exactly at the number of jobs; the plain handler
    counts the killed attempts twice."""
    n_jobs, n_kills = 8, 2
    n_workers, concurrency, hold = 2, 2, 0.3
    # Each "tx" handler holds the counter row's lock for `hold` s, so with every slot busy a block
    # queues for up to slots x hold. Before that fix, a block had to COMMIT within the ~2/3 of its
    # lease left when it opened (a 1 s lease livelocked on PostgreSQL: every attempt expired just
    # before COMMIT, was reclaimed and queued again); now the block holds the lease until it ends
    # (docs/guarantees.md, "The block holds the lease"), and 3 s only sets how soon a killed
    # worker's jobs come back. The old sizing rule still holds here, as a margin.
    lease_ms = 3000
    assert n_workers * concurrency * hold < 0.75 * (2 / 3) * lease_ms / 1000
    counter_table(app.store, TABLE)
    ledger = tmp_path / "count.jsonl"
    handles = [app.tasks["count"].enqueue(str(ledger), mode, TABLE, hold) for _ in range(n_jobs)]
    args = ("--lease-ms", str(lease_ms), "--poll", "0.05", "--concurrency", str(concurrency))
    for _ in range(n_workers):
        workers.spawn(*args)
    killed: set[int] = set()
    seen = 0
    deadline = time.monotonic() + 60
    while len(killed) < n_kills and time.monotonic() < deadline:
        lines = _ledger(ledger)
        fresh, seen = lines[seen:], len(lines)
        for _job, _attempt, pid, _what in fresh:  # a handler that just incremented, still holding
            if pid not in killed and any(p.pid == pid and p.poll() is None for p in workers.procs):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
                workers.spawn(*args)
                break
        time.sleep(0.003)
    assert len(killed) == n_kills
    results = [h.result(timeout=60) for h in handles]
    executions = _ledger(ledger)
    reexecuted = {job for job, attempt, _, _ in executions if attempt > 1}
    assert reexecuted, "no kill landed mid-handler"
    counts = app.store.jobs.counts()
    assert counts["done"] == n_jobs and counts["leased"] == counts["pending"] == counts["dead"] == 0
    for h, res in zip(handles, results, strict=True):
        assert res["attempt"] == h.get().attempts  # the settlement that landed is the last attempt's
    total = counter_value(app.store, TABLE)
    if mode == "tx":
        assert total == n_jobs, f"{total} increments for {n_jobs} jobs ({len(executions)} executions)"
    else:
        assert total >= len(executions) > n_jobs  # each killed attempt's increment stayed
