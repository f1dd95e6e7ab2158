"""DNS rebinding against the dashboard, reproduced in a REAL Chromium.

Chromium's ``--host-resolver-rules`` maps the attacker's host name to 127.0.0.1, as a rebinding
DNS server would once the victim's browser has loaded the attacker's page. The attacker's script,
running in the attacker's origin (``http://<attacker name>:<dashboard port>``, now resolved to this
machine), fetches the dashboard on that same origin — reads a job's card number, takes the CSRF token from
the page shell, cancels the job and pauses its queue. On a dashboard that trusts ``Host`` all four
succeed; this one answers 421 to each and nothing changes. A name the operator configured
(``allowed_hosts``), resolved the same way, works.
"""

from __future__ import annotations

import json

import pytest

import tenure
from tenure.dashboard import create_app

from .conftest import CHROMIUM_ARGS, chromium_or_skip, needs_queue_registry

EVIL = "rebind.attacker.test"
OURS = "jobs.internal.test"
CARD = "4111 1111 1111 1111"

#: The attacker's script, run in the attacker's origin once its name resolves to 127.0.0.1.
ATTACK = """async (job) => {
  const out = {};
  try {
    const ov = await fetch("/api/overview");
    out.overview = ov.status;
    out.read = await ov.text();
    const one = await fetch("/api/jobs/" + job);
    out.job = one.status;
    out.read += await one.text();
    const shell = await (await fetch("/")).text();
    const m = shell.match(/name="tenure-csrf" content="([^"]+)"/);
    out.csrf = m ? "found" : "absent";
    const post = (path) => fetch(path, {method: "POST", headers: {"X-Tenure-CSRF": m ? m[1] : "none"}});
    out.cancel = (await post("/api/jobs/" + job + "/cancel")).status;
    out.pause = (await post("/api/queues/payments/pause")).status;
  } catch (e) {
    out.error = String(e);
  }
  return out;
}"""


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_a_rebound_host_name_is_refused_in_chromium(engine_url, serve):
    needs_queue_registry()
    path = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    store = tenure.connect(engine_url)
    job = store.jobs.enqueue("charge", {"card": CARD}, queue="payments")
    srv = serve(create_app(store))
    named = serve(create_app(store, allowed_hosts=[OURS]))
    rules = f"--host-resolver-rules=MAP {EVIL} 127.0.0.1, MAP {OURS} 127.0.0.1"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=path, args=[*CHROMIUM_ARGS, rules], headless=True)
            try:
                ctx = browser.new_context(bypass_csp=True)  # page.evaluate below; the attack page has no CSP
                page = ctx.new_page()
                # The victim opens the attacker's page; its name now resolves to 127.0.0.1, so the
                # page and the dashboard share one origin, and the attacker's script runs in it.
                page.goto(f"http://{EVIL}:{srv.port}/welcome.html")
                assert page.evaluate("location.origin") == f"http://{EVIL}:{srv.port}"
                result = page.evaluate(ATTACK, job)
                assert "error" not in result, result
                assert (result["overview"], result["job"], result["cancel"], result["pause"]) == (
                    421,
                    421,
                    421,
                    421,
                ), result
                assert result["csrf"] == "absent"
                assert CARD not in result["read"] and "payments" not in result["read"]
                # A plain navigation to the dashboard under the attacker's name is refused too.
                response = page.goto(f"http://{EVIL}:{srv.port}/jobs/{job}")
                assert response.status == 421
                assert CARD not in page.content()

                # The same browser on the dashboard's own names: loopback, and a configured name
                # resolved through the same rules.
                for base in (srv.url(), f"http://{OURS}:{named.port}"):
                    page.goto(f"{base}/jobs/{job}")
                    page.wait_for_selector("#payload")
                    assert CARD in page.inner_text("#payload")
                    data = json.loads(page.evaluate("fetch('/api/overview').then(r => r.text())"))
                    assert data["counts"]["pending"] == 1
                ctx.close()
            finally:
                browser.close()
        assert store.jobs.get(job).state == "pending"
        assert store.queues.get("payments").paused is False
    finally:
        store.close()
