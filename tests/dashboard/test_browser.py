"""The dashboard in a REAL headless Chromium (Debian's /usr/bin/chromium driven by Playwright; no
browser is downloaded). load the overview, filter jobs, open a job, cancel
it, requeue it, see the state change; an HTML payload is shown escaped; screenshots are written to
``test-output/screenshots/`` for review (and the overview to ``docs/img/dashboard.png`` when it is
missing or ``TENURE_UPDATE_SCREENSHOTS=1``).
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

import tenure
from tenure.dashboard import create_app

from .conftest import REPO, SHOTS

EVIL = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def _seed(url: str) -> dict[str, str]:
    """A store with an hour of history: settlements spread over the last 60 minutes (written with
    an injected clock), live jobs in three queues, a dead job, and a job whose payload is HTML."""
    now = time.time_ns() // 1_000_000
    clock_now = [now - 60 * 60_000]
    seeder = tenure.connect(url, clock=lambda: clock_now[0])
    jobs = seeder.jobs
    for minute in range(60):
        clock_now[0] = now - (60 - minute) * 60_000 + 5_000
        n = 6 + (minute * 7) % 11
        jobs.enqueue_many([{"kind": "img.resize", "queue": "images", "payload": {"n": i}} for i in range(n)])
        claims = jobs.claim_many("img.resize", owner="seed", limit=n)
        failing = claims[: 1 + minute % 3] if minute % 4 == 0 else []
        if failing:
            # Retried in a day: they stay "failed" (not claimed again by the next minute's claim).
            jobs.fail_many([(c.lease, "upstream timed out") for c in failing], backoff_base_ms=86_400_000,
                           backoff_cap_ms=86_400_000)
        jobs.complete_many([(c.lease, {"ok": True}) for c in claims[len(failing):]])
    seeder.close()
    store = tenure.connect(url)
    j = store.jobs
    ids = {
        "email": j.enqueue("email.send", {"to": "ops@example.com", "subject": "weekly report"}, queue="emails"),
        "email2": j.enqueue("email.send", {"to": "dev@example.com", "subject": "hi"}, queue="emails", priority=5),
        "evil": j.enqueue("html.render", {"title": EVIL}, queue="default"),
        "report": j.enqueue("report.build", {"week": 47}, queue="reports", max_attempts=1),
    }
    c = j.claim("report.build", owner="seed")
    j.fail(c.lease, "ValueError: week 47 has no data")
    store.close()
    return ids


def _workflow(gate, started):
    """A three-node flow whose middle node waits for ``gate``: a run stays visibly in progress."""
    from tenure.flow import Flow

    flow = Flow("weekly-report", revision="7", output="publish")
    flow.registry.add("fetch", lambda ctx: {"rows": 1250}, version=1)

    def transform(ctx):
        started.set()
        gate.wait(60)
        return {"clean_rows": ctx["fetch"]["rows"] - 3}

    flow.registry.add("transform", transform, version=2)
    flow.registry.add("publish", lambda ctx: {"url": "s3://reports/week-47.pdf"}, version=1)
    flow.node("fetch")
    flow.node("transform", needs=["fetch"])
    flow.node("publish", needs=["transform"])
    return flow


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_operator_flow_in_chromium(engine_url, serve, browser):
    import threading

    from tenure.flow import Runner

    ids = _seed(engine_url)
    store = tenure.connect(engine_url)
    store.schedules.add("nightly-report", "0 3 * * *", "weekly-report", {"input": {"week": "auto"}},
                        tz="Europe/Paris", queue="reports")
    store.schedules.add("heartbeat", "*/5 * * * *", "ops.ping")
    gate, started = threading.Event(), threading.Event()
    run_store = tenure.connect(engine_url)  # the runner's own store, like another process's
    runner = Runner(run_store, [_workflow(gate, started)], poll_interval=0.05, concurrency=2).start()
    store.jobs.enqueue("weekly-report", {"input": {"week": 47}}, id="run-week-47", queue="reports")
    assert started.wait(20)
    srv = serve(create_app(store, poll_ms=500))
    base = srv.url()
    SHOTS.mkdir(parents=True, exist_ok=True)
    # bypass_csp: Playwright's wait_for_function evaluates strings, which the dashboard's CSP
    # (rightly) forbids. It also makes the escaping check below stricter: the payload must stay
    # text because of how the page builds the DOM, not because the CSP blocked a script.
    ctx = browser.new_context(viewport={"width": 1360, "height": 900}, bypass_csp=True)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        # 1. The overview: counts per state, the last hour's chart, queues.
        page.goto(base + "/")
        page.wait_for_selector("#queue-table tr[data-queue='emails']")
        assert page.inner_text(".card[data-state='pending'] .n") == "3"
        assert page.inner_text(".card[data-state='dead'] .n") == "1"
        assert int(page.inner_text(".card[data-state='done'] .n")) > 300
        assert page.locator("#chart svg rect").count() == 120  # 60 minutes x (done, failed+dead)
        assert "failure rate" in page.inner_text("#rate")
        page.wait_for_function("document.querySelector('#rate').textContent.includes('Workers alive: 1 of 1')")
        page.screenshot(path=str(SHOTS / "overview.png"), full_page=True)
        target = REPO / "docs" / "img" / "dashboard.png"
        if not target.exists() or os.environ.get("TENURE_UPDATE_SCREENSHOTS"):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(SHOTS / "overview.png", target)

        # Live refresh: a change made elsewhere shows up without a reload.
        store.jobs.enqueue("email.send", {"to": "late@example.com"}, queue="emails")
        page.wait_for_function("document.querySelector(\".card[data-state='pending'] .n\").textContent === '4'",
                               timeout=5000)

        # 2. Filter the jobs list: pending jobs of the emails queue.
        page.click("nav >> text=Jobs")
        page.wait_for_selector("#job-table")
        page.select_option("#f-state", "pending")
        page.fill("#f-queue", "emails")
        page.click("#apply")
        page.wait_for_function("document.querySelectorAll('#job-table tbody tr').length === 3 && "
                               "location.search.includes('queue=emails')")
        rows = page.locator("#job-table tbody tr")
        assert {rows.nth(i).get_attribute("data-state") for i in range(3)} == {"pending"}
        assert all("email.send" in rows.nth(i).inner_text() for i in range(3))
        page.screenshot(path=str(SHOTS / "jobs-filtered.png"), full_page=True)

        # 3. Open a job, cancel it, requeue it: the state changes on the page and in the store.
        page.click(f"#job-table a[href$='{ids['email']}']")
        page.wait_for_selector("#job-fields")
        assert "ops@example.com" in page.inner_text("#payload")
        assert page.inner_text("tr[data-field='state'] td") == "pending"
        page.click("#cancel")
        page.wait_for_function("document.querySelector(\"tr[data-field='state'] td\").textContent === 'cancelled'")
        assert "cancelled" in page.inner_text("#flash")
        assert store.jobs.get(ids["email"]).state == "cancelled"
        page.screenshot(path=str(SHOTS / "job-cancelled.png"), full_page=True)
        page.click("#requeue")
        page.wait_for_function("document.querySelector(\"tr[data-field='state'] td\").textContent === 'pending'")
        assert store.jobs.get(ids["email"]).state == "pending"

        # The dead job: its last error, and a requeue.
        page.goto(f"{base}/jobs/{ids['report']}")
        page.wait_for_selector("#last-error")
        assert "week 47 has no data" in page.inner_text("#last-error")
        assert page.locator("#cancel").count() == 0 and page.locator("#requeue").count() == 1

        # 4. An HTML payload is text, never markup: no script ran, no element was created.
        page.goto(f"{base}/jobs/{ids['evil']}")
        page.wait_for_selector("#payload")
        assert "<script>window.__pwned = 1</script>" in page.inner_text("#payload")
        assert page.locator("#payload img, #payload script").count() == 0
        assert page.evaluate("window.__pwned") is None
        page.screenshot(path=str(SHOTS / "job-html-payload.png"), full_page=True)

        # 5. Pause and resume a queue from the overview (once the queue registry is in).
        from tenure.queues import Queues

        registry = hasattr(Queues, "pause")
        page.goto(base + "/")
        page.wait_for_selector("#queue-table tr[data-queue='emails'] button[data-action='pause']")
        if registry:
            page.click("#queue-table tr[data-queue='emails'] button[data-action='pause']")
            page.wait_for_selector("#queue-table tr[data-queue='emails'] .badge.paused")
            assert store.queues.get("emails").paused is True
            page.click("#queue-table tr[data-queue='emails'] button[data-action='resume']")
            page.wait_for_selector("#queue-table tr[data-queue='emails'] button[data-action='pause']")
            assert store.queues.get("emails").paused is False

        # 6. The workflow run: done, running and pending nodes with their values.
        page.goto(f"{base}/runs/run-week-47")
        page.wait_for_selector("#node-table")
        statuses = [page.inner_text(f"#node-table tr[data-node='{n}'] .badge") for n in ("fetch", "transform",
                                                                                       "publish")]
        assert statuses == ["done", "running", "pending"]
        assert "1250" in page.inner_text("#node-table tr[data-node='fetch']")
        page.screenshot(path=str(SHOTS / "workflow-run.png"), full_page=True)

        # 7. Workers (the runner's worker heartbeats into the registry) and schedules.
        page.goto(base + "/workers")
        page.wait_for_selector("#worker-table .badge.alive")
        page.screenshot(path=str(SHOTS / "workers.png"), full_page=True)
        page.goto(base + "/schedules")
        page.wait_for_selector("#schedule-table tr[data-schedule='nightly-report']")
        assert "Europe/Paris" in page.inner_text("#schedule-table tr[data-schedule='nightly-report']")
        page.screenshot(path=str(SHOTS / "schedules.png"), full_page=True)
        assert errors == []
    finally:
        ctx.close()
        gate.set()
        runner.stop(grace=2)
        run_store.close()
        store.close()
