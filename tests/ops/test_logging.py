"""Logging and App hooks: every failed attempt is a WARNING record with its traceback,
a dead job an ERROR, through standard logging under ``tenure.*``; the JSON format prints the job's
fields; ``@app.on_worker_start`` runs before the worker claims and ``@app.on_outcome`` sees every
outcome with the exception (Sentry-style reporting in one function)."""

from __future__ import annotations

import io
import json
import logging

import tenure
from tenure.worker_log import configure

from ..worker._wk import Outcomes


def test_a_warning_with_traceback_per_failed_attempt_and_an_error_when_dead(any_store, make_worker, caplog):
    jobs = any_store.jobs

    def handler(payload, ctx):
        raise LookupError(f"attempt {ctx.attempt} found nothing")

    job_id = jobs.enqueue("k", max_attempts=3)
    outcomes = Outcomes()
    caplog.set_level(logging.DEBUG, logger="tenure")
    w = make_worker(any_store, {"k": handler}, poll_interval=0.01, on_outcome=outcomes, backoff_base=0)
    w.start()
    outcomes.wait(3)
    records = [r for r in caplog.records if r.name == "tenure.jobs"]
    assert [(r.levelno, r.attempt, r.outcome) for r in records] == [
        (logging.WARNING, 1, "failed"),
        (logging.WARNING, 2, "failed"),
        (logging.ERROR, 3, "dead"),
    ]
    for r in records:
        assert r.job_id == job_id and r.kind == "k" and r.queue == "default"
        assert r.exc_info is not None and isinstance(r.exc_info[1], LookupError)
        text = logging.Formatter().format(r)
        assert "Traceback (most recent call last)" in text and 'raise LookupError(f"attempt' in text
    assert "attempt 1 found nothing" in records[0].getMessage()
    assert "attempt 2 found nothing" in records[1].getMessage()


def test_the_json_format_carries_the_job_fields_and_traceback():
    stream = io.StringIO()
    handler = configure("INFO", "json", stream=stream)
    try:
        log = logging.getLogger("tenure.jobs")
        try:
            raise KeyError("user_id")
        except KeyError:
            log.warning(
                "job j1 (k) attempt 1 failed",
                exc_info=True,
                extra={"job_id": "j1", "kind": "k", "queue": "q", "attempt": 1, "outcome": "failed"},
            )
        log.debug("not shown at INFO")
        [line] = stream.getvalue().splitlines()
        data = json.loads(line)
        assert data["level"] == "WARNING" and data["logger"] == "tenure.jobs" and data["job_id"] == "j1"
        assert data["attempt"] == 1 and "KeyError: 'user_id'" in data["traceback"]
    finally:
        root = logging.getLogger("tenure")
        root.removeHandler(handler)
        root.propagate = True
        root.setLevel(logging.NOTSET)


def test_app_hooks_run_per_process_and_see_every_outcome(engine_url, clock):
    store = tenure.connect(engine_url, clock=clock)
    app = tenure.App(store=store)
    seen: dict = {"started": [], "events": []}
    try:

        @app.task(name="ok")
        def ok():
            return 1

        @app.task(name="bad", max_attempts=1)
        def bad():
            raise ValueError("nope")

        @app.on_worker_start
        def setup(worker):
            seen["started"].append((worker.owner, worker.stats()["claims"]))

        @app.on_outcome
        def report(event):
            seen["events"].append(event)

        @app.on_outcome
        def broken(event):
            raise RuntimeError("an observer bug is logged and ignored")

        ok.enqueue()
        bad.enqueue()
        app.run_worker(max_jobs=2, install_signals=False, poll_interval=0.01, owner="hooked")
        assert seen["started"] == [("hooked", 0)]
        by_kind = {e["kind"]: e for e in seen["events"]}
        assert by_kind["ok"]["outcome"] == "completed" and "exception" not in by_kind["ok"]
        assert by_kind["bad"]["outcome"] == "failed" and isinstance(by_kind["bad"]["exception"], ValueError)
    finally:
        store.close()
