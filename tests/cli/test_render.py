"""The CLI's pure helpers, in process: tables with and without rich, durations, the read-only URL
``migrate --check`` opens, and secret scrubbing."""

from __future__ import annotations

import io

import click
import pytest

from tenure import cli
from tenure.engine.urls import read_only_url


def test_plain_table_is_aligned_and_rich_table_renders():
    text = cli.render_table(["id", "state"], [("a-1", "pending"), ("bb-22", None)])
    assert text.splitlines() == ["ID     STATE", "a-1    pending", "bb-22"]
    from rich.console import Console

    buf = io.StringIO()
    assert cli.render_table(["id", "state"], [("a-1", "<b>x</b>")], title="jobs",
                            console=Console(file=buf, force_terminal=True, width=80)) == ""
    out = buf.getvalue()
    assert "a-1" in out and "<b>x</b>" in out and "jobs" in out


def test_durations():
    assert cli.parse_duration("7d", "--x") == 7 * 86400
    assert cli.parse_duration("250ms", "--x") == 0.25
    assert cli.parse_duration("90", "--x") == 90
    assert cli.parse_duration(" 1.5h ", "--x") == 5400
    for bad in ("", "7 days", "-1s", "1y"):
        with pytest.raises(click.BadParameter):
            cli.parse_duration(bad, "--x")


def test_read_only_url_for_migrate_check():
    assert read_only_url("sqlite:////data/t.db") == "sqlite:////data/t.db?mode=ro"
    assert read_only_url("sqlite:///t.db?mode=rw&busy_timeout_ms=10") == \
        "sqlite:///t.db?busy_timeout_ms=10&mode=ro"
    pg = read_only_url("postgresql://u:p@h/db?schema=jobs&options=-c%20statement_timeout%3D5s")
    assert pg.startswith("postgresql://u:p@h/db?schema=jobs&options=")
    assert "statement_timeout" in pg and "default_transaction_read_only%3Don" in pg


def test_every_error_line_is_scrubbed_of_remembered_secrets():
    cli._remember_secret("postgresql://app:hunter2-secret@db/app")
    try:
        assert cli._one_line("failed:\n  password hunter2-secret rejected") == "failed: password *** rejected"
    finally:
        cli._SECRETS.discard("hunter2-secret")
