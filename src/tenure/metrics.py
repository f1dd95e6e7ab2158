"""Prometheus metrics for tenure (``pip install 'tenure[metrics]'``).

Three sources, each a collector on a private :class:`prometheus_client.CollectorRegistry` (never
the global one, so two dashboards or a test suite never collide):

- :class:`StoreCollector` — read from the store AT SCRAPE TIME (cached for the insights' TTL):
  ``tenure_jobs{queue,state}``, ``tenure_queue_paused{queue}``, ``tenure_jobs_rate_deferred{queue}``
  (due jobs a closed rate window holds back, per rate-limited queue), ``tenure_workers_alive``,
  ``tenure_store_up`` (0 when the store could not be read; the scrape still answers),
  ``tenure_unhandled_jobs{queue,kind}`` and ``tenure_unserved_jobs{queue}`` (queued jobs no live
  worker will run, :mod:`tenure.kinds`); and this process's maintenance service's upkeep of the
  jobs table (:mod:`tenure.table_care`): ``tenure_maintenance_vacuums_total``,
  ``tenure_maintenance_analyzes_total``.
- :class:`WorkerCollector` — the counters of this process's running workers (``worker.stats()``):
  ``tenure_worker_claims_total``, ``..._completions_total``, ``..._failures_total``,
  ``..._lost_settlements_total``, ``..._renewals_total``, ``..._cancellations_total``,
  ``..._timeouts_total``, ``..._claim_errors_total``, ``..._renewal_errors_total``,
  ``..._settle_errors_total`` and the gauges ``tenure_worker_in_flight``, ``tenure_worker_zombies``
  (handlers still running past their timeout or cancellation) and ``tenure_worker_healthy`` (0
  when any of them is unhealthy, see :mod:`tenure.worker_health`).
- :class:`JobMetrics` — ``tenure_job_duration_seconds{kind,outcome}``, a histogram fed by wrapping
  handlers (:meth:`JobMetrics.wrap`): outcome ``ok`` when the handler returned, ``error`` when it
  raised. (The worker's ``on_outcome`` event carries no duration, hence the wrapper.)

OpenTelemetry: when ``opentelemetry`` is importable, :meth:`JobMetrics.wrap` also opens a span
``tenure.run <kind>`` around each attempt (attributes ``tenure.job_id``, ``tenure.kind``,
``tenure.queue``, ``tenure.attempt``; a raising handler's span records the exception and is marked
as an error); without it, nothing is traced and nothing is imported. The span joins whatever trace
is current in the worker; the enqueue side is not linked to it (a job carries no trace context).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from .insights import Insights
    from .store import Store
    from .worker import Worker

__all__ = ["StoreCollector", "WorkerCollector", "JobMetrics", "build_registry", "render", "serve",
           "CONTENT_TYPE_LATEST", "DURATION_BUCKETS"]

#: Job duration buckets, seconds: from a no-op handler to a ten-minute batch job.
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    120.0, 300.0, 600.0, float("inf"))

#: worker.stats() key -> (metric name without _total, help).
WORKER_COUNTERS: dict[str, tuple[str, str]] = {
    "claims": ("tenure_worker_claims", "Jobs claimed by this process's workers."),
    "completions": ("tenure_worker_completions", "Attempts settled as done."),
    "failures": ("tenure_worker_failures", "Attempts settled as failed (retry or dead)."),
    "lost_settlements": ("tenure_worker_lost_settlements",
                         "Attempts that could not settle: their lease was lost (fence) or storage failed."),
    "renewals": ("tenure_worker_renewals", "Lease renewals."),
    "cancellations": ("tenure_worker_cancellations", "Attempts cancelled by an operator."),
    "timeouts": ("tenure_worker_timeouts", "Attempts failed for running past their timeout."),
    "claim_errors": ("tenure_worker_claim_errors", "Claims the store refused or failed."),
    "renewal_errors": ("tenure_worker_renewal_errors", "Renewals that failed for a storage reason."),
    "settle_errors": ("tenure_worker_settle_errors", "Settlements that failed for a storage reason."),
}


class StoreCollector(Collector):
    """Queue depth per state, paused queues and live workers, read from the store at scrape time."""

    def __init__(self, store: Store, insights: Insights | None = None) -> None:
        from .insights import Insights

        self.store = store
        self.insights = insights or Insights(store)

    def describe(self) -> Iterable[Any]:
        """Nothing: registering this collector must not read the store (collect() does, per scrape)."""
        return []

    def collect(self) -> Iterable[Any]:
        care = self.store.maintenance.stats()
        for key, doc in (("vacuums", "VACUUM (ANALYZE) runs of tenure_jobs by this process's maintenance."),
                         ("analyzes", "ANALYZE runs of tenure_jobs by this process's maintenance.")):
            fam = CounterMetricFamily(f"tenure_maintenance_{key}", doc)
            fam.add_metric([], care[key])
            yield fam
        up = GaugeMetricFamily("tenure_store_up", "1 when the last scrape could read the store, else 0.")
        try:
            ov = self.insights.overview()
        except Exception:  # noqa: BLE001 - a scrape never fails because the store is down
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        jobs = GaugeMetricFamily("tenure_jobs", "Jobs per queue and state.", labels=["queue", "state"])
        paused = GaugeMetricFamily("tenure_queue_paused", "1 when the queue is paused.", labels=["queue"])
        for q in ov.queues:
            paused.add_metric([q.name], 1 if q.paused else 0)
            for state, n in q.counts.items():
                jobs.add_metric([q.name, state], n)
        deferred = GaugeMetricFamily("tenure_jobs_rate_deferred",
                                     "Due jobs a rate limit holds back now (the queue's window, or their group's).",
                                     labels=["queue"])
        for q in ov.queues:
            if q.rate_limit or q.group_rate_limit:
                deferred.add_metric([q.name], q.rate_deferred)
        yield jobs
        yield paused
        yield deferred
        alive = GaugeMetricFamily("tenure_workers_alive", "Workers with a recent heartbeat.")
        alive.add_metric([], ov.workers_alive)
        yield alive
        if ov.kinds is not None:
            unhandled = GaugeMetricFamily(
                "tenure_unhandled_jobs", "Queued jobs of a kind no live worker handles, though some claim "
                "from the queue (tenure.kinds).", labels=["queue", "kind"])
            for u in ov.kinds.unhandled:
                unhandled.add_metric([u.queue, u.kind], u.count)
            yield unhandled
            unserved = GaugeMetricFamily("tenure_unserved_jobs", "Queued jobs in a queue no live worker "
                                         "claims from (tenure.kinds).", labels=["queue"])
            for s in ov.kinds.unserved:
                unserved.add_metric([s.queue], s.count)
            yield unserved


class WorkerCollector(Collector):
    """The summed ``stats()`` counters of the workers ``workers()`` answers at scrape time."""

    def __init__(self, workers: Callable[[], Iterable[Worker]]) -> None:
        self.workers = workers

    def describe(self) -> Iterable[Any]:
        return []

    def collect(self) -> Iterable[Any]:
        totals = dict.fromkeys(WORKER_COUNTERS, 0)
        in_flight = zombies = 0
        healthy = True
        for w in list(self.workers()):
            stats = w.stats()
            for key in totals:
                totals[key] += int(stats.get(key, 0))
            in_flight += int(stats.get("in_flight", 0))
            zombies += int(stats.get("zombies", 0))
            healthy = healthy and bool(stats.get("healthy", True))
        for key, (name, doc) in WORKER_COUNTERS.items():
            fam = CounterMetricFamily(name, doc)
            fam.add_metric([], totals[key])
            yield fam
        g = GaugeMetricFamily("tenure_worker_in_flight", "Attempts running now in this process.")
        g.add_metric([], in_flight)
        yield g
        z = GaugeMetricFamily("tenure_worker_zombies",
                              "Slots held by handlers still running past their timeout or cancellation.")
        z.add_metric([], zombies)
        yield z
        h = GaugeMetricFamily("tenure_worker_healthy",
                              "1 while every worker of this process keeps its zombie slots below its zombie_share.")
        h.add_metric([], 1 if healthy else 0)
        yield h


def _tracer() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace.get_tracer("tenure")


class JobMetrics:
    """The job duration histogram, fed by wrapped handlers (and OpenTelemetry spans when installed)."""

    def __init__(self, registry: CollectorRegistry, *, tracing: bool = True) -> None:
        self.duration = Histogram("tenure_job_duration_seconds", "Handler run time per attempt.",
                                  ["kind", "outcome"], registry=registry, buckets=DURATION_BUCKETS)
        self.tracer = _tracer() if tracing else None

    def wrap(self, kind: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        """``handler`` timed into the histogram (and traced when OpenTelemetry is installed); an
        async handler stays async (the worker runs it on its event loop), a sync one stays sync.
        Exceptions pass through unchanged (a span records them and is marked as an error)."""
        observe = self.duration.labels
        tracer = self.tracer

        def span(ctx: Any) -> Any:
            if tracer is None:
                return contextlib.nullcontext()
            job = getattr(ctx, "job", None)
            attrs: dict[str, Any] = {"tenure.kind": kind}
            if job is not None:
                attrs.update({"tenure.job_id": job.id, "tenure.attempt": job.attempts, "tenure.queue": job.queue})
            return tracer.start_as_current_span(f"tenure.run {kind}", attributes=attrs)

        target = handler if inspect.isroutine(handler) else type(handler).__call__
        if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(target):
            @functools.wraps(handler)
            async def timed_async(payload: Any, ctx: Any) -> Any:
                with span(ctx):
                    t0 = time.perf_counter()
                    outcome = "error"
                    try:
                        result = await handler(payload, ctx)
                        outcome = "ok"
                        return result
                    finally:
                        observe(kind, outcome).observe(time.perf_counter() - t0)

            return timed_async

        @functools.wraps(handler)
        def timed(payload: Any, ctx: Any) -> Any:
            with span(ctx):
                t0 = time.perf_counter()
                outcome = "error"
                try:
                    result = handler(payload, ctx)
                    outcome = "ok"
                    return result
                finally:
                    observe(kind, outcome).observe(time.perf_counter() - t0)

        return timed

    def wrap_all(self, handlers: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
        """Every handler of a ``{kind: handler}`` map wrapped by :meth:`wrap`."""
        return {kind: self.wrap(kind, fn) for kind, fn in handlers.items()}


def build_registry(*, store: Store | None = None, insights: Insights | None = None,
                   workers: Callable[[], Iterable[Worker]] | None = None,
                   job_metrics: bool = False) -> tuple[CollectorRegistry, JobMetrics | None]:
    """A fresh registry with the requested collectors; answers it and the :class:`JobMetrics`
    (None unless ``job_metrics``)."""
    registry = CollectorRegistry(auto_describe=True)
    if store is not None:
        registry.register(StoreCollector(store, insights))
    if workers is not None:
        registry.register(WorkerCollector(workers))
    jm = JobMetrics(registry) if job_metrics else None
    return registry, jm


def render(registry: CollectorRegistry) -> tuple[bytes, str]:
    """The text exposition of ``registry`` and its content type."""
    return generate_latest(registry), CONTENT_TYPE_LATEST


def serve(registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> Any:
    """Serve ``/metrics`` for ``registry`` on a daemon thread; answers the server (``.shutdown()``)."""
    from prometheus_client import start_http_server

    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server
