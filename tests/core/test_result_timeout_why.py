"""handle.result(timeout=...) on a job that has not run says why, as far as the registries tell
(tenure.kinds.why_waiting): no live worker for its queue, the queue paused, the job due later,
the live workers lacking its kind. Before, the newcomer read only "still pending after 10 s"."""

from __future__ import annotations

import threading

import pytest

import tenure
from tenure import kinds
from tenure.errors import ResultTimeout


def _timeout(handle) -> str:
    with pytest.raises(ResultTimeout) as caught:
        handle.result(timeout=0.01)
    return str(caught.value)


def test_a_result_timeout_says_why_the_job_has_not_run(engine_url):
    app = tenure.App(engine_url)

    @app.task(queue="emails", name="mail.send")
    def send(to: str) -> str:
        return to

    other = tenure.App(engine_url)

    @other.task(queue="emails", name="mail.sned")
    def misspelt(to: str) -> str:
        return to

    stop, ready = threading.Event(), threading.Event()
    try:
        handle = send.enqueue("a@example.com")
        assert _timeout(handle).endswith(
            "is still pending after 0.01 s: no live worker claims from queue 'emails': start one "
            "(tenure worker module:app)")
        later = send.with_options(delay=3600).enqueue("b@example.com")
        assert "is still pending after 0.01 s: it is due at " in _timeout(later)
        app.store.queues.pause("emails")
        assert _timeout(handle).endswith(": queue 'emails' is paused (tenure queues resume emails)")
        app.store.queues.resume("emails")

        runner = threading.Thread(target=other.run_worker, kwargs={
            "install_signals": False, "stop_event": stop, "ready": ready, "queues": ["emails"],
            "poll_interval": 0.01})
        runner.start()
        assert ready.wait(10)
        while kinds.read(app.store).workers_alive == 0:   # its first heartbeat is written at start
            stop.wait(0.01)
        assert _timeout(handle).endswith(
            ": the live workers of queue 'emails' do not handle kind 'mail.send'; did you mean 'mail.sned'?")
    finally:
        stop.set()
        if ready.is_set():
            runner.join()
        other.store.close()
        app.store.close()


def test_a_composition_timeout_names_the_step_that_has_not_run_and_why(engine_url):
    app = tenure.App(engine_url)

    @app.task(queue="pages", name="page.fetch")
    def fetch(url: str) -> str:
        return url

    @app.task(queue="pages", name="page.measure")
    def measure(page: str) -> int:
        return len(page)

    try:
        handle = tenure.chain(fetch.s("example.org"), measure.s()).enqueue()
        with pytest.raises(ResultTimeout) as caught:
            handle.result(timeout=0.01)
        assert str(caught.value).endswith(
            f"(final step {handle.final[0]!r}): step {handle.ids[0]!r} (page.fetch): no live worker claims "
            "from queue 'pages': start one (tenure worker module:app)")
    finally:
        app.store.close()
