"""Queue names containing ``/`` are valid (``tenure._validate.name``), so the dashboard's pause,
resume and redrive act on them too: over HTTP on both engines, and from the
overview's buttons in a real Chromium."""

from __future__ import annotations

import re
from urllib.parse import quote

import httpx
import pytest

import tenure
from tenure.dashboard import create_app

from .conftest import needs_queue_registry

SLASHED = "team/mail"
DLQ = "team/mail/dead"  # a name whose last segment is not a verb, and one that is:
TRICKY = "ops/pause"


@pytest.fixture
def store(engine_url):
    s = tenure.connect(engine_url)
    s.jobs  # noqa: B018
    yield s
    s.close()


def _one_dead_letter(store) -> str:
    store.queues.create(SLASHED, max_attempts=1, dead_letter=DLQ)
    store.queues.create(TRICKY)
    pid = store.jobs.enqueue("send", {"to": "a@example.com"}, queue=SLASHED)
    claim = store.jobs.claim("send", owner="w1", queues=SLASHED)
    store.jobs.fail(claim.lease, RuntimeError("mailbox full"))
    assert store.jobs.get(pid).state == "dead"
    return pid


def test_pause_resume_and_redrive_a_queue_named_with_a_slash(store, serve):
    needs_queue_registry()
    pid = _one_dead_letter(store)
    srv = serve(create_app(store))
    base = srv.url()
    with httpx.Client() as client:
        page = client.get(base + "/")
        token = re.search(r'<meta name="tenure-csrf" content="([^"]+)">', page.text).group(1)
        ok = {"X-Tenure-CSRF": token, "Origin": base}

        def act(name: str, verb: str) -> httpx.Response:
            # As the page sends it (encodeURIComponent): "/" as %2F.
            return client.post(f"{base}/api/queues/{quote(name, safe='')}/{verb}", headers=ok)

        r = act(SLASHED, "pause")
        assert r.status_code == 200 and r.json()["message"] == f"queue {SLASHED} paused"
        assert store.queues.get(SLASHED).paused is True and store.queues.get(TRICKY).paused is False
        overview = {q["name"]: q for q in client.get(base + "/api/overview").json()["queues"]}
        assert overview[SLASHED]["paused"] is True
        assert act(SLASHED, "resume").status_code == 200 and store.queues.get(SLASHED).paused is False
        # A name ending in a verb: the route's verb is the last segment.
        assert act(TRICKY, "pause").status_code == 200 and store.queues.get(TRICKY).paused is True
        assert act(TRICKY, "resume").status_code == 200 and store.queues.get(TRICKY).paused is False
        # Written with a literal "/" it is the same queue.
        r = client.post(f"{base}/api/queues/{SLASHED}/pause", headers=ok)
        assert r.status_code == 200 and store.queues.get(SLASHED).paused is True
        act(SLASHED, "resume")
        r = act(DLQ, "redrive")
        assert r.status_code == 200 and r.json()["count"] == 1
        (retry,) = store.jobs.page(queue=SLASHED, state="pending").items
        assert retry.origin_id == pid
        r = act("team/no-such", "pause")
        assert r.status_code == 404 and r.json()["error"] == "TN3001"


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_pause_a_slashed_queue_from_the_overview_in_chromium(store, serve, browser):
    needs_queue_registry()
    _one_dead_letter(store)
    srv = serve(create_app(store, poll_ms=500))
    ctx = browser.new_context(bypass_csp=True)  # wait_for_function takes a string
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(srv.url() + "/")
        row = f"#queue-table tr[data-queue='{SLASHED}']"
        page.wait_for_selector(f"{row} button[data-action='pause']")
        page.click(f"{row} button[data-action='pause']")
        page.wait_for_selector(f"{row} .badge.paused")
        assert store.queues.get(SLASHED).paused is True
        page.click(f"{row} button[data-action='resume']")
        page.wait_for_selector(f"{row} button[data-action='pause']")
        assert store.queues.get(SLASHED).paused is False
        dead = f"#queue-table tr[data-queue='{DLQ}'] button[data-action='redrive']"
        page.wait_for_selector(dead)
        page.click(dead)
        page.wait_for_function("document.querySelector('#flash').textContent.includes('redrove 1')")
        assert len(store.jobs.page(queue=SLASHED, state="pending").items) == 1
        assert errors == []
    finally:
        ctx.close()
