"""Admin at scale in a real headless Chromium: the jobs page filters by tag, and its
bulk buttons count the matching jobs (a dry run), ask in a confirmation dialog, and act only
when confirmed (store.jobs.<op>_where)."""

from __future__ import annotations

from playwright.sync_api import expect

import tenure
from tenure.dashboard import create_app

from .conftest import SHOTS


def test_bulk_cancel_asks_in_a_dialog_in_chromium(engine_url, serve, browser):
    store = tenure.connect(engine_url)
    tagged = [store.jobs.enqueue("report.build", {"n": n}, tags=["nightly"]) for n in range(3)]
    other = store.jobs.enqueue("report.build", {"n": 9})
    srv = serve(create_app(store, poll_ms=500))
    ctx = browser.new_context(viewport={"width": 1360, "height": 900})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(f"{srv.url()}/jobs?tag=nightly")
        page.wait_for_selector("#job-table tbody tr")
        assert page.locator("#job-table tbody tr").count() == 3
        assert "nightly" in page.inner_text("#job-table")
        # Asked, then declined: nothing changes.
        page.click("#bulk-cancel")
        page.wait_for_selector("#bulk-dialog[open]")
        assert "cancel 3 job(s) matching tag=nightly?" in page.inner_text("#bulk-question")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "jobs-bulk-dialog.png"), full_page=True)
        page.click("#bulk-keep")
        page.wait_for_selector("#bulk-dialog", state="detached")
        assert store.jobs.counts()["cancelled"] == 0
        # Asked, then confirmed: exactly the matching jobs are cancelled.
        page.click("#bulk-cancel")
        page.wait_for_selector("#bulk-dialog[open]")
        page.click("#bulk-confirm")
        page.wait_for_selector("#bulk-dialog", state="detached")
        expect(page.locator("#flash")).to_contain_text("3 job(s)")  # polls without eval (the page's CSP forbids it)
        assert {store.jobs.get(j).state for j in tagged} == {"cancelled"}
        assert store.jobs.get(other).state == "pending"
        assert errors == []
    finally:
        ctx.close()
        store.close()


def test_job_page_shows_progress_live_in_chromium(engine_url, serve, browser):
    store = tenure.connect(engine_url)
    job_id = store.jobs.enqueue("video.encode", {"id": 1})
    claim = store.jobs.claim(["video.encode"], owner="encoder:1")
    store.jobs.progress(claim.lease, 0.25, note="pass 1 of 4")
    srv = serve(create_app(store, poll_ms=250))
    ctx = browser.new_context(viewport={"width": 1360, "height": 900})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{srv.url()}/jobs/{job_id}")
        page.wait_for_selector("#job-progress")
        assert "25% · pass 1 of 4 (attempt 1)" in page.inner_text("#job-progress-text")
        store.jobs.progress(claim.lease, 0.75, note="pass 3 of 4")  # the page polls: it updates live
        expect(page.locator("#job-progress-text")).to_contain_text("75%")  # polls without eval (CSP)
        assert page.locator("#job-progress progress").get_attribute("value") == "0.75"
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "job-progress.png"), full_page=True)
        assert errors == []
    finally:
        ctx.close()
        store.close()
