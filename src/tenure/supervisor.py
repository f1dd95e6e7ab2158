"""Worker processes under one supervisor: ``tenure worker APP --processes N``.

CPU-bound handlers need processes, not threads (the GIL). The supervisor runs N worker processes
over one :class:`tenure.App`, each a plain ``App.run_worker`` in its own interpreter, started as
``python -m tenure.supervisor --child APP ...``. It:

- **restarts** a child that dies (a crash, ``kill -9``, an OOM kill): at once the first time, then
  with a capped exponential backoff while children keep dying young (:data:`HEALTHY_AFTER`); the
  jobs a dead child held come back after their lease, like any crashed worker's;
- **recycles** a child after ``max_jobs_per_process`` settled jobs (for leaky handlers): the child
  stops gracefully by itself and a fresh one takes its place;
- **forwards** SIGTERM/SIGINT to every child: the first signal is a graceful stop (each child
  cancels its handlers and gives them its ``stop_grace``), a second one stops them at once;
- gives up (exit status :data:`EX_CONFIG`) when a child cannot load the app at all, instead of
  restarting it forever;
- **replaces** a child that reports itself unhealthy: a child whose slots are held by zombie
  handlers (``--zombie-share``, :mod:`tenure.worker_health`) stops and exits with status
  :data:`EX_UNHEALTHY` (75), and is restarted like a crashed one.

Children run in their own process group, so a terminal's Ctrl-C reaches only the supervisor (which
forwards it once), and each child stops by itself if the supervisor disappears (``kill -9`` of the
supervisor leaves no orphan working on).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from . import _validate as v
from . import durations
from .errors import InvalidArgument
from .worker.config import WorkerConfig, option_doc, text_options
from .worker_health import EXIT_UNHEALTHY

log = logging.getLogger("tenure.supervisor")

#: A child exits with this status when it cannot load the app (``sysexits.h`` EX_CONFIG).
EX_CONFIG = 78
#: Exit status after a second signal (stop at once), like a shell's for SIGINT.
EX_IMMEDIATE = 130
#: A child exits with this status when zombie slots made it unhealthy (``sysexits.h`` EX_TEMPFAIL).
EX_UNHEALTHY = EXIT_UNHEALTHY
#: A child that lived at least this long (seconds) before dying is restarted at once; children
#: that die younger are restarted after a backoff doubling from RESTART_BACKOFF_MIN.
HEALTHY_AFTER = 5.0
RESTART_BACKOFF_MIN = 0.1
RESTART_BACKOFF_MAX = 10.0
#: How often the supervisor looks at its children (seconds).
TICK = 0.05
#: How often a child checks that its supervisor is still there (seconds).
PARENT_CHECK = 0.5


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@dataclass
class _Child:
    slot: int
    proc: subprocess.Popen | None = None
    started: float = 0.0
    restart_at: float | None = None
    failures: int = 0
    history: list[int] = field(default_factory=list)


class Supervisor:
    """N worker processes over one app (see the module docstring). ``run()`` blocks and answers
    the exit status: 0 after a graceful stop, :data:`EX_IMMEDIATE` after a second signal,
    :data:`EX_CONFIG` when the children cannot load the app."""

    def __init__(self, app_spec: str, config: WorkerConfig | None = None, *, processes: int,
                 max_jobs_per_process: int | None = None, url: str | None = None, python: str | None = None,
                 install_signals: bool = True, stop_event: threading.Event | None = None,
                 grace: float | timedelta | str | None = None, **options: Any) -> None:
        if not isinstance(app_spec, str) or ":" not in app_spec:
            raise InvalidArgument(f"app_spec must be module:attribute (e.g. myproject.tasks:app), got {app_spec!r}")
        v.positive_int(processes, "processes")
        v.positive_int(max_jobs_per_process, "max_jobs_per_process", allow_none=True)
        #: Each child's worker settings (:class:`tenure.WorkerConfig`, its text form crosses to the
        #: child: an ``on_outcome`` observer cannot, and is refused here).
        self.config = WorkerConfig.build(config, options)
        if self.config.max_jobs is not None:
            raise InvalidArgument("a supervisor recycles its children with max_jobs_per_process=, not max_jobs=",
                                  option="max_jobs")
        self._worker_args = [arg for name, text in self.config.to_text().items()
                             for arg in (f"--{name.replace('_', '-')}", text)]
        #: What each child gives its handlers on a graceful stop (None: ``App.run_worker``'s default).
        self.grace = durations.optional_seconds(grace, "grace")
        self.app_spec = app_spec
        self.processes = processes
        self.max_jobs_per_process = max_jobs_per_process
        self.concurrency = self.config.concurrency
        self.queues = None if self.config.queues is None else list(self.config.queues)
        self.url = url
        self.python = python or sys.executable
        self.install_signals = install_signals
        self._external = stop_event or threading.Event()
        self._wakeup = threading.Event()
        self._children = [_Child(slot) for slot in range(processes)]
        self._signals: list[int] = []  # received, not yet forwarded
        self._stopping = False
        self._immediate = False
        self._exit = 0
        #: Every child pid started so far, in order (diagnostics and tests).
        self.started_pids: list[int] = []

    # -- children --------------------------------------------------------------------------------
    def _command(self) -> list[str]:
        cmd = [self.python, "-m", "tenure.supervisor", "--child", self.app_spec, *self._worker_args]
        if self.max_jobs_per_process is not None:
            cmd += ["--max-jobs", str(self.max_jobs_per_process)]
        if self.grace is not None:
            cmd += ["--grace", repr(self.grace)]
        if self.url:
            cmd.append("--url-from-env")  # never in argv: ps would show a password
        return cmd

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.url:
            env["TENURE_URL"] = self.url
        # The child imports the app the way the parent would: from the current directory.
        paths = [os.getcwd()] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        return env

    def _spawn(self, child: _Child) -> None:
        child.proc = subprocess.Popen(self._command(), env=self._env(), process_group=0)
        child.started = time.monotonic()
        child.restart_at = None
        self.started_pids.append(child.proc.pid)
        log.info("tenure supervisor: worker process %d started (pid %d)", child.slot + 1, child.proc.pid)

    def _reap(self, child: _Child, now: float) -> None:
        """A child exited: decide how (and whether) it comes back."""
        proc = child.proc
        assert proc is not None
        rc = proc.returncode
        child.proc = None
        child.history.append(rc)
        lived = now - child.started
        if self._stopping:
            log.info("tenure supervisor: worker process %d (pid %d) stopped (status %s)", child.slot + 1,
                     proc.pid, rc)
            return
        if rc == EX_CONFIG:
            log.error("tenure supervisor: worker process %d cannot load %s; stopping all", child.slot + 1,
                      self.app_spec)
            self._exit = EX_CONFIG
            self._begin_stop(signal.SIGTERM)
            return
        if rc == 0 and self.max_jobs_per_process is not None:
            log.info("tenure supervisor: worker process %d (pid %d) recycled after %d jobs", child.slot + 1,
                     proc.pid, self.max_jobs_per_process)
            child.failures = 0
            child.restart_at = now
            return
        how = f"killed by {_signal_name(-rc)}" if rc < 0 else f"exited with status {rc}"
        if rc == EX_UNHEALTHY:
            how += " (unhealthy: zombie slots)"
        if lived >= HEALTHY_AFTER:
            child.failures = 0
        child.failures += 1
        delay = 0.0 if child.failures == 1 else \
            min(RESTART_BACKOFF_MIN * 2 ** (child.failures - 2), RESTART_BACKOFF_MAX)
        log.warning("tenure supervisor: worker process %d (pid %d) %s after %.1f s; restarting%s",
                    child.slot + 1, proc.pid, how, lived, f" in {delay:.1f} s" if delay else "")
        child.restart_at = now + delay

    # -- signals ---------------------------------------------------------------------------------
    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._signals.append(signum)
        self._wakeup.set()

    def _begin_stop(self, signum: int) -> None:
        if not self._stopping:
            self._stopping = True
            log.info("tenure supervisor: %s, stopping %d worker process(es) gracefully (again to stop now)",
                     _signal_name(signum), sum(c.proc is not None for c in self._children))
        else:
            self._immediate = True
            log.warning("tenure supervisor: %s again, stopping worker processes now", _signal_name(signum))
        for child in self._children:
            child.restart_at = None
            if child.proc is not None and child.proc.poll() is None:
                try:
                    child.proc.send_signal(signum)
                except ProcessLookupError:
                    pass

    def stop(self) -> None:
        """Ask a running supervisor (from another thread) to stop gracefully, like a SIGTERM."""
        self._signals.append(signal.SIGTERM)
        self._wakeup.set()

    # -- the loop --------------------------------------------------------------------------------
    def run(self) -> int:
        previous = {}
        if self.install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, self._on_signal)
        try:
            log.info("tenure supervisor: %d worker process(es) over %s (concurrency %d each%s%s)",
                     self.processes, self.app_spec, self.concurrency,
                     "" if self.max_jobs_per_process is None else
                     f", recycled after {self.max_jobs_per_process} jobs",
                     "" if not self.queues else f", queues {','.join(self.queues)}")
            for child in self._children:
                self._spawn(child)
            while True:
                while self._signals:
                    self._begin_stop(self._signals.pop(0))
                if self._external.is_set() and not self._stopping:
                    self._begin_stop(signal.SIGTERM)  # stop_event set by the caller
                now = time.monotonic()
                for child in self._children:
                    if child.proc is not None and child.proc.poll() is not None:
                        self._reap(child, now)
                    if child.proc is None and child.restart_at is not None and now >= child.restart_at \
                            and not self._stopping:
                        self._spawn(child)
                if self._stopping and all(c.proc is None for c in self._children):
                    break
                self._wakeup.wait(TICK)
                self._wakeup.clear()
            if self._immediate:
                return EX_IMMEDIATE
            return self._exit
        finally:
            for child in self._children:  # only on an unexpected error: never leave children behind
                if child.proc is not None and child.proc.poll() is None:
                    child.proc.kill()
                    child.proc.wait()
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def run_supervisor(app_spec: str, config: WorkerConfig | None = None, *, processes: int,
                   max_jobs_per_process: int | None = None, url: str | None = None, **options: Any) -> int:
    """Run ``processes`` worker processes over the app at ``app_spec`` (``module:attribute``) and
    block until they are stopped; answers the exit status for the command line.

    Each child runs ``App.run_worker(config, max_jobs=max_jobs_per_process, grace=grace)`` on the
    store at ``url`` (None: the app's own URL, else ``$TENURE_URL``), where ``config`` is the
    :class:`tenure.WorkerConfig` with the worker keywords of ``options`` applied (``concurrency``,
    ``queues``, ``lease``, ``stop_grace``, ``zombie_share``, ...); a child that turns unhealthy
    exits with status 75 and is replaced. A child that dies is restarted (with a capped backoff
    while children keep dying young); one that settled ``max_jobs_per_process`` jobs is replaced
    by a fresh one. The first SIGTERM/SIGINT is forwarded to every child as a graceful stop; a
    second one stops them at once. Answers 0 after a graceful stop, 130 after a second signal, 78
    when the children cannot load the app. The other keywords of :class:`Supervisor`
    (``python``, ``install_signals``, ``stop_event``, ``grace``) are taken too."""
    return Supervisor(app_spec, config, processes=processes, max_jobs_per_process=max_jobs_per_process, url=url,
                      **options).run()


# -- the child ---------------------------------------------------------------------------------------


def _load_app(spec: str):
    module_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    app = getattr(module, attr)
    if not callable(getattr(app, "run_worker", None)):
        raise TypeError(f"{spec} is not a tenure.App (it has no run_worker)")
    # tenure worker --include MODULE: the parent put them in $TENURE_INCLUDE
    app.autodiscover(*(m.strip() for m in os.environ.get("TENURE_INCLUDE", "").split(",") if m.strip()))
    return app


def _watch_parent(parent: int, stop: threading.Event) -> None:
    while not stop.wait(PARENT_CHECK):
        if os.getppid() != parent:
            log.warning("tenure worker: the supervisor (pid %d) is gone; stopping gracefully", parent)
            stop.set()
            return


def _child_main(args: argparse.Namespace) -> int:
    try:
        app = _load_app(args.child)
    except Exception as exc:  # noqa: BLE001 - reported to the supervisor by the exit status
        log.error("tenure worker: cannot load %s: %s", args.child, exc)
        return EX_CONFIG
    if args.url_from_env:
        app._url = os.environ["TENURE_URL"]
    stop = threading.Event()
    threading.Thread(target=_watch_parent, args=(os.getppid(), stop), name="tenure-parent-watch",
                     daemon=True).start()
    config = _config_of(args)
    from .errors import WorkerUnhealthy

    try:
        app.run_worker(config, max_jobs=args.max_jobs, stop_event=stop,
                       **({} if args.grace is None else {"grace": args.grace}))
    except WorkerUnhealthy as exc:
        log.error("tenure worker: %s; exiting with status %d to be replaced", exc, EX_UNHEALTHY)
        return EX_UNHEALTHY
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m tenure.supervisor APP --processes N [...]`` (the supervisor) or ``--child APP``
    (one worker process; what the supervisor starts)."""
    p = argparse.ArgumentParser(prog="python -m tenure.supervisor")
    p.add_argument("app", nargs="?", help="module:attribute of the tenure.App")
    p.add_argument("--child", metavar="APP", help=argparse.SUPPRESS)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--max-jobs", "--max-jobs-per-process", dest="max_jobs", type=int, default=None)
    p.add_argument("--url", default=None)
    p.add_argument("--url-from-env", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--grace", default=None, help="seconds (or 30s, 1m) handlers get on a graceful stop")
    for name in text_options():  # the worker's options, from its one table
        if name != "max_jobs":
            unit, doc = option_doc(name)
            p.add_argument(f"--{name.replace('_', '-')}", dest=f"w_{name}", default=None,
                           help=f"{doc} ({unit})" if unit else doc)
    p.add_argument("--lease-ms", dest="lease_ms", type=int, default=None, help=argparse.SUPPRESS)  # deprecated
    args = p.parse_args(argv)
    logging.basicConfig(level=os.environ.get("TENURE_LOG_LEVEL", "INFO"), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(process)d %(name)s %(message)s")
    if os.environ.get("TENURE_LOG_FORMAT") == "json":  # set by tenure worker --log-format json
        from .worker_log import configure

        configure(os.environ.get("TENURE_LOG_LEVEL", "INFO"), "json")
    if args.child:
        return _child_main(args)
    if not args.app:
        p.error("APP (module:attribute) is required")
    return run_supervisor(args.app, _config_of(args), processes=args.processes, max_jobs_per_process=args.max_jobs,
                          url=args.url, grace=args.grace)


def _config_of(args: argparse.Namespace) -> WorkerConfig:
    """The worker configuration the command line names (its text form, one table)."""
    texts = {name: val for name in text_options()
             if (val := getattr(args, f"w_{name}", None)) is not None}
    config = WorkerConfig.from_text(texts)
    if args.lease_ms is not None:  # the deprecated --lease-ms of earlier releases
        config = WorkerConfig.build(config, {"lease_ms": args.lease_ms})
    return config


if __name__ == "__main__":
    sys.exit(main())
