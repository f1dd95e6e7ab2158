"""The supervisor (``tenure worker APP --processes N``, :mod:`tenure.supervisor`) with real
processes: a child killed with SIGKILL is restarted; SIGTERM to the supervisor stops every child
gracefully (the job in flight finishes) and exits 0; a second signal stops them at once; a child is
recycled after ``max_jobs_per_process`` jobs; an app that cannot load ends the supervisor with 78.

The supervisor's behaviour does not depend on the engine, so these run on SQLite only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

import tenure
import tenure.supervisor as sup_module
from tenure import WorkerConfig
from tenure.errors import InvalidArgument, TenureError
from tenure.supervisor import EX_CONFIG, EX_IMMEDIATE, Supervisor

from ._tasks import make_app
from ._wk import wait_for

HERE = Path(__file__).resolve().parent
SRC = Path(tenure.__file__).resolve().parents[1]


def _children(pid: int) -> set[int]:
    """The live (not zombie) child pids of ``pid``, from /proc."""
    out: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.add(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path}/sup.db"
    tenure.connect(url).jobs  # noqa: B018 - create the schema once, before the children race for it
    return url


@pytest.fixture
def app(sqlite_url):
    a = make_app(sqlite_url)
    yield a
    a.store.close()


@pytest.fixture
def supervisor(sqlite_url, tmp_path):
    """``supervisor(*args)`` starts ``python -m tenure.supervisor _tasks:app ...`` (killed with its
    children at teardown, whatever happened)."""
    started: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        log = tmp_path / f"supervisor-{len(started)}.log"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(SRC)]), TENURE_LOG_LEVEL="INFO")
        with open(log, "wb") as f:
            proc = subprocess.Popen([sys.executable, "-m", "tenure.supervisor", "_tasks:app", "--url", sqlite_url,
                                     *args], env=env, cwd=str(HERE), stdout=subprocess.DEVNULL, stderr=f)
        proc.log = log  # type: ignore[attr-defined]
        started.append(proc)
        return proc

    yield start
    for proc in started:
        kids = _children(proc.pid)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for kid in kids:
            try:
                os.kill(kid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_killed_child_is_restarted_and_sigterm_stops_all_gracefully(app, supervisor, tmp_path):
    """kill -9 one child → the supervisor starts a new one; SIGTERM to the supervisor → every
    child stops gracefully (the busy handler in flight finishes, its job is done) and the
    supervisor exits 0."""
    sup = supervisor("--processes", "2", "--concurrency", "1")
    first = wait_for(lambda: len(kids := _children(sup.pid)) == 2 and kids, timeout=30, what="two children")
    victim = sorted(first)[0]
    os.kill(victim, signal.SIGKILL)
    after = wait_for(lambda: len(kids := _children(sup.pid)) == 2 and victim not in kids and kids,
                     timeout=30, what="the replacement child")
    (replacement,) = after - first
    assert _alive(replacement)
    # Both children work: jobs are spread over the live pids.
    results = [app.tasks["pid"].enqueue(i) for i in range(6)]
    assert {h.result(timeout=30)["pid"] for h in results} <= after
    ledger = tmp_path / "busy.jsonl"
    busy = app.tasks["busy"].enqueue(0.5, str(ledger))
    wait_for(lambda: ledger.exists() and ledger.read_text(), timeout=30, what="the busy handler")
    sup.send_signal(signal.SIGTERM)
    assert sup.wait(30) == 0
    assert busy.result(timeout=1) == "finished"
    assert [json.loads(x)[3] for x in ledger.read_text().splitlines()] == ["start", "end"]
    for pid in after:
        assert not _alive(pid)
    log = sup.log.read_text()
    assert "killed by SIGKILL" in log and "restarting" in log and "gracefully" in log


def test_a_second_signal_stops_the_children_at_once(app, supervisor, tmp_path):
    """A second SIGTERM while children wait for a handler stops them at once; the supervisor exits
    130 and no child is left."""
    sup = supervisor("--processes", "1")
    ledger = tmp_path / "busy.jsonl"
    app.tasks["busy"].enqueue(30, str(ledger))
    wait_for(lambda: ledger.exists() and ledger.read_text(), timeout=30, what="the busy handler")
    kids = _children(sup.pid)
    sup.send_signal(signal.SIGTERM)
    wait_for(lambda: "stopping gracefully" in sup.log.read_text(), what="the graceful stop")
    time.sleep(0.2)  # the child got the first signal (it waits for its handler)
    t0 = time.monotonic()
    sup.send_signal(signal.SIGTERM)
    assert sup.wait(10) == EX_IMMEDIATE
    assert time.monotonic() - t0 < 3
    assert kids and not any(_alive(k) for k in kids)


def test_children_are_recycled_after_max_jobs(app, supervisor):
    """--max-jobs-per-process 3: each child settles at most 3 jobs, then a fresh one replaces it."""
    sup = supervisor("--processes", "1", "--max-jobs", "3")
    handles = [app.tasks["pid"].enqueue(i) for i in range(7)]
    pids = [h.result(timeout=60)["pid"] for h in handles]
    per_pid = {p: pids.count(p) for p in pids}
    assert len(per_pid) >= 3 and max(per_pid.values()) <= 3, per_pid
    wait_for(lambda: len(_children(sup.pid)) == 1, timeout=30, what="a live child")
    sup.send_signal(signal.SIGTERM)
    assert sup.wait(30) == 0
    assert sup.log.read_text().count("recycled after 3 jobs") >= 2


def test_an_app_that_cannot_load_stops_the_supervisor(sqlite_url, tmp_path):
    """A child that cannot import the app exits 78; the supervisor stops instead of restarting it
    forever, and answers 78."""
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        sup = Supervisor("no_such_module_xyz:app", processes=2, url=sqlite_url, install_signals=False)
        t0 = time.monotonic()
        assert sup.run() == EX_CONFIG
    finally:
        os.chdir(cwd)
    assert time.monotonic() - t0 < 30
    assert len(sup.started_pids) == 2


def test_run_supervisor_validates_its_arguments():
    """Bad arguments are refused before any process starts, with the coded error of the worker's
    own table (TN1001 a bad value, TN1002 a wrong type) naming the option."""
    from tenure.supervisor import run_supervisor

    for kwargs, code, named in (({"processes": 0}, "TN1001", "processes"), ({"processes": 1.5}, "TN1002", "processes"),
                                ({"concurrency": 0}, "TN1001", "concurrency"),
                                ({"max_jobs_per_process": 0}, "TN1001", "max_jobs_per_process"),
                                ({"lease": "soon"}, "TN1001", "lease"), ({"stop_grace": -1}, "TN1001", "stop_grace"),
                                ({"grace": "forever"}, "TN1001", "grace"),
                                ({"stop_grase": 1}, "TN1001", "did you mean 'stop_grace'"),
                                ({"on_outcome": print}, "TN1001", "on_outcome"),
                                ({"max_jobs": 3}, "TN1001", "max_jobs_per_process")):
        args = {"processes": 1, "max_jobs_per_process": None, "concurrency": 1, "queues": None, "url": None,
                **kwargs}
        with pytest.raises(TenureError) as ei:
            run_supervisor("_tasks:app", **args)
        assert ei.value.code == code and named in str(ei.value), (kwargs, ei.value)
    with pytest.raises(InvalidArgument):
        run_supervisor("no-colon", processes=1, max_jobs_per_process=None, concurrency=1, queues=None, url=None)


def test_the_supervisor_hands_each_child_the_same_worker_config(monkeypatch):
    """The children's command line is the configuration's text form, read back by the child into
    an equal :class:`WorkerConfig` (durations in seconds, whatever spelling the caller used)."""
    sup = Supervisor("_tasks:app", processes=2, concurrency=3, queues=["a", "b"], lease=timedelta(seconds=7),
                     stop_grace="1500ms", zombie_share=0.25, grace="1m", install_signals=False)
    cmd = sup._command()
    child = cmd[cmd.index("--child"):]
    assert child[:2] == ["--child", "_tasks:app"] and child[child.index("--grace") + 1] == "60.0"
    parsed: dict = {}

    def capture(ns: argparse.Namespace) -> int:
        parsed["config"] = sup_module._config_of(ns)
        return 0

    monkeypatch.setattr(sup_module, "_child_main", capture)
    assert sup_module.main(child) == 0
    assert parsed["config"] == sup.config == WorkerConfig(concurrency=3, queues=("a", "b"), lease=7, stop_grace=1.5,
                                                          zombie_share=0.25)
