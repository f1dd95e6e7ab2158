"""One validated worker configuration (``tenure.WorkerConfig``) and one time unit.

Every entry point that makes a worker (``store.jobs.create_worker``, ``App.create_worker``,
``App.run_worker``, the flow ``Runner``, the supervisor, ``tenure worker``) takes its settings
through the one table: the same spelling of a duration gives the same configuration, the same bad
value the same coded error at the call with nothing started, and the deprecated ``_ms`` names
still work with a warning that names their replacement.
"""

from __future__ import annotations

import datetime as dt
import inspect
import math
import threading
import warnings

import pytest

import tenure
from tenure import WorkerConfig, durations
from tenure.errors import TenureError
from tenure.flow import Flow, Runner
from tenure.maintenance import DEPRECATED_MS as MAINTENANCE_DEPRECATED
from tenure.maintenance import Maintainer, MaintenanceConfig
from tenure.supervisor import Supervisor, run_supervisor
from tenure.worker import Worker
from tenure.worker.config import DEPRECATED_MS, NAMES, text_options

#: The same settings, each spelled every way a caller may: seconds, a timedelta, the text form.
SPELLINGS = [
    {"lease": 12.5, "stop_grace": 2, "poll_interval": 0.25, "timeout": 90, "backoff_cap": 120},
    {"lease": dt.timedelta(seconds=12.5), "stop_grace": dt.timedelta(seconds=2),
     "poll_interval": dt.timedelta(milliseconds=250), "timeout": dt.timedelta(minutes=1.5),
     "backoff_cap": dt.timedelta(minutes=2)},
    {"lease": "12500ms", "stop_grace": "2s", "poll_interval": "250ms", "timeout": "90", "backoff_cap": "2m"},
]
EXPECTED = WorkerConfig(lease=12.5, stop_grace=2.0, poll_interval=0.25, timeout=90.0, backoff_cap=120.0)

#: (options, code, text the message must hold): refused at every surface, the option named.
BAD = [
    ({"lease": -1}, "TN1001", "lease"),
    ({"lease": 0}, "TN1001", "lease"),
    ({"lease": "0s"}, "TN1001", "lease"),
    ({"lease": math.nan}, "TN1001", "lease"),
    ({"lease": True}, "TN1002", "lease"),
    ({"lease": "soon"}, "TN1001", "'soon'"),
    ({"lease": "-5s"}, "TN1001", "lease"),
    ({"stop_grace": math.inf}, "TN1001", "stop_grace"),
    ({"poll_interval": [1]}, "TN1002", "poll_interval"),
    ({"timeout": 0}, "TN1001", "timeout"),
    ({"concurrency": 0}, "TN1001", "concurrency"),
    ({"concurrency": 2.0}, "TN1002", "concurrency"),
    ({"leese": 5}, "TN1001", "did you mean 'lease'"),
    ({"lease": 5, "lease_ms": 5000}, "TN1001", "not both"),
    ({"lease_ms": "5000"}, "TN1002", "lease_ms"),
]


def _handler(payload, ctx):
    return None


def _flow() -> tuple[Flow, None]:
    flow = Flow("cfg-flow")

    @flow.task(version=1)
    def one(ctx):
        return 1

    return flow, None


def _app(store) -> tenure.App:
    app = tenure.App(store=store)

    @app.task(name="cfg.k")
    def k():
        return None

    return app


def _run_once(app: tenure.App, **options) -> WorkerConfig:
    """``app.run_worker(**options)`` that stops at once; answers the config its worker ran with."""
    seen: list[WorkerConfig] = []
    app.on_worker_start(lambda w: seen.append(w.config))
    stop = threading.Event()
    stop.set()
    app.run_worker(install_signals=False, stop_event=stop, grace=0, maintenance=False, **options)
    return seen[0]


# -- every surface reads every spelling the same --------------------------------------------------------


@pytest.mark.parametrize("spelling", range(len(SPELLINGS)), ids=["seconds", "timedelta", "text"])
def test_every_surface_reads_seconds_timedeltas_and_text_alike(any_store, spelling):
    options = SPELLINGS[spelling]
    want = EXPECTED
    assert WorkerConfig(**options) == want
    assert WorkerConfig.build(None, options) == want
    worker = any_store.jobs.create_worker({"k": _handler}, **options)
    assert worker.config == want and worker.lease_ms == 12_500 and worker.default_timeout_ms == 90_000
    assert any_store.jobs.create_worker({"k": _handler}, WorkerConfig(**options)).config == want
    flow, reg = _flow()
    assert Runner(any_store, [flow], registry=reg, **options).create_worker().config == want
    assert Runner(any_store, [flow], registry=reg, config=WorkerConfig(**options)).config == want
    app = _app(any_store)
    assert app.create_worker(**options).config == want
    assert _run_once(app, **options) == replace_maintenance(want)
    assert Supervisor("m:app", processes=1, install_signals=False, **options).config == want
    texts = {k: v if isinstance(v, str) else str(durations.seconds(v, k)) for k, v in options.items()}
    assert WorkerConfig.from_text(texts) == want  # what tenure worker's flags and each supervised child read


def replace_maintenance(cfg: WorkerConfig) -> WorkerConfig:
    import dataclasses

    return dataclasses.replace(cfg, maintenance=False)


def test_the_text_form_round_trips_every_option_that_has_one():
    cfg = WorkerConfig(concurrency=7, queues=["a", "b"], lease="1m", poll_interval=0.05, owner="o-1",
                       backoff_base="250ms", backoff_cap="1h", stop_grace=3, timeout="2d", claim_batch=5,
                       max_jobs=9, zombie_share=0.75, zombie_grace=0.5)
    text = cfg.to_text()
    assert set(text) <= set(text_options())
    assert WorkerConfig.from_text(text) == cfg
    assert WorkerConfig().to_text() == {}
    tiny = WorkerConfig(poll_interval=0.00001, backoff_cap=3e8)  # never in exponent notation
    assert WorkerConfig.from_text(tiny.to_text()) == tiny
    with pytest.raises(TenureError) as ei:
        WorkerConfig(on_outcome=print).to_text()
    assert ei.value.code == "TN1001" and "on_outcome" in str(ei.value)


# -- bad values: the same coded error at every surface, nothing started -------------------------------------


@pytest.mark.parametrize("options,code,named", BAD, ids=[f"{i}-{list(o)[0]}" for i, (o, _, _) in enumerate(BAD)])
def test_a_bad_option_is_refused_alike_everywhere_before_anything_starts(any_store, options, code, named):
    flow, reg = _flow()
    app = _app(any_store)
    started: list = []
    app.on_worker_start(started.append)
    calls = {
        "WorkerConfig.build": lambda: WorkerConfig.build(None, options),
        "create_worker": lambda: any_store.jobs.create_worker({"k": _handler}, **options),
        "Worker": lambda: Worker(any_store, {"k": _handler}, **options),
        "Runner": lambda: Runner(any_store, [flow], registry=reg, **options),
        "App.create_worker": lambda: app.create_worker(**options),
        "App.run_worker": lambda: app.run_worker(install_signals=False, **options),
        "Supervisor": lambda: Supervisor("m:app", processes=1, install_signals=False, **options),
        "run_supervisor": lambda: run_supervisor("m:app", processes=1, **options),
    }
    for surface, call in calls.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with pytest.raises(TenureError) as ei:
                call()
        assert ei.value.code == code and named in str(ei.value), (surface, ei.value)
    assert started == [] and any_store._workers == []
    assert any_store.maintenance.workers() == []


@pytest.mark.parametrize("text,code", [("soon", "TN1001"), ("-1s", "TN1001"), ("1 fortnight", "TN1001"),
                                       ("", "TN1001"), ("nan", "TN1001")])
def test_unparsable_text_is_refused_by_the_one_parser(text, code):
    with pytest.raises(TenureError) as ei:
        durations.parse(text, "--lease")
    assert ei.value.code == code and "--lease" in str(ei.value) and repr(text) in str(ei.value)
    with pytest.raises(TenureError) as ei:
        WorkerConfig.from_text({"lease": text})
    assert ei.value.code == code


@pytest.mark.parametrize("text,seconds", [("250ms", 0.25), ("10s", 10.0), ("5m", 300.0), ("1h", 3600.0),
                                          ("1d", 86_400.0), ("2w", 1_209_600.0), ("7", 7.0), ("1.5", 1.5),
                                          (" 30s ", 30.0)])
def test_the_text_form(text, seconds):
    assert durations.parse(text, "x") == seconds


# -- deprecated names -------------------------------------------------------------------------------------


def test_a_deprecated_ms_name_warns_naming_its_replacement_and_still_works(any_store):
    flow, reg = _flow()
    app = _app(any_store)
    makers = {
        "create_worker": lambda: any_store.jobs.create_worker({"k": _handler}, lease_ms=4_500).config,
        "Runner": lambda: Runner(any_store, [flow], registry=reg, lease_ms=4_500).config,
        "App.create_worker": lambda: app.create_worker(lease_ms=4_500).config,
        "App.run_worker": lambda: _run_once(app, lease_ms=4_500),
        "Supervisor": lambda: Supervisor("m:app", processes=1, install_signals=False, lease_ms=4_500).config,
    }
    for surface, make in makers.items():
        with pytest.warns(DeprecationWarning, match=r"lease_ms= is deprecated: use lease=") as record:
            cfg = make()
        assert cfg.lease == 4.5 and cfg.lease_ms == 4_500, surface
        # The warning points at the caller's line, not inside tenure.
        assert record[0].filename == __file__, (surface, record[0].filename)


def test_every_ms_keyword_of_a_public_signature_is_a_listed_deprecated_alias():
    """Walks the public entry points that configure a worker or the maintenance service (their
    signatures and the fields of their configuration objects): a keyword ending in ``_ms`` that
    is not listed as a deprecated alias fails here."""
    from tenure.app import App
    from tenure.jobs import Jobs

    allowed = set(DEPRECATED_MS) | set(MAINTENANCE_DEPRECATED)
    surfaces = [Worker.__init__, Jobs.create_worker, App.create_worker, App.run_worker, Runner.__init__,
                Runner.create_worker, Supervisor.__init__, run_supervisor, Maintainer.configure]
    names = {f"{fn.__qualname__}({p})" for fn in surfaces for p in inspect.signature(fn).parameters}
    names |= {f"WorkerConfig.{n}" for n in NAMES}
    names |= {f"MaintenanceConfig.{f}" for f in MaintenanceConfig.__dataclass_fields__}
    offending = sorted(n for n in names if n.rstrip(")").endswith("_ms") and n.rstrip(")").split("(")[-1]
                       .split(".")[-1] not in allowed)
    assert offending == []
    for old, new in {**DEPRECATED_MS, **MAINTENANCE_DEPRECATED}.items():
        assert old.endswith("_ms") and new == old[:-3]

