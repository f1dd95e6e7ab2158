"""Dashboard polish, in a real headless Chromium on both engines: an unknown job or run
id is a "Not found" page (not a red "offline" header), a long error keeps its row short, the
header fits a phone's width, and schedules have actions (Run now, Remove)."""

from __future__ import annotations

from playwright.sync_api import expect

import tenure
from tenure.dashboard import create_app

from .conftest import SHOTS

#: The heights of the two rows (short, long) and the long row's error title, read in one task of
#: the page; falsy until both rows are there.
ROWS_MEASURED = """([short, long]) => {
  const row = (id) => document.querySelector(`#job-table tr[data-job="${CSS.escape(id)}"]`);
  const s = row(short), l = row(long);
  const clamp = l && l.querySelector(".clamp");
  return s && clamp && [s.getBoundingClientRect().height, l.getBoundingClientRect().height, clamp.title];
}"""


def _page(browser, **ctx_options):
    ctx = browser.new_context(**ctx_options)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    return ctx, page, errors


def test_unknown_job_and_run_ids_are_not_found_not_offline(engine_url, serve, browser):
    store = tenure.connect(engine_url)
    srv = serve(create_app(store, poll_ms=250))
    ctx, page, errors = _page(browser, viewport={"width": 1200, "height": 800})
    try:
        for path, what in (("/jobs/no-such-job", "no job 'no-such-job'"), ("/runs/no-such-run", "no job 'no-such-run'")):
            page.goto(srv.url() + path)
            expect(page.locator("#not-found")).to_contain_text(what, timeout=15_000)
            assert page.inner_text("h1") == "Not found"
            live = page.locator("#live")
            assert "err" not in (live.get_attribute("class") or "") and "offline" not in live.inner_text()
            page.wait_for_timeout(800)  # three poll periods later: still a calm "not found"
            assert "err" not in (live.get_attribute("class") or "")
            assert page.locator("#not-found a").get_attribute("href").endswith("/jobs")
        assert errors == []
    finally:
        ctx.close()
        store.close()


def test_a_long_error_keeps_its_row_short(engine_url, serve, browser):
    store = tenure.connect(engine_url)
    short = store.jobs.enqueue("short.err", {}, max_attempts=1)
    long = store.jobs.enqueue("long.err", {}, max_attempts=1)
    for kind, message in (("short.err", "boom"), ("long.err", "Traceback line; " * 200)):
        claim = store.jobs.claim([kind], owner="t")
        store.jobs.fail(claim.lease, message)
    srv = serve(create_app(store, poll_ms=500))
    ctx, page, errors = _page(browser, viewport={"width": 1200, "height": 800})
    try:
        page.goto(srv.url() + "/jobs?state=dead")
        # Both rows measured in ONE task of the page: the list is re-rendered every poll (new rows),
        # and a row measured by its own call could be replaced in between (bounding_box() of a
        # detached row is None, as a loaded machine showed).
        short_h, long_h, title = page.wait_for_function(ROWS_MEASURED, arg=[short, long]).json_value()
        assert long_h <= short_h + 25  # two lines at most, not twenty
        assert title.startswith("Traceback line; ")
        assert errors == []
    finally:
        ctx.close()
        store.close()


def test_the_header_fits_a_phone(engine_url, serve, browser):
    store = tenure.connect(engine_url)
    srv = serve(create_app(store, poll_ms=500))
    ctx, page, errors = _page(browser, viewport={"width": 375, "height": 740}, is_mobile=True)
    try:
        for path in ("/", "/jobs", "/schedules"):
            page.goto(srv.url() + path)
            expect(page.locator("#live")).to_contain_text("live", timeout=15_000)
            fits = page.evaluate("""() => {
                const top = document.querySelector('header.top');
                const brand = top.querySelector('.brand').getBoundingClientRect();
                const live = top.querySelector('#live').getBoundingClientRect();
                const links = [...top.querySelectorAll('nav a')].map(a => a.getBoundingClientRect());
                return {overflow: top.scrollWidth - top.clientWidth, width: window.innerWidth,
                        sameLine: Math.abs(brand.top - live.top) < 8, liveRight: live.right,
                        height: top.getBoundingClientRect().height,
                        linksVisible: links.every(r => r.width > 0 && r.height > 0)};
            }""")
            assert fits["overflow"] <= 0 and fits["liveRight"] <= fits["width"], fits
            assert fits["sameLine"] and fits["linksVisible"] and fits["height"] < 110, fits
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "phone-header.png"))
        assert errors == []
    finally:
        ctx.close()
        store.close()


def test_schedules_run_now_pause_resume_and_remove(engine_url, serve, browser):
    store = tenure.connect(engine_url)
    store.schedules.add("nightly", "0 3 * * *", "reports.build", {"to": "ops"}, queue="reports")
    store.schedules.add("hourly", "0 * * * *", "stats.roll")
    srv = serve(create_app(store, poll_ms=300))
    ctx, page, errors = _page(browser, viewport={"width": 1300, "height": 800})
    page.on("dialog", lambda d: d.accept())
    try:
        page.goto(srv.url() + "/schedules")
        row = page.locator("#schedule-table tr[data-schedule='nightly']")
        row.locator("button.run-now").click()
        expect(page.locator("#flash")).to_contain_text("schedule nightly enqueued job", timeout=15_000)
        jobs = store.jobs.page(kind="reports.build").items
        assert len(jobs) == 1 and jobs[0].queue == "reports" and jobs[0].payload == {"to": "ops"}
        assert store.schedules.get("nightly").last_fire_at is None  # its own rhythm is unchanged

        row.locator("button.pause").click()
        expect(row.locator("td.state")).to_have_text("paused", timeout=15_000)
        assert store.schedules.get("nightly").paused
        row.locator("button.resume").click()
        expect(row.locator("td.state")).to_have_text("active", timeout=15_000)
        assert not store.schedules.get("nightly").paused

        page.locator("#schedule-table tr[data-schedule='hourly'] button.remove").click()
        expect(page.locator("#schedule-table tr[data-schedule='hourly']")).to_have_count(0, timeout=15_000)
        assert store.schedules.get("hourly") is None and store.schedules.get("nightly") is not None
        assert errors == []
    finally:
        ctx.close()
        store.close()


def test_schedule_actions_are_refused_read_only_and_for_unknown_names(engine_url, serve):
    import httpx

    store = tenure.connect(engine_url)
    store.schedules.add("nightly", "0 3 * * *", "reports.build")
    try:
        ro = serve(create_app(store, read_only=True))
        rw = serve(create_app(store))
        with httpx.Client(base_url=ro.url()) as c:
            c.get("/schedules")
            r = c.post("/api/schedules/nightly/run", headers={"X-Tenure-CSRF": c.cookies.get("tenure_csrf") or ""})
            assert r.status_code == 403 and "read-only" in r.json()["message"]
            assert store.jobs.counts()["pending"] == 0
        with httpx.Client(base_url=rw.url()) as c:
            c.get("/schedules")
            token = c.cookies.get("tenure_csrf")
            r = c.post("/api/schedules/nope/run", headers={"X-Tenure-CSRF": token})
            assert r.status_code == 404 and "no schedule 'nope'" in r.json()["message"]
            r = c.post("/api/schedules/nightly/run", headers={"X-Tenure-CSRF": token})
            assert r.status_code == 200 and store.jobs.get(r.json()["job_id"]).kind == "reports.build"
    finally:
        store.close()


#: True once the poll's render of the schedules is either on the page (a row named ``third``) or
#: held back by a pressed pointer.
RENDERED_OR_HELD = """() => !!document.querySelector("#schedule-table tr[data-schedule='third']")
  || Number(document.body.dataset.heldRenders || 0) > 0"""


def test_a_click_survives_a_poll_that_rebuilds_the_table_between_press_and_release(engine_url, serve, browser):
    """A poll rebuilt the schedule table every 300 ms; a click whose press and release fell on
    either side of a rebuild was lost (the release landed on a new button). Here a poll with new
    data lands while the Pause button is pressed: the click still pauses, and the new row shows
    after the release."""
    store = tenure.connect(engine_url)
    store.schedules.add("nightly", "0 3 * * *", "reports.build")
    srv = serve(create_app(store, poll_ms=300))
    ctx, page, errors = _page(browser, viewport={"width": 1300, "height": 800})
    try:
        page.clock.install()
        page.goto(srv.url() + "/schedules")
        pause = page.locator("#schedule-table tr[data-schedule='nightly'] button.pause")
        expect(pause).to_be_visible(timeout=15_000)
        pause.hover()
        page.mouse.down()
        store.schedules.add("third", "0 4 * * *", "reports.build")  # the next poll renders anew
        with page.expect_response(lambda r: r.url.endswith("/api/schedules")):
            page.clock.run_for(400)  # one poll period: the poll fetches and renders
        page.wait_for_function(RENDERED_OR_HELD, timeout=15_000)
        page.mouse.up()
        expect(page.locator("#schedule-table tr[data-schedule='third']")).to_have_count(1, timeout=15_000)
        expect(page.locator("#schedule-table tr[data-schedule='nightly'] td.state")).to_have_text(
            "paused", timeout=15_000)
        assert store.schedules.get("nightly").paused
        assert errors == []
    finally:
        ctx.close()
        store.close()
