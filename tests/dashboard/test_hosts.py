"""The dashboard answers only to its own host names (DNS rebinding), over real
HTTP: a foreign ``Host`` gets 421 on every route but /healthz, a malformed one 400, and the CSRF
check compares ``Origin`` with the allow-list, never with ``Host``. The same attack in a real
Chromium is ``tests/dashboard/test_rebinding_browser.py``."""

from __future__ import annotations

import re
import socket

import httpx
import pytest

import tenure
from tenure.dashboard import create_app
from tenure.dashboard.hosts import HostAllowList, normalize_host, parse_host
from tenure.errors import InvalidArgument

EVIL = "rebind.attacker.test"


@pytest.fixture
def store(engine_url):
    s = tenure.connect(engine_url)
    s.jobs  # noqa: B018
    yield s
    s.close()


def _page_token(client: httpx.Client, base: str, host: str | None = None) -> str:
    headers = {"Host": host} if host else {}
    page = client.get(base + "/", headers=headers)
    assert page.status_code == 200, page.text
    return re.search(r'<meta name="tenure-csrf" content="([^"]+)">', page.text).group(1)


@pytest.mark.parametrize(
    ("header", "parsed"),
    [
        ("localhost:8350", ("localhost", 8350)),
        ("LOCALHOST.", ("localhost", None)),
        ("127.0.0.1", ("127.0.0.1", None)),
        ("[::1]:8350", ("::1", 8350)),
        ("[0:0:0:0:0:0:0:1]", ("::1", None)),
        ("Tenure.Example.COM:443", ("tenure.example.com", 443)),
        ("host:", ("host", None)),
        ("", None),
        ("::1", None),  # an IPv6 address must be bracketed
        ("[::1", None),
        ("a b", None),
        ("evil.test:99999", None),
        ("evil.test:80:80", None),
        ("evil.test:8o", None),
        ("-bad-.test", None),
        ("[::1]x", None),
        ("user@evil.test", None),
    ],
)
def test_parse_host(header, parsed):
    assert parse_host(header) == parsed


def test_the_allow_list():
    hosts = HostAllowList(["Dash.Example.com.", "10.0.0.7", "[fd00::1]"])
    assert hosts.names == {"dash.example.com", "10.0.0.7", "fd00::1"}
    for name in ("dash.example.com", "10.0.0.7", "fd00::1", "localhost", "127.0.0.1", "127.3.4.5", "::1"):
        assert hosts.allows(name), name
    for name in (EVIL, "example.com", "sub.dash.example.com", "10.0.0.8", "a.localhost"):
        assert not hosts.allows(name), name
    # The address the request arrived on (the socket's own), IPv4-mapped or not.
    assert hosts.allows("192.168.1.20", "192.168.1.20")
    assert hosts.allows("192.168.1.20", "::ffff:192.168.1.20")
    assert not hosts.allows("192.168.1.21", "192.168.1.20")
    assert not hosts.allows(EVIL, EVIL)  # only an address, never a name, is taken from the socket
    for bad in ("http://dash.example.com", "dash.example.com:8350", "*", "", "a b", 7):
        with pytest.raises(InvalidArgument):
            HostAllowList([bad])
    assert normalize_host("[::1]") == "::1" and normalize_host("x..y") is None


def test_a_foreign_host_is_refused_on_every_route(store, serve):
    job = store.jobs.enqueue("k", {"card": "4111 1111 1111 1111"}, queue="q")
    srv = serve(create_app(store))
    base = srv.url()
    with httpx.Client() as client:
        token = _page_token(client, base)
        foreign = {"Host": f"{EVIL}:{srv.port}"}
        for path in (
            "/",
            "/jobs",
            f"/jobs/{job}",
            "/api/overview",
            f"/api/jobs/{job}",
            "/api/jobs",
            "/metrics",
            "/static/dashboard.js",
            "/nope",
        ):
            r = client.get(base + path, headers=foreign)
            assert r.status_code == 421, path
            assert "4111" not in r.text and r.json()["error"] == "misdirected"
            assert r.headers["x-frame-options"] == "DENY"  # the security headers are still set
        # The rebinding attacker's POST: Host and Origin both the attacker's name, a valid CSRF pair.
        r = client.post(
            f"{base}/api/jobs/{job}/cancel",
            headers={**foreign, "Origin": f"http://{EVIL}:{srv.port}", "X-Tenure-CSRF": token},
        )
        assert r.status_code == 421
        assert store.jobs.get(job).state == "pending"
        assert client.get(base + "/healthz", headers=foreign).status_code == 200  # shows nothing
        # Our own names: the bound address, localhost, loopback literals.
        for host in (f"127.0.0.1:{srv.port}", f"localhost:{srv.port}", f"[::1]:{srv.port}", "localhost"):
            assert client.get(base + "/api/overview", headers={"Host": host}).status_code == 200, host
        for host in ("a b", f"{EVIL}:99999", "[::1", "::1"):
            r = client.get(base + "/api/overview", headers={"Host": host})
            assert r.status_code == 400 and r.json()["error"] == "host", host


def test_origin_is_checked_against_the_allow_list_not_host(store, serve):
    a = store.jobs.enqueue("k", queue="q")
    srv = serve(create_app(store))
    base = srv.url()
    with httpx.Client() as client:
        token = _page_token(client, base)
        csrf = {"X-Tenure-CSRF": token}
        for origin in (
            f"http://{EVIL}:{srv.port}",
            f"http://localhost:{srv.port + 1}",
            "http://127.0.0.1",
            "null",
            "file://",
            f"ftp://127.0.0.1:{srv.port}",
            "garbage",
            f"http://127.0.0.1:{srv.port}/x",
        ):
            r = client.post(f"{base}/api/jobs/{a}/cancel", headers={**csrf, "Origin": origin})
            assert r.status_code == 403 and r.json()["error"] == "csrf", origin
        assert store.jobs.get(a).state == "pending"
        # Our own names on the port the request was sent to (localhost is ours even though Host
        # says 127.0.0.1: the two are compared with the allow-list, not with each other).
        r = client.post(
            f"{base}/api/jobs/{a}/cancel", headers={**csrf, "Origin": f"http://localhost:{srv.port}"}
        )
        assert r.status_code == 200 and store.jobs.get(a).state == "cancelled"
        r = client.post(
            f"{base}/api/jobs/{a}/requeue", headers={**csrf, "Origin": f"http://127.0.0.1:{srv.port}"}
        )
        assert r.status_code == 200 and store.jobs.get(a).state == "pending"
        r = client.post(f"{base}/api/jobs/{a}/cancel", headers=csrf)  # no Origin: not a browser's POST
        assert r.status_code == 200 and store.jobs.get(a).state == "cancelled"


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_configured_names_and_a_token(store, serve):
    job = store.jobs.enqueue("k", queue="q")
    srv = serve(create_app(store, allowed_hosts=["Dash.Example.com"], auth_token="t0ken-for-tests"))
    base = srv.url()
    auth = {"Authorization": "Bearer t0ken-for-tests"}
    with httpx.Client(headers=auth) as client:
        named = f"dash.example.com:{srv.port}"
        assert client.get(base + "/api/overview", headers={"Host": named}).status_code == 200
        assert client.get(base + "/api/overview", headers={"Host": "dash.example.com"}).status_code == 200
        r = client.get(base + "/api/overview", headers={"Host": EVIL})
        assert r.status_code == 421
        # The host check comes first: a foreign host learns nothing, not even that a token is needed.
        assert httpx.get(base + "/api/overview", headers={"Host": EVIL}).status_code == 421
        assert httpx.get(base + "/api/overview", headers={"Host": named}).status_code == 401
        token = _page_token(client, base, host=named)
        r = client.post(
            f"{base}/api/jobs/{job}/cancel",
            headers={"Host": named, "Origin": f"http://{named}", "X-Tenure-CSRF": token},
        )
        assert r.status_code == 200 and store.jobs.get(job).state == "cancelled"
    with pytest.raises(InvalidArgument):
        create_app(store, allowed_hosts=["https://dash.example.com"])


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_two_host_headers_are_refused(store, serve):
    srv = serve(create_app(store))
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall(
            b"GET /api/overview HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: "
            + EVIL.encode()
            + b"\r\nConnection: close\r\n\r\n"
        )
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_mount_dashboard_passes_its_allowed_hosts(store, serve):
    from starlette.applications import Starlette

    from tenure.contrib.asgi import mount_dashboard

    web = Starlette()
    mount_dashboard(web, store, "/ops/tenure", allowed_hosts=["jobs.example.org"], title="acme")
    srv = serve(web)
    base = srv.url() + "/ops/tenure"
    assert httpx.get(base + "/api/overview", headers={"Host": "jobs.example.org"}).status_code == 200
    assert httpx.get(base + "/api/overview", headers={"Host": EVIL}).status_code == 421
    assert "acme" in httpx.get(base + "/").text


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_the_cli_takes_allowed_hosts(engine_url, tmp_path):
    """``tenure dashboard --allowed-host NAME`` as a real process; a bad name exits 2."""
    import os
    import signal
    import subprocess
    import time

    from ..cli.conftest import tenure_bin

    env = {k: v for k, v in os.environ.items() if not k.startswith("TENURE_")}
    bad = subprocess.run(
        [tenure_bin(), "dashboard", "--url", engine_url, "--allowed-host", "https://x.example"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--allowed-host" in bad.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            tenure_bin(),
            "dashboard",
            "--url",
            engine_url,
            "--port",
            str(port),
            "--allowed-host",
            "dash.example.test",
            "--allowed-host",
            "10.9.8.7",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        for host, status in (
            ("dash.example.test", 200),
            ("10.9.8.7:8350", 200),
            (f"127.0.0.1:{port}", 200),
            (EVIL, 421),
            ("10.9.8.6", 421),
        ):
            assert httpx.get(base + "/api/overview", headers={"Host": host}).status_code == status, host
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
