"""Fixtures for the dashboard tests: a real uvicorn server in a thread on a free port, stores on
both engines, and (for the browser tests) Debian's chromium driven by Playwright."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "test-output" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class Server:
    """``uvicorn`` serving ``app`` on a socket this process already bound (no port race)."""

    def __init__(self, app, host: str = "127.0.0.1") -> None:
        import uvicorn

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.host, self.port = host, self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="uvicorn-test", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)

    def url(self, host: str | None = None) -> str:
        return f"http://{host or ('127.0.0.1' if self.host in ('0.0.0.0', '') else self.host)}:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@pytest.fixture
def serve():
    """``serve(app, host=...)`` starts a server; all are stopped at teardown."""
    servers: list[Server] = []

    def start(app, host: str = "127.0.0.1") -> Server:
        s = Server(app, host)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


def chromium_or_skip() -> str:
    """Debian's chromium, or a loud skip (a failure under CI: the browser tests must run there)."""
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    msg = (f"SKIPPING BROWSER TESTS: {CHROMIUM} is missing; run scripts/install-browser "
           "(Debian's chromium; no browser is downloaded)")
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="module")
def browser():
    path = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def needs_queue_registry() -> None:
    """Skip (loudly) while the queue registry (``store.queues.create/get/pause/resume``)
    has not landed in this checkout; the test runs as soon as it has."""
    from tenure.queues import Queues

    if not all(hasattr(Queues, name) for name in ("create", "get", "pause", "resume")):
        pytest.skip("SKIPPING: the queue registry (store.queues.create/pause/resume) is not in this "
                    "checkout yet")
