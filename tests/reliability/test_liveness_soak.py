"""Liveness soak (opt-in: ``pytest -m liveness_soak``; \"Done when\"): for
``$TENURE_LIVENESS_SOAK_SECONDS`` (default 300) on each engine, the test process enqueues a mix of
healthy jobs and bad ones into several real worker processes under the supervisor
(``python -m tenure.supervisor``), with a short lease so recovery is quick:

- **crash**: the handler kills its process (``os._exit``): recovered by the next claim, dead once
  its attempts are spent (bounded reclaim, ), its batch-mates unharmed;
- **hang**: the handler ignores its 0.2 s timeout forever: a zombie slot, the child turns unhealthy
  and exits 75, the supervisor replaces it (item 5);
- **nul**: the handler raises an error whose message holds a NUL and a lone surrogate;
  **surrogate**: it returns a lone surrogate (un-storable outcomes, item 2);
- **ok**: returns ``2 * n``.

Then the queue must drain: every healthy job ``done`` with its own result, every bad job ``dead``
within its ``max_attempts``, nothing left pending, failed or leased, and every job listable."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import tenure

APP = textwrap.dedent("""
    import os
    import time

    import tenure

    app = tenure.App()

    @app.task(name="soak.ok", max_attempts=20)
    def ok(n):
        return 2 * n

    @app.task(name="soak.crash", max_attempts=2)
    def crash():
        os._exit(1)

    @app.task(name="soak.hang", max_attempts=2, timeout=0.2)
    def hang():
        time.sleep(3600)

    @app.task(name="soak.nul", max_attempts=2)
    def nul():
        raise RuntimeError("bad \\x00 byte and a lone \\ud800 surrogate")

    @app.task(name="soak.surrogate", max_attempts=2)
    def surrogate():
        return {"text": "\\udc80"}
""")

#: kind -> (share of enqueued jobs, enqueue options)
MIX = {
    "crash": (0.003, {"max_attempts": 2}),
    "hang": (0.005, {"max_attempts": 2, "timeout": 0.2}),
    "nul": (0.005, {"max_attempts": 2}),
    "surrogate": (0.005, {"max_attempts": 2}),
}
LEASE_MS = 2000
PROCESSES, CONCURRENCY = 3, 4
BATCH, EVERY_S = 40, 1.0


def _pick(rng: random.Random) -> str:
    r = rng.random()
    for kind, (share, _) in MIX.items():
        if r < share:
            return kind
        r -= share
    return "ok"


@pytest.mark.liveness_soak
@pytest.mark.timeout(0)
def test_bad_jobs_die_within_their_attempts_and_healthy_ones_finish(engine_url, tmp_path):
    seconds = float(os.environ.get("TENURE_LIVENESS_SOAK_SECONDS", "300"))
    (tmp_path / "soakapp.py").write_text(APP)
    store = tenure.connect(engine_url)
    rng = random.Random(19)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENURE_")}
    env.update({"TENURE_LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1"})
    log = open(tmp_path / "supervisor.log", "w")  # closed below
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tenure.supervisor",
            "soakapp:app",
            "--url",
            engine_url,
            "--processes",
            str(PROCESSES),
            "--concurrency",
            str(CONCURRENCY),
            "--lease",
            f"{LEASE_MS}ms",
            "--stop-grace",
            "0.3",
        ],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    expected: dict[str, tuple[str, int]] = {}  # job id -> (kind, n)
    try:
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline:
            rows = []
            for _ in range(BATCH):
                kind = _pick(rng)
                args = [n] if kind == "ok" else []
                opts = {} if kind == "ok" else MIX[kind][1]
                rows.append(
                    {
                        "kind": f"soak.{kind}",
                        "payload": {"args": args, "kwargs": {}},
                        "max_attempts": 20,
                        **opts,
                    }
                )
                n += 1
            ids = store.jobs.enqueue_many(rows)
            for job_id, row in zip(ids, rows, strict=True):
                expected[job_id] = (
                    row["kind"].split(".", 1)[1],
                    row["payload"]["args"][0] if row["payload"]["args"] else -1,
                )
            assert proc.poll() is None, (tmp_path / "supervisor.log").read_text()[-3000:]
            time.sleep(EVERY_S)
        drain_until = time.monotonic() + max(120.0, seconds)
        while True:
            c = store.jobs.counts()
            if c["pending"] + c["failed"] + c["leased"] == 0:
                break
            assert time.monotonic() < drain_until, f"the queue never drained: {c}"
            assert proc.poll() is None, (tmp_path / "supervisor.log").read_text()[-3000:]
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
    seen: dict[str, object] = {}
    after = None
    while True:  # every job is listable (a row the store cannot show would fail the page)
        page = store.jobs.page(after=after, limit=1000)
        for job in page.items:
            seen[job.id] = job
        if not page.next_after:
            break
        after = page.next_after
    store.close()
    assert set(expected) <= set(seen)
    wrong = []
    for job_id, (kind, n) in expected.items():
        job = seen[job_id]
        if kind == "ok":
            if (job.state, job.result) != ("done", 2 * n):
                wrong.append((kind, job_id, job.state, job.result, job.attempts, job.last_error))
        elif job.state != "dead" or job.attempts > MIX[kind][1]["max_attempts"]:
            wrong.append((kind, job_id, job.state, job.attempts, job.last_error))
    kinds = {k: sum(1 for kind, _ in expected.values() if kind == k) for k in ("ok", *MIX)}
    supervisor = (tmp_path / "supervisor.log").read_text()
    print(
        f"liveness soak {seconds:.0f}s on {store.dialect}: {len(expected)} jobs {kinds}; "
        f"children replaced: {supervisor.count('restarting')} "
        f"(unhealthy {supervisor.count('status 75')})"
    )
    assert wrong == [], wrong[:20]
