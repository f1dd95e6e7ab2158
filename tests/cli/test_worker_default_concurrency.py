"""``tenure worker`` without ``--concurrency`` runs the default slots of its store's engine: 64 on
SQLite (one writer, one settler), 512 on PostgreSQL (docs/performance.md, "Default settings");
an explicit ``--concurrency`` always wins."""

from __future__ import annotations

import re
import signal
import subprocess
import textwrap
import time

import pytest

from tenure.cli.worker import (
    DEFAULT_CONCURRENCY,
    DEFAULT_CONCURRENCY_POSTGRES,
    _store_dialect,
    default_concurrency,
)

APP = textwrap.dedent("""
    import tenure

    app = tenure.App()

    @app.task(name="slots.noop")
    def noop():
        return None
""")


def _started_with(cli, tmp_path, *extra: str) -> int:
    """Start ``tenure worker`` on the test store, read the concurrency its start line reports,
    then stop it with SIGTERM (it must exit cleanly)."""
    (tmp_path / "slotsapp.py").write_text(APP)
    env = dict(cli.env, TENURE_LOG_LEVEL="INFO")
    proc = subprocess.Popen([cli.bin, "worker", "slotsapp:app", "--url", cli.url, *extra], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        seen = []
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            found = re.search(r"tenure worker started: .* concurrency=(\d+) ", line)
            if found:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=30)
                assert proc.returncode == 0
                return int(found.group(1))
        pytest.fail("no start line: " + "".join(seen))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    raise AssertionError("unreachable")


def test_worker_runs_the_engine_default_slots_unless_told(cli, tmp_path):
    expected = DEFAULT_CONCURRENCY_POSTGRES if cli.url.startswith("postgres") else DEFAULT_CONCURRENCY
    assert _started_with(cli, tmp_path) == expected
    assert _started_with(cli, tmp_path, "--concurrency", "3") == 3


def test_default_concurrency_by_dialect_and_where_the_url_comes_from(monkeypatch):
    assert (DEFAULT_CONCURRENCY, DEFAULT_CONCURRENCY_POSTGRES) == (64, 512)
    assert default_concurrency("sqlite") == 64 and default_concurrency("postgres") == 512

    class _App:
        _store = None
        _url: str | None = None

    app = _App()
    monkeypatch.delenv("TENURE_URL", raising=False)
    assert _store_dialect(None, app) == "sqlite"  # the default URL is a SQLite file
    monkeypatch.setenv("TENURE_URL", "postgresql://u@h/db")
    assert _store_dialect(None, app) == "postgres"
    app._url = "sqlite:///x.db"
    assert _store_dialect(None, app) == "sqlite"  # the app's own URL before the environment
    assert _store_dialect("postgres://u@h/db", app) == "postgres"  # --url before everything
    assert _store_dialect("nonsense://x", app) == "sqlite"  # opening the store refuses it later


def test_worker_help_names_both_defaults(cli):
    res = subprocess.run([cli.bin, "worker", "--help"], env=cli.env, capture_output=True, text=True, timeout=60)
    text = " ".join(res.stdout.split())
    assert "default 64 on SQLite, 512 on PostgreSQL" in text
