"""The worker's start banner names the SQLite file it reads when the URL's path is relative (the
default ``sqlite:///tenure.db`` is): a worker started in another directory than the enqueuing
code opens another file and waits forever, and ``store=sqlite:///tenure.db`` did not show it."""

from __future__ import annotations

import logging

import pytest

import tenure


def _banner(app, caplog) -> str:
    with caplog.at_level(logging.INFO, logger="tenure"):
        app.run_worker(max_jobs=1, install_signals=False, poll_interval=0.01)
    [banner] = [r.getMessage() for r in caplog.records if "tenure worker started" in r.getMessage()]
    return banner


@pytest.mark.parametrize("engine_url", ["sqlite"], indirect=True)
def test_a_relative_sqlite_path_is_shown_resolved(engine_url, tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    app = tenure.App("sqlite:///relative.db")

    @app.task(name="banner.noop")
    def noop() -> None:
        return None

    try:
        noop.enqueue()
        assert f"store=<tenure.Store sqlite:///relative.db> file={tmp_path / 'relative.db'} queues=" in _banner(app, caplog)
    finally:
        app.store.close()


def test_an_absolute_path_or_a_server_is_shown_as_it_is(engine_url, caplog):
    app = tenure.App(engine_url)

    @app.task(name="banner.noop")
    def noop() -> None:
        return None

    try:
        noop.enqueue()
        assert " file=" not in _banner(app, caplog)
    finally:
        app.store.close()
