"""Soak (opt-in: ``pytest -m soak``): a bounded mixed load — enqueue, work with failures and
retries, operator cancels, sweeps — for ``$TENURE_SOAK_SECONDS`` (default 300) on each engine, then
the accounting must balance exactly."""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

import tenure


@pytest.mark.soak
@pytest.mark.timeout(0)
def test_mixed_load_accounting_balances(engine_url):
    seconds = float(os.environ.get("TENURE_SOAK_SECONDS", "300"))
    store = tenure.connect(engine_url)
    rng = random.Random(7)
    executions = {"n": 0}
    lock = threading.Lock()

    def work(payload, ctx):
        with lock:
            executions["n"] += 1
        if payload["flaky"] and ctx.attempt == 1:
            raise RuntimeError("flaky")
        if payload["doomed"]:
            raise RuntimeError("doomed")
        return {"n": payload["n"]}

    worker = store.jobs.create_worker({"soak": work}, concurrency=16, backoff_base=0.01, backoff_cap=0.05)
    worker.start()
    enqueued = cancelled = swept = 0
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        batch = [{"kind": "soak", "max_attempts": 2,
                  "payload": {"n": n + i, "flaky": rng.random() < 0.1, "doomed": rng.random() < 0.02}}
                 for i in range(200)]
        ids = store.jobs.enqueue_many(batch)
        n += len(ids)
        enqueued += len(ids)
        for job_id in rng.sample(ids, 5):
            try:
                if store.jobs.cancel(job_id):
                    cancelled += 1
            except tenure.errors.TenureError:
                pass  # claimed meanwhile (needs its lease) or already settled: both fine
        if rng.random() < 0.2:
            swept += store.jobs.sweep(settled_before=int(time.time() * 1000) - 2000).removed
        time.sleep(0.05)
    while True:
        c = store.jobs.counts()
        if c["pending"] + c["failed"] + c["leased"] == 0:
            break
        time.sleep(0.1)
    worker.stop()
    counts = store.jobs.counts()
    assert counts["done"] + counts["dead"] + counts["cancelled"] + swept == enqueued
    stats = worker.stats()
    assert stats["lost_settlements"] == 0 and stats["claim_errors"] == 0
    assert stats["completions"] + stats["failures"] + stats["cancellations"] == executions["n"]
    store.close()
