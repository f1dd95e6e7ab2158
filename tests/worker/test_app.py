"""The task API in one process: ``tenure.App``, ``@app.task``, ``.enqueue``,
``handle.result``, ``app.run_worker`` stopped by its event or by ``max_jobs``. The signal and
cross-process halves are in ``test_processes.py``."""

from __future__ import annotations

import asyncio
import threading

import pytest

import tenure
from tenure.errors import InvalidArgument, JobCancelled, JobDead, ResultTimeout

from ._wk import wait_for


@pytest.fixture
def app(engine_url):
    a = tenure.App(engine_url)
    yield a
    try:
        a.store.close(grace=1)
    except Exception:  # noqa: BLE001
        pass


def _run_in_thread(app, **options):
    """``app.run_worker`` on a thread (no signals there); answers (thread, stop event, box)."""
    stop, ready, box = threading.Event(), threading.Event(), {}

    def run():
        box["settled"] = app.run_worker(stop_event=stop, ready=ready, **options)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert ready.wait(10)
    return t, stop, box


def test_tasks_enqueue_and_results(app):
    """@app.task (bare and with options), keyword and positional arguments, a ``ctx`` parameter,
    async tasks, options at enqueue (with_options), and results read back through the handle."""
    @app.task
    def add(a, b=0):
        return a + b

    @app.task(name="greet", queue="emails", max_attempts=2)
    def greet(name, ctx):
        return {"hello": name, "attempt": ctx.attempt, "job": ctx.job.id}

    @app.task(name="async_double")
    async def double(x):
        await asyncio.sleep(0)
        return 2 * x

    assert add(2, 3) == 5  # a direct call runs the function here, no queue
    assert add.name == "tests.worker.test_app.test_tasks_enqueue_and_results.add"
    t, stop, box = _run_in_thread(app, concurrency=4, poll_interval=0.05)
    try:
        h1 = add.enqueue(2, b=40)
        h2 = greet.enqueue("ada")
        h3 = double.enqueue(21)
        h4 = add.with_options(delay=0, id="fixed-id").enqueue(1, 1)
        assert h1.result(timeout=10) == 42
        g = h2.result(timeout=10)
        assert (g["hello"], g["attempt"], g["job"]) == ("ada", 1, h2.id)
        assert h2.get().queue == "emails" and h2.get().max_attempts == 2
        assert h3.result(timeout=10) == 42
        assert h4.id == "fixed-id" and h4.result(timeout=10) == 2
    finally:
        stop.set()
        t.join(10)
    assert box["settled"] == 4


def test_result_raises_the_coded_failure(app):
    """handle.result raises JobDead (with the last error) for a dead job, JobCancelled for a
    cancelled one, and ResultTimeout while it waits too long."""
    @app.task(name="boom", max_attempts=1)
    def boom():
        raise RuntimeError("upstream said no")

    @app.task(name="later")
    def later():
        return "never run here"

    cancelled = later.enqueue()
    assert cancelled.cancel() is True
    with pytest.raises(JobCancelled) as ei:
        cancelled.result(timeout=1)
    assert ei.value.code == "TN2081"
    pending = later.with_options(delay=3600).enqueue()
    with pytest.raises(ResultTimeout) as ei:
        pending.result(timeout=0.05)
    assert ei.value.code == "TN2082" and isinstance(ei.value, TimeoutError)
    t, stop, _ = _run_in_thread(app, poll_interval=0.05)
    try:
        dead = boom.enqueue()
        with pytest.raises(JobDead) as ei:
            dead.result(timeout=10)
        assert ei.value.code == "TN2080" and "upstream said no" in str(ei.value)
    finally:
        stop.set()
        t.join(10)


def test_run_worker_stops_after_max_jobs(app):
    """run_worker(max_jobs=N) settles N jobs, stops gracefully by itself and answers N."""
    @app.task(name="one")
    def one(n):
        return n

    handles = [one.enqueue(i) for i in range(5)]
    settled = app.run_worker(max_jobs=3, concurrency=2, poll_interval=0.02, install_signals=False)
    assert settled == 3
    states = sorted(h.get().state for h in handles)
    assert states == ["done", "done", "done", "pending", "pending"]


def test_task_options_are_validated(app):
    """Unknown task or enqueue options are refused at once; an app without tasks has no worker."""
    with pytest.raises(InvalidArgument):
        app.task(retries=3)
    with pytest.raises(InvalidArgument):
        app.create_worker()

    @app.task(name="k")
    def k():
        return None

    with pytest.raises(InvalidArgument):
        k.with_options(bogus=1)
    with pytest.raises(InvalidArgument):
        app.task(name="k")(lambda: None)  # a second task under the same name


def test_app_without_url_reads_tenure_url(engine_url, monkeypatch):
    """tenure.App() with no URL uses $TENURE_URL."""
    monkeypatch.setenv("TENURE_URL", engine_url)
    app = tenure.App()

    @app.task(name="ping")
    def ping():
        return "pong"

    try:
        handle = ping.enqueue()
        assert app.store.dialect == ("sqlite" if engine_url.startswith("sqlite") else "postgres")
        t, stop, _ = _run_in_thread(app, poll_interval=0.05)
        try:
            assert handle.result(timeout=10) == "pong"
        finally:
            stop.set()
            t.join(10)
        wait_for(lambda: not t.is_alive(), what="run_worker to return")
    finally:
        app.store.close()
