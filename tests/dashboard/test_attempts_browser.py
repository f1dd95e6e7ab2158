"""The job page's attempt history and the cancel of a running job, in a real headless
Chromium: each failed attempt is a row (when, who, how long, outcome, error) whose traceback
opens in place; a running job's Cancel asks its worker (jobs.request_cancel)."""

from __future__ import annotations

import tenure
from tenure.dashboard import create_app

from .conftest import SHOTS


def _fail_three_ways(store) -> str:
    jobs = store.jobs
    job_id = jobs.enqueue("profile.sync", {"user": 7}, max_attempts=3)
    for n in range(3):
        claim = jobs.claim(["profile.sync"], owner=f"host-{n}:4242")
        try:
            if n == 0:
                {}["user_id"]
            elif n == 1:
                raise TimeoutError("upstream took 30 s")
            else:
                raise tenure.Discard("user 7 was deleted")
        except Exception as exc:  # noqa: BLE001 - recorded as the attempt's failure
            jobs.fail(claim.lease, exc, backoff_base_ms=0)
    return job_id


def test_attempt_history_and_cancel_requested_in_chromium(engine_url, serve, browser):
    store = tenure.connect(engine_url)
    dead = _fail_three_ways(store)
    running = store.jobs.enqueue("video.encode", {"id": 1})
    store.jobs.claim(["video.encode"], owner="encoder:1")
    srv = serve(create_app(store, poll_ms=500))
    ctx = browser.new_context(viewport={"width": 1360, "height": 900}, bypass_csp=True)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(f"{srv.url()}/jobs/{dead}")
        page.wait_for_selector("#attempts tbody tr")
        rows = page.locator("#attempts tbody tr")
        assert rows.count() == 3
        assert [rows.nth(i).get_attribute("data-outcome") for i in range(3)] == ["failed", "failed", "dead"]
        first = rows.nth(0).inner_text()
        assert "builtins.KeyError: 'user_id'" in first and "host-0:4242" in first
        assert "builtins.TimeoutError: upstream took 30 s" in rows.nth(1).inner_text()
        assert "user 7 was deleted" in rows.nth(2).inner_text() and "host-2:4242" in rows.nth(2).inner_text()
        assert not page.locator("#attempts tr[data-attempt='1'] details pre").is_visible()
        page.click("#attempts tr[data-attempt='1'] details summary")
        assert "KeyError: 'user_id'" in page.inner_text("#attempts tr[data-attempt='1'] details pre")
        assert "attempt 2 failed: upstream took 30 s" in page.inner_text(".timeline")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "job-attempts.png"), full_page=True)

        page.goto(f"{srv.url()}/jobs/{running}")
        page.wait_for_selector("#attempts tr[data-outcome='running']")
        assert page.inner_text("#cancel") == "Cancel (ask its worker)"
        page.click("#cancel")
        page.wait_for_function(
            "document.querySelector(\"tr[data-field='cancel requested'] td\").textContent !== ''"
        )
        assert "cancel requested" in page.inner_text("#flash")
        job = store.jobs.get(running)
        assert job.state == "leased" and job.cancel_requested_at is not None
        assert errors == []
    finally:
        ctx.close()
        store.close()
