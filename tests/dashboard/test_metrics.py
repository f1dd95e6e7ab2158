"""Prometheus metrics (tenure.metrics) with a real worker on both engines: queue depth read from the
store at scrape time, the worker's counters, and the job duration histogram fed by wrapped handlers."""

from __future__ import annotations

import asyncio
import inspect
import time

from prometheus_client.parser import text_string_to_metric_families

import tenure
from tenure.metrics import build_registry, render


def _samples(registry) -> dict[tuple[str, tuple], float]:
    body, content_type = render(registry)
    assert content_type.startswith("text/plain")
    out = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _wait(pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_worker_counters_histogram_and_queue_depth(live_store):
    store = live_store
    workers: list = []
    registry, jm = build_registry(store=store, workers=lambda: workers, job_metrics=True)

    def ok(payload, ctx):
        time.sleep(0.002)
        return payload

    async def aok(payload, ctx):
        await asyncio.sleep(0.001)
        return payload

    def boom(payload, ctx):
        raise RuntimeError("no")

    handlers = jm.wrap_all({"m.ok": ok, "m.aok": aok, "m.boom": boom})
    assert inspect.iscoroutinefunction(handlers["m.aok"]) and not inspect.iscoroutinefunction(handlers["m.ok"])
    store.jobs.enqueue_many([{"kind": "m.ok", "payload": i, "queue": "fast"} for i in range(5)]
                            + [{"kind": "m.aok", "payload": i, "queue": "fast"} for i in range(3)]
                            + [{"kind": "m.boom", "max_attempts": 1, "queue": "slow"} for _ in range(2)]
                            + [{"kind": "m.never", "queue": "slow"}])
    w = store.jobs.create_worker(handlers, concurrency=3, poll_interval=0.05, maintenance=False)
    workers.append(w)
    with w:
        _wait(lambda: store.jobs.counts()["done"] == 8 and store.jobs.counts()["dead"] == 2)
        _wait(lambda: w.stats()["completions"] == 8 and w.stats()["failures"] == 2)
        s = _samples(registry)
        stats = w.stats()
    assert s[("tenure_worker_completions_total", ())] == stats["completions"] == 8
    assert s[("tenure_worker_failures_total", ())] == stats["failures"] == 2
    assert s[("tenure_worker_claims_total", ())] == stats["claims"] == 10
    assert s[("tenure_worker_lost_settlements_total", ())] == 0
    assert ("tenure_worker_renewals_total", ()) in s and ("tenure_worker_in_flight", ()) in s
    count = "tenure_job_duration_seconds_count"
    assert s[(count, (("kind", "m.ok"), ("outcome", "ok")))] == 5
    assert s[(count, (("kind", "m.aok"), ("outcome", "ok")))] == 3
    assert s[(count, (("kind", "m.boom"), ("outcome", "error")))] == 2
    assert s[("tenure_job_duration_seconds_sum", (("kind", "m.ok"), ("outcome", "ok")))] >= 5 * 0.002
    # Depth per queue and state, read from the store at scrape time (not from this worker).
    assert s[("tenure_jobs", (("queue", "fast"), ("state", "done")))] == 8
    assert s[("tenure_jobs", (("queue", "slow"), ("state", "dead")))] == 2
    assert s[("tenure_jobs", (("queue", "slow"), ("state", "pending")))] == 1
    assert s[("tenure_queue_paused", (("queue", "fast"),))] == 0
    assert s[("tenure_store_up", ())] == 1


def test_a_scrape_of_an_unreadable_store_still_answers(tmp_path):
    store = tenure.connect(f"sqlite:///{tmp_path}/m.db")
    store.jobs.enqueue("k")
    registry, _ = build_registry(store=store)
    assert _samples(registry)[("tenure_store_up", ())] == 1
    store.close()
    registry, _ = build_registry(store=store)
    s = _samples(registry)
    assert s[("tenure_store_up", ())] == 0 and not any(k[0] == "tenure_jobs" for k in s)


def test_opentelemetry_spans_around_each_attempt(tmp_path):
    """With the OpenTelemetry SDK installed, every attempt of a wrapped handler is a span named
    after its kind, carrying the job id, queue and attempt; a raising handler's span is an error."""
    import pytest

    trace = pytest.importorskip("opentelemetry.trace")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tenure-test")

    store = tenure.connect(f"sqlite:///{tmp_path}/otel.db")
    try:
        registry, jm = build_registry(job_metrics=True)
        jm.tracer = tracer  # the process-wide provider is left alone; same code path
        assert build_registry(job_metrics=True)[1].tracer is not None  # found by import
        def ok(payload, ctx):
            assert trace.get_current_span().is_recording()  # the handler runs inside its span
            return 1

        def boom(payload, ctx):
            raise ValueError("bad row")

        ok_id = store.jobs.enqueue("o.ok", queue="traced")
        boom_id = store.jobs.enqueue("o.boom", max_attempts=1)
        w = store.jobs.create_worker(jm.wrap_all({"o.ok": ok, "o.boom": boom}), poll_interval=0.05,
                                     maintenance=False)
        with w:
            _wait(lambda: store.jobs.counts()["done"] == 1 and store.jobs.counts()["dead"] == 1)
    finally:
        store.close()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"tenure.run o.ok", "tenure.run o.boom"}
    good, bad = spans["tenure.run o.ok"], spans["tenure.run o.boom"]
    assert dict(good.attributes) == {"tenure.kind": "o.ok", "tenure.job_id": ok_id, "tenure.attempt": 1,
                                     "tenure.queue": "traced"}
    assert good.status.status_code is not StatusCode.ERROR
    assert bad.attributes["tenure.job_id"] == boom_id and bad.status.status_code is StatusCode.ERROR
    assert any(e.name == "exception" and "bad row" in e.attributes["exception.message"] for e in bad.events)
