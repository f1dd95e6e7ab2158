"""The job page's composition (docs/composition.md) in a real headless Chromium: every step,
parents first, with its state and the steps it comes after; Requeue/Cancel composition act on
all of it through the public API."""

from __future__ import annotations

import tenure
from tenure.dashboard import create_app

from .conftest import SHOTS


def test_composition_on_the_job_page_in_chromium(engine_url, serve, browser):
    store = tenure.connect(engine_url)
    jobs = store.jobs
    jobs.enqueue_many([{"kind": "fetch", "id": "fetch-1", "max_attempts": 1}, {"kind": "fetch", "id": "fetch-2"},
                       {"kind": "merge", "id": "merge", "depends_on": ["fetch-1", "fetch-2"]},
                       {"kind": "notify", "id": "notify", "depends_on": ["merge"]}])
    jobs.fail(jobs.claim(["fetch"], owner="host:1").lease, "upstream down")  # fetch-1 dies: merge, notify cancelled
    srv = serve(create_app(store, poll_ms=500))
    ctx = browser.new_context(viewport={"width": 1360, "height": 900}, bypass_csp=True)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(f"{srv.url()}/jobs/merge")
        page.wait_for_selector("#composition tbody tr")
        rows = page.locator("#composition tbody tr")
        assert [rows.nth(i).get_attribute("data-step") for i in range(4)] == ["fetch-1", "fetch-2", "merge", "notify"]
        assert "dead" in rows.nth(0).inner_text() and "cancelled" in rows.nth(2).inner_text()
        assert "#1, #2" in rows.nth(2).inner_text() and "#3" in rows.nth(3).inner_text()
        assert "4 steps" in page.inner_text("h2:has-text('Composition')")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "job-composition.png"), full_page=True)
        page.click("#requeue-composition")
        page.wait_for_selector("#flash:has-text('requeued 3 step(s)')")
        assert [jobs.get(i).state for i in ("fetch-1", "merge", "notify")] == ["pending"] * 3
        page.click("#cancel-composition")
        page.wait_for_selector("#flash:has-text('cancelled 4 step(s)')")
        assert [jobs.get(i).state for i in ("fetch-1", "fetch-2", "merge", "notify")] == ["cancelled"] * 4
        assert errors == []
    finally:
        ctx.close()
        store.close()


def test_a_flash_stays_its_six_seconds_after_the_one_it_replaced(engine_url, serve, browser):
    """Each action's message stays 6 s: the timer of the message it replaced must not clear it.
    (It did: Requeue composition then Cancel composition within 6 s cleared the second message at
    the first one's 6 s, so on a loaded machine the browser never saw "cancelled 4 step(s)".) The
    page's clock is Playwright's: time moves only as the test says."""
    store = tenure.connect(engine_url)
    jobs = store.jobs
    jobs.enqueue_many([{"kind": "fetch", "id": "fetch-1"},
                       {"kind": "merge", "id": "merge", "depends_on": ["fetch-1"]}])
    srv = serve(create_app(store, poll_ms=500))
    ctx = browser.new_context(viewport={"width": 1360, "height": 900})
    page = ctx.new_page()
    try:
        page.clock.install()
        page.goto(f"{srv.url()}/jobs/merge")
        page.wait_for_selector("#composition tbody tr")
        page.click("#cancel-composition")
        page.wait_for_selector("#flash:has-text('cancelled 2 step(s)')")
        page.clock.fast_forward(5_000)
        page.click("#requeue-composition")
        page.wait_for_selector("#flash:has-text('requeued 2 step(s)')")
        page.clock.fast_forward(2_000)  # past the first message's 6 s, 2 s into the second's
        assert "requeued 2 step(s)" in page.inner_text("#flash")
        page.clock.fast_forward(5_000)  # the second message's 6 s are over
        page.wait_for_selector("#flash .msg", state="detached")
    finally:
        ctx.close()
        store.close()
