"""``tenure worker APP --include MODULE`` imports MODULE before the worker starts, in the process
and in every supervised child (task autodiscovery outside Django)."""

from __future__ import annotations

import signal
import subprocess
import textwrap
import time

import pytest

import tenure


@pytest.fixture
def project(tmp_path):
    (tmp_path / "inclapp.py").write_text("import tenure\napp = tenure.App()\n")
    (tmp_path / "incltasks.py").write_text(textwrap.dedent("""
        from inclapp import app

        @app.task(name="incl.square")
        def square(n: int) -> int:
            return n * n
    """))
    return tmp_path


@pytest.mark.parametrize("processes", ["1", "2"])
def test_worker_include_registers_the_module_tasks(cli, engine_url, project, processes):
    store = tenure.connect(engine_url)
    try:
        job = store.jobs.enqueue("incl.square", {"args": [9], "kwargs": {}})
        proc = subprocess.Popen([cli.bin, "worker", "inclapp:app", "--include", "incltasks", "--url", engine_url,
                                 "--processes", processes],
                                cwd=project, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while store.jobs.get(job).state != "done":
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, "the included task never ran"
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
        assert store.jobs.get(job).result == 81
    finally:
        store.close()


def test_worker_include_of_a_missing_module_is_one_line(cli, project):
    res = cli("worker", "inclapp:app", "--include", "nosuchmodule", expect=2)
    assert "cannot import 'nosuchmodule'" in res.err and "Traceback" not in res.err
