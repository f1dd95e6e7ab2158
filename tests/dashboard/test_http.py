"""The dashboard over real HTTP (uvicorn on a free port, httpx as the client), on both engines:
pages, the JSON API the page polls, actions through the public API, and the security rules —
token/basic auth, CSRF on every POST, loopback-only actions without a token, escaping, headers.
"""

from __future__ import annotations

import base64
import re
import socket

import httpx
import pytest

import tenure
from tenure.dashboard import create_app

from .conftest import needs_queue_registry

TOKEN = "t0ken-for-tests-only"


def _csrf(client: httpx.Client, base: str, path: str = "/") -> str:
    """Load a page the way a browser does: the CSRF cookie lands in the client's jar, the same
    token is in the page's meta tag."""
    page = client.get(base + path)
    assert page.status_code == 200
    m = re.search(r'<meta name="tenure-csrf" content="([^"]+)">', page.text)
    assert m, page.text[:500]
    assert client.cookies.get("tenure_csrf") == m.group(1)
    return m.group(1)


@pytest.fixture
def store(engine_url):
    s = tenure.connect(engine_url)
    s.jobs  # noqa: B018
    yield s
    s.close()


def test_pages_api_and_metrics(store, serve):
    evil = {"html": "<script>window.__pwned=1</script>", "n": 1}
    ids = store.jobs.enqueue_many([{"kind": "email.send", "payload": {"to": "a@b"}, "queue": "emails"},
                                   {"kind": "email.send", "payload": {"to": "c@d"}, "queue": "emails"},
                                   {"kind": "img.resize", "payload": evil, "queue": "images"}])
    c = store.jobs.claim("email.send", owner="test")
    store.jobs.complete(c.lease, {"sent": True})
    srv = serve(create_app(store))
    with httpx.Client(base_url=srv.url()) as client:
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert page.headers["x-content-type-options"] == "nosniff"
        assert "<script>window" not in page.text  # a shell: no job data in any page
        for path in ("/jobs", "/schedules", "/workers", f"/jobs/{ids[0]}", f"/runs/{ids[0]}",
                     "/static/dashboard.js", "/static/dashboard.css", "/healthz"):
            assert client.get(path).status_code == 200, path
        # An id with HTML in it is escaped in the page shell.
        shell = client.get("/jobs/" + '"><script>alert(1)</script>').text
        assert "<script>alert(1)" not in shell and "&lt;script&gt;alert(1)" in shell

        ov = client.get("/api/overview").json()
        assert ov["counts"]["pending"] == 2 and ov["counts"]["done"] == 1
        queues = {q["name"]: q for q in ov["queues"]}
        assert queues["emails"]["counts"]["done"] == 1 and queues["images"]["counts"]["pending"] == 1
        assert len(ov["throughput"]["buckets"]) == 60 and ov["throughput"]["totals"]["done"] == 1
        assert ov["actions"] is True

        listed = client.get("/api/jobs", params={"queue": "emails", "state": "pending"}).json()
        assert [j["kind"] for j in listed["items"]] == ["email.send"] and listed["next_after"] is None
        assert "payload" not in listed["items"][0]  # lists stay small; the job page has the payload
        paged = client.get("/api/jobs", params={"limit": 2}).json()
        assert len(paged["items"]) == 2 and paged["next_after"] == paged["items"][1]["id"]
        rest = client.get("/api/jobs", params={"limit": 2, "after": paged["next_after"]}).json()
        assert len(rest["items"]) == 1 and rest["next_after"] is None
        assert client.get("/api/jobs", params={"state": "bogus"}).status_code == 400

        job = client.get(f"/api/jobs/{ids[2]}").json()
        assert job["payload"] == evil and job["state"] == "pending" and "lease_token" not in job
        assert [t["what"] for t in job["timeline"]][0] == "created"
        done = client.get(f"/api/jobs/{c.job.id}").json()
        assert done["result"] == {"sent": True} and done["lease_generation"] == 1
        assert client.get("/api/jobs/nope").status_code == 404

        run = client.get(f"/api/runs/{ids[0]}").json()
        assert run["job_id"] == ids[0] and run["nodes"] == []

        metrics = client.get("/metrics")
        assert metrics.headers["content-type"].startswith("text/plain")
        text = metrics.text
        assert 'tenure_jobs{queue="emails",state="pending"} 1.0' in text
        assert 'tenure_jobs{queue="emails",state="done"} 1.0' in text
        assert "tenure_store_up 1.0" in text


def test_actions_need_a_valid_csrf_token(store, serve):
    a, b = store.jobs.enqueue_many([{"kind": "k", "queue": "q"}, {"kind": "k", "queue": "q"}])
    srv = serve(create_app(store))
    base = srv.url()
    with httpx.Client() as client:
        # No token at all, a header without the cookie, a forged (unsigned) pair: all refused.
        r = client.post(f"{base}/api/jobs/{a}/cancel")
        assert r.status_code == 403 and r.json()["error"] == "csrf"
        token = _csrf(client, base)
        r = httpx.post(f"{base}/api/jobs/{a}/cancel", headers={"X-Tenure-CSRF": token})
        assert r.status_code == 403
        forged = "abc.def"
        r = httpx.post(f"{base}/api/jobs/{a}/cancel", headers={"X-Tenure-CSRF": forged},
                       cookies={"tenure_csrf": forged})
        assert r.status_code == 403
        r = client.post(f"{base}/api/jobs/{a}/cancel", headers={"X-Tenure-CSRF": token,
                                                                "Origin": "http://evil.example"})
        assert r.status_code == 403
        assert store.jobs.get(a).state == "pending"  # nothing refused wrote anything
        # A GET never acts.
        assert client.get(f"{base}/api/jobs/{a}/cancel").status_code in (404, 405)
        assert store.jobs.get(a).state == "pending"

        ok = {"X-Tenure-CSRF": token, "Origin": base}
        r = client.post(f"{base}/api/jobs/{a}/cancel", headers=ok)
        assert r.status_code == 200 and r.json()["changed"] is True
        assert store.jobs.get(a).state == "cancelled"
        r = client.post(f"{base}/api/jobs/{a}/cancel", headers=ok)
        assert r.json()["changed"] is False  # 10.7: already cancelled
        r = client.post(f"{base}/api/jobs/{a}/requeue", headers=ok)
        assert r.json()["changed"] is True and store.jobs.get(a).state == "pending"
        # A running job is asked to stop (jobs.request_cancel): flagged, still leased.
        claim = store.jobs.claim("k", owner="t")
        r = client.post(f"{base}/api/jobs/{claim.job.id}/cancel", headers=ok)
        assert r.status_code == 200 and r.json()["outcome"] == "requested"
        assert store.jobs.get(claim.job.id).cancel_requested_at is not None
        # A refusal from the public API arrives with its code.
        r = client.post(f"{base}/api/jobs/no-such/requeue", headers=ok)
        assert r.status_code == 409 and r.json()["error"] == "TN2065"
        # Queue actions go through store.queues.
        needs_queue_registry()
        r = client.post(f"{base}/api/queues/q/pause", headers=ok)
        assert r.status_code == 200 and store.queues.get("q").paused is True
        assert client.get(f"{base}/api/overview").json()["queues"][0]["paused"] is True
        r = client.post(f"{base}/api/queues/q/resume", headers=ok)
        assert r.status_code == 200 and store.queues.get("q").paused is False
        assert client.post(f"{base}/api/queues/q/redrive", headers=ok).json()["count"] == 0
        assert b


def test_token_protects_every_route_and_actions_still_need_csrf(store, serve, monkeypatch):
    job = store.jobs.enqueue("k", {"x": 1})
    monkeypatch.setenv("TENURE_DASHBOARD_TOKEN", TOKEN)
    srv = serve(create_app(store))  # token from the environment
    base = srv.url()
    for path in ("/", "/jobs", "/api/overview", f"/api/jobs/{job}", "/metrics", "/static/dashboard.js"):
        r = httpx.get(base + path)
        assert r.status_code == 401, path
        assert r.headers["www-authenticate"].startswith("Basic")
        assert TOKEN not in r.text
    assert httpx.get(base + "/healthz").status_code == 200
    assert httpx.get(base + "/api/overview", headers={"Authorization": "Bearer wrong-token!"}).status_code == 401
    assert httpx.get(base + "/api/overview", auth=("admin", "wrong-token!")).status_code == 401
    assert httpx.get(base + "/api/overview", headers={"Authorization": "Basic !!notbase64"}).status_code == 401
    assert httpx.get(base + "/api/overview", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert httpx.get(base + "/metrics", auth=("prometheus", TOKEN)).status_code == 200

    with httpx.Client(auth=("ops", TOKEN)) as client:
        page = client.get(base + "/")
        assert page.status_code == 200 and TOKEN not in page.text
        token = _csrf(client, base)
        assert client.post(f"{base}/api/jobs/{job}/cancel").status_code == 403  # authenticated, no CSRF
        r = client.post(f"{base}/api/jobs/{job}/cancel", headers={"X-Tenure-CSRF": token})
        assert r.status_code == 200 and store.jobs.get(job).state == "cancelled"
    # CSRF without the token is still unauthorized.
    r = httpx.post(f"{base}/api/jobs/{job}/requeue", headers={"X-Tenure-CSRF": token}, cookies={"tenure_csrf": token})
    assert r.status_code == 401 and store.jobs.get(job).state == "cancelled"


def _non_loopback_ip() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outbound interface
            ip = s.getsockname()[0]
    except OSError:
        return None
    return None if ip.startswith("127.") or ip == "0.0.0.0" else ip


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_without_a_token_only_this_machine_may_act(store, serve):
    job = store.jobs.enqueue("k")
    ip = _non_loopback_ip()
    if ip is None:
        pytest.skip("SKIPPING: this machine has no non-loopback address to connect from")
    srv = serve(create_app(store), host="0.0.0.0")
    remote = f"http://{ip}:{srv.port}"
    with httpx.Client() as client:
        page = client.get(remote + "/")
        assert page.status_code == 200 and 'data-actions="0"' in page.text
        assert client.get(remote + "/api/overview").json()["actions"] is False
        token = _csrf(client, remote)
        r = client.post(f"{remote}/api/jobs/{job}/cancel", headers={"X-Tenure-CSRF": token})
        assert r.status_code == 403 and "token" in r.json()["message"]
        assert store.jobs.get(job).state == "pending"
    with httpx.Client() as client:  # the same server, from 127.0.0.1
        local = srv.url("127.0.0.1")
        token = _csrf(client, local)
        assert client.post(f"{local}/api/jobs/{job}/cancel", headers={"X-Tenure-CSRF": token}).status_code == 200


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_read_only_and_mounted_under_a_prefix(store, serve):
    from starlette.applications import Starlette
    from starlette.routing import Mount

    job = store.jobs.enqueue("k")
    ro = serve(create_app(store, read_only=True))
    with httpx.Client() as client:
        assert 'data-actions="0"' in client.get(ro.url() + "/").text
        token = _csrf(client, ro.url())
        r = client.post(f"{ro.url()}/api/jobs/{job}/cancel", headers={"X-Tenure-CSRF": token})
        assert r.status_code == 403 and "read-only" in r.json()["message"]

    host = Starlette(routes=[Mount("/ops/tenure", app=create_app(store, title="acme jobs"))])
    srv = serve(host)
    base = srv.url() + "/ops/tenure"
    with httpx.Client() as client:
        page = client.get(base + "/")
        assert 'href="/ops/tenure/static/dashboard.css"' in page.text and 'data-root="/ops/tenure"' in page.text
        assert "acme jobs" in page.text
        assert "Path=/ops/tenure/" in page.headers["set-cookie"]
        assert client.get(base + "/static/dashboard.js").status_code == 200
        assert client.get(base + "/api/overview").json()["counts"]["pending"] == 1
        token = _csrf(client, base)
        r = client.post(f"{base}/api/jobs/{job}/cancel", headers={"X-Tenure-CSRF": token})
        assert r.status_code == 200 and store.jobs.get(job).state == "cancelled"


def test_create_app_validates_its_options(store):
    with pytest.raises(tenure.errors.InvalidArgument):
        create_app(store, auth_token="short")
    with pytest.raises(tenure.errors.InvalidArgument):
        create_app(store, poll_ms=10)
    app = create_app(store, auth_token=TOKEN, username="ops")
    dash = app.state.dashboard
    basic = "Basic " + base64.b64encode(f"ops:{TOKEN}".encode()).decode()
    other = "Basic " + base64.b64encode(f"root:{TOKEN}".encode()).decode()
    assert dash.authorized(basic) and not dash.authorized(other) and not dash.authorized(None)
