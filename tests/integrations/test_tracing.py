"""OpenTelemetry: the run of a job continues the trace of the request that enqueued it, across
processes (the context travels in the job), on both engines. Uses the real SDK with an
in-memory exporter."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("opentelemetry.sdk")
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import tenure

_exporter = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def provider():
    p = TracerProvider()
    p.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(p)  # once per process (the API refuses a second one)
    yield


def test_run_span_continues_the_enqueue_trace(engine_url):
    _exporter.clear()
    store = tenure.connect(engine_url)
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("POST /signup") as request_span:
        ok = store.jobs.enqueue("mail", {"to": "a"})
        bad = store.jobs.enqueue("mail", {"to": "bad"}, max_attempts=1)
    untraced = store.jobs.enqueue("mail", {"to": "b"})
    assert store.jobs.get(ok).headers and "traceparent" in store.jobs.get(ok).headers
    assert store.jobs.get(untraced).headers is None  # no current span: nothing stored

    def mail(payload, ctx):
        if payload["to"] == "bad":
            raise ValueError("no mailbox")
        return "sent"

    w = store.jobs.create_worker({"mail": mail}, concurrency=2, poll_interval=0.05, maintenance=False)
    with w:
        deadline = time.monotonic() + 10
        while store.jobs.counts()["done"] + store.jobs.counts()["dead"] < 3:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    store.close()
    spans = _exporter.get_finished_spans()
    trace_id = request_span.get_span_context().trace_id
    enqueues = [s for s in spans if s.name == "tenure.enqueue mail"]
    runs = {s.attributes["tenure.job_id"]: s for s in spans if s.name == "tenure.run mail"}
    assert len(enqueues) == 2 and all(s.kind == SpanKind.PRODUCER for s in enqueues)
    assert runs[ok].context.trace_id == trace_id and runs[ok].kind == SpanKind.CONSUMER
    assert runs[ok].parent.span_id in {s.context.span_id for s in enqueues}
    assert runs[bad].status.status_code == StatusCode.ERROR
    assert runs[untraced].context.trace_id != trace_id  # a root of its own


@pytest.mark.parametrize("n", [3, 200])  # below and above the streaming threshold
def test_a_bulk_stores_headers_per_job_under_a_trace_and_asks_the_tracer_once_without(engine_url, monkeypatch, n):
    """enqueue_many looks at the current trace once per call: under a span every job gets its own
    enqueue span's headers; without one no job asks the tracer (a per-job look cost a bulk row
    ~1.5 µs) and none stores headers."""
    from tenure import jobs_base

    store = tenure.connect(engine_url)
    with trace.get_tracer("test").start_as_current_span("POST /import"):
        traced = store.jobs.enqueue_many([{"kind": "k", "payload": i} for i in range(n)])
    asked = []
    real = jobs_base.enqueue_headers
    monkeypatch.setattr(jobs_base, "enqueue_headers", lambda *a: asked.append(a) or real(*a))
    plain = store.jobs.enqueue_many([{"kind": "k", "payload": i} for i in range(n)])
    headers = {store.jobs.get(j).headers["traceparent"] for j in traced}
    assert len(headers) == n  # one enqueue span per job
    assert all(store.jobs.get(j).headers is None for j in plain) and asked == []
    store.close()
