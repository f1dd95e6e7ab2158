"""The worker asks OpenTelemetry whether a tracer provider is configured once per provider, not
once per job (tenure.tracing._configured), and a provider set later is honoured from the next job
on: by code (``set_tracer_provider``) or through ``OTEL_PYTHON_TRACER_PROVIDER``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tenure import tracing

pytest.importorskip("opentelemetry")


class ProxyTracerProvider:  # named as the API's default provider (records nothing)
    pass


class SdkProvider:  # any other provider is a configured one
    pass


class FakeTrace:
    """The parts of ``opentelemetry.trace`` that _configured reads, counting the looks."""

    def __init__(self) -> None:
        self._TRACER_PROVIDER = None
        self.looks = 0
        self.load_on_look: object | None = None  # what OTEL_PYTHON_TRACER_PROVIDER would load

    def get_tracer_provider(self):
        self.looks += 1
        if self._TRACER_PROVIDER is None and self.load_on_look is not None:
            self._TRACER_PROVIDER = self.load_on_look
        return self._TRACER_PROVIDER if self._TRACER_PROVIDER is not None else ProxyTracerProvider()


@pytest.fixture(autouse=True)
def fresh_verdict(monkeypatch):
    monkeypatch.setattr(tracing, "_verdict", None)


def test_the_provider_is_asked_once_while_it_stays_the_same():
    trace = FakeTrace()
    assert [tracing._configured(trace) for _ in range(100)] == [False] * 100
    assert trace.looks == 1  # was once per job


def test_a_provider_set_later_is_honoured_and_then_cached():
    trace = FakeTrace()
    assert not tracing._configured(trace)
    trace._TRACER_PROVIDER = SdkProvider()  # what set_tracer_provider does
    assert tracing._configured(trace)
    assert tracing._configured(trace)
    assert trace.looks == 2
    trace._TRACER_PROVIDER = ProxyTracerProvider()  # a test resetting the global, say
    assert not tracing._configured(trace)


def test_a_provider_loaded_by_the_first_look_is_the_one_remembered():
    trace = FakeTrace()
    trace.load_on_look = SdkProvider()  # OTEL_PYTHON_TRACER_PROVIDER set: the look loads it
    assert tracing._configured(trace) and tracing._configured(trace)
    assert trace.looks == 1


def test_an_api_without_the_global_is_asked_every_time():
    class Bare:
        looks = 0

        def get_tracer_provider(self):
            self.looks += 1
            return ProxyTracerProvider()

    trace = Bare()
    assert not tracing._configured(trace) and not tracing._configured(trace)
    assert trace.looks == 2


def test_a_worker_records_runs_once_a_provider_is_set_after_it_started(tmp_path: Path):
    """End to end with the real SDK, in a process of its own (the API takes one provider per
    process): jobs without a trace run unrecorded while no provider is set; set one, and the
    next job's run is recorded, by the same running worker."""
    pytest.importorskip("opentelemetry.sdk")
    script = textwrap.dedent(f"""
        import threading
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import tenure

        store = tenure.connect({"sqlite:///" + str(tmp_path / "t.db")!r})
        ran = []
        cv = threading.Condition()
        def k(payload, ctx):
            with cv:
                ran.append(payload)
                cv.notify_all()
        def wait(n):
            with cv:
                assert cv.wait_for(lambda: len(ran) >= n, 30)
        w = store.jobs.create_worker({{"k": k}}, concurrency=2, poll_interval=0.05, maintenance=False)
        with w:
            for i in range(3):
                store.jobs.enqueue("k", i)
            wait(3)
            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)
            store.jobs.enqueue("k", 3)
            wait(4)
        store.close()
        runs = [s for s in exporter.get_finished_spans() if s.name == "tenure.run k"]
        print(len(runs))
    """)
    env = dict(os.environ)
    env.pop("OTEL_PYTHON_TRACER_PROVIDER", None)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"  # the job run after the provider was set, and only it
