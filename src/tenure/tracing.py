"""OpenTelemetry tracing of enqueue -> run, a no-op without OpenTelemetry.

When ``opentelemetry`` is importable and a span is current at enqueue, tenure opens a PRODUCER span
``tenure.enqueue <kind>`` and stores its context (W3C ``traceparent``) in the job's ``headers``.
The worker runs the handler inside a CONSUMER span ``tenure.run <kind>`` whose parent is that
context, so the run links to the request that enqueued it across processes and hosts; the span
records the attempt, queue and job id, and the outcome (an exception marks it as an error).
Without OpenTelemetry nothing is imported beyond one failed import, and nothing is stored.
"""

from __future__ import annotations

import json
from contextlib import contextmanager, nullcontext
from typing import Any

_api: Any = None  # (trace, propagate, SpanKind) once resolved, False when not installed


def _otel() -> Any:
    global _api
    if _api is None:
        try:
            from opentelemetry import propagate, trace
            from opentelemetry.trace import SpanKind
        except ImportError:
            _api = False
        else:
            _api = (trace, propagate, SpanKind)
    return _api


_UNSEEN = object()
#: ``(provider, configured)``: the API's global provider when :func:`_configured` last asked, and
#: its verdict. Asking the API per job (``get_tracer_provider`` looks the provider's environment
#: variable up in ``os.environ`` while none is set) cost a job ~0.6 µs.
_verdict: tuple[Any, bool] | None = None


def _configured(trace: Any) -> bool:
    """True when an SDK tracer provider is installed (the API's default one records nothing).

    The verdict is kept for as long as the API's global provider (``trace._TRACER_PROVIDER``,
    what ``set_tracer_provider`` sets and ``get_tracer_provider`` answers) is the same object, so
    a provider set later, by code or through ``OTEL_PYTHON_TRACER_PROVIDER`` (which the API loads
    into that global on its first look), is honoured from the next job on. An API without that
    global is asked every time."""
    global _verdict
    seen = getattr(trace, "_TRACER_PROVIDER", _UNSEEN)
    verdict = _verdict
    if verdict is not None and seen is not _UNSEEN and verdict[0] is seen:
        return verdict[1]
    configured = type(trace.get_tracer_provider()).__name__ not in ("ProxyTracerProvider", "NoOpTracerProvider")
    seen = getattr(trace, "_TRACER_PROVIDER", _UNSEEN)  # the look may have loaded one
    if seen is not _UNSEEN:
        _verdict = (seen, configured)
    return configured


def tracing_now() -> bool:
    """Whether a trace is current in this context (an enqueue now would store headers)."""
    api = _otel()
    return bool(api) and api[0].get_current_span().get_span_context().is_valid


def enqueue_headers(kind: str, queue: str) -> str | None:
    """Open the enqueue span and answer the headers to store with the job (JSON), or None when
    there is no trace to continue."""
    api = _otel()
    if not api:
        return None
    trace, propagate, SpanKind = api
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    tracer = trace.get_tracer("tenure")
    carrier: dict[str, str] = {}
    with tracer.start_as_current_span(f"tenure.enqueue {kind}", kind=SpanKind.PRODUCER,
                                      attributes={"messaging.system": "tenure",
                                                  "messaging.destination.name": queue,
                                                  "tenure.kind": kind}):
        propagate.inject(carrier)
    return json.dumps(carrier, separators=(",", ":")) if carrier else None


def run_span(job: Any, attempt: int):
    """The context manager the worker runs a handler in: a CONSUMER span continuing the enqueue's
    trace (or a no-op when OpenTelemetry is absent or unconfigured and the job carries no trace)."""
    return run_span_or_none(job, attempt) or nullcontext()


def run_span_or_none(job: Any, attempt: int) -> Any:
    """:func:`run_span`, or None when it would be a no-op (the worker then calls the handler
    without entering a context manager at all)."""
    api = _otel()
    if not api:
        return None
    trace, propagate, SpanKind = api
    if job.headers is None and not _configured(trace):
        return None
    return _span(trace, propagate, SpanKind, job, attempt)


@contextmanager
def _span(trace: Any, propagate: Any, SpanKind: Any, job: Any, attempt: int):
    parent = propagate.extract(job.headers or {})
    tracer = trace.get_tracer("tenure")
    # Tracing must never change a handler's outcome: the SDK's own exception recording calls
    # str(exc), which a hostile exception can make raise, so it is done here, guarded.
    with tracer.start_as_current_span(f"tenure.run {job.kind}", context=parent, kind=SpanKind.CONSUMER,
                                      record_exception=False, set_status_on_exception=False,
                                      attributes={"messaging.system": "tenure",
                                                  "messaging.destination.name": job.queue,
                                                  "tenure.kind": job.kind, "tenure.job_id": job.id,
                                                  "tenure.attempt": attempt}) as span:
        try:
            yield span
        except BaseException as exc:
            try:
                from opentelemetry.trace import Status, StatusCode

                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                span.record_exception(exc)
            except Exception:  # noqa: BLE001 - a span is never worth a job's outcome
                pass
            raise
