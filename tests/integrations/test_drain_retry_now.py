"""drain(app, retry_now=True): a test sees a task's retries through to done or dead without
sleeping through the backoff (a job waiting for its retry is requeued, attempts kept). Before,
drain stopped at the first failure and handle.result() timed out on a job 'still failed'."""

from __future__ import annotations

import tenure
from tenure.testing import drain


def test_retries_run_now_until_done(engine_url):
    app = tenure.App(engine_url)
    calls: list[int] = []

    @app.task(name="flaky.fetch", max_attempts=3)           # the default backoff: seconds between tries
    def fetch(x: int) -> int:
        calls.append(x)
        if len(calls) < 3:
            raise ConnectionError("upstream down")
        return x

    try:
        handle = fetch.enqueue(7)
        result = drain(app, retry_now=True)
        assert (result.failed, result.completed) == (2, 1)
        assert handle.result(timeout=1) == 7
        assert handle.get().attempts == 3                    # each retry counted, as a worker's would be
    finally:
        app.store.close()


def test_retries_run_now_until_dead(engine_url):
    app = tenure.App(engine_url)

    @app.task(name="flaky.never", max_attempts=4)
    def never() -> None:
        raise ConnectionError("upstream down")

    try:
        handle = never.enqueue()
        result = drain(app, retry_now=True)
        assert result.failed == 4                            # every attempt's outcome, the last one's too
        assert (handle.get().state, handle.get().attempts) == ("dead", 4)
    finally:
        app.store.close()


def test_without_retry_now_drain_stops_at_the_first_failure(engine_url):
    app = tenure.App(engine_url)

    @app.task(name="flaky.once", max_attempts=3)
    def once() -> None:
        raise ConnectionError("upstream down")

    try:
        handle = once.enqueue()
        assert drain(app).failed == 1
        assert handle.get().state == "failed"                # waiting for its retry, as documented
    finally:
        app.store.close()
