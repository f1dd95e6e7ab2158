"""Unhandled kinds on the dashboard's overview (tenure.kinds), in a real headless
Chromium: with a live worker claiming from the queue, queued jobs of a kind no live worker handles
show in a warning panel (queue, kind, how many, a near-miss kind, a link to them); a queue no live
worker claims from gets one quiet line; with nothing unhandled there is no panel."""

from __future__ import annotations

import time

from playwright.sync_api import expect

import tenure
from tenure.dashboard import create_app
from tenure.insights import Insights

from .conftest import SHOTS


def test_overview_warns_about_unhandled_kinds_in_chromium(engine_url, serve, browser):
    store = tenure.connect(engine_url)
    store.jobs.enqueue("tasks.add", [1, 2], delay=3600)  # handled, not due
    worker = store.jobs.create_worker({"tasks.add": lambda p, ctx: sum(p)}, queues=["default"],
                                      poll_interval=0.05).start()
    deadline = time.monotonic() + 20
    while not any(w.alive for w in Insights(store).workers()):  # its heartbeat row, written at start
        assert time.monotonic() < deadline, "no heartbeat row"
        time.sleep(0.01)
    srv = serve(create_app(store, poll_ms=300))
    ctx = browser.new_context(viewport={"width": 1360, "height": 900})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(srv.url() + "/")
        page.wait_for_selector("#queue-table")
        assert page.locator("#unhandled-kinds").count() == 0  # nothing unhandled: no panel

        store.jobs.enqueue_many([{"kind": "__main__.add", "payload": [n, n]} for n in range(3)]
                                + [{"kind": "emails.send", "queue": "emails"}])
        row = page.locator("#unhandled-kinds tr[data-kind='__main__.add']")
        expect(row).to_be_visible(timeout=15_000)  # the next refresh shows it (no reload)
        assert row.get_attribute("data-queue") == "default"
        cells = [row.locator("td").nth(i).inner_text() for i in range(5)]
        assert cells[0] == "default" and cells[1] == "__main__.add" and cells[2] == "3"
        assert cells[4] == "tasks.add"
        assert "3 queued job(s) of a kind no live worker handles" in page.inner_text("#unhandled-kinds")
        assert "emails (1 queued)" in page.inner_text("#unserved-queues")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "overview-unhandled-kinds.png"), full_page=True)

        row.locator("td a").click()  # the count links to exactly those jobs
        page.wait_for_selector("#job-table tbody tr")
        assert page.locator("#job-table tbody tr").count() == 3
        assert "__main__.add" in page.inner_text("#job-table")
        assert errors == []
    finally:
        ctx.close()
        worker.stop(grace=1)
        store.close()
