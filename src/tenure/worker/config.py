"""One validated worker configuration: every option of a worker declared once.

:class:`WorkerConfig` is the table: each field carries its default, its unit, a one-line doc and
its check (the field's ``metadata``). ``Worker``, ``store.jobs.create_worker``, ``App.run_worker``,
the flow ``Runner``, the supervisor and ``tenure worker`` all take their settings through it, so an
option is spelled, defaulted and refused the same way everywhere:

- durations are seconds (int/float), a :class:`datetime.timedelta` or the text form ``250ms``,
  ``10s``, ``5m`` (:mod:`tenure.durations`);
- a bad value is refused at construction, before anything starts, with a coded error naming the
  option and the value (TN1002 a wrong type, TN1001 a bad value); an unknown option name is
  TN1001 with the nearest known name;
- the ``_ms`` names of earlier releases (``lease_ms``) are accepted for now with a
  :class:`DeprecationWarning` naming the replacement (:func:`tenure.durations.renamed_ms`).

The command line and the supervisor's child processes read the same table in its text form
(:meth:`WorkerConfig.from_text`, :meth:`WorkerConfig.to_text`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .. import _validate as v
from .. import durations
from ..errors import InvalidArgument, InvalidType
from ..jobs import DEFAULT_LEASE_MS
from ..worker_health import DEFAULT_ZOMBIE_SHARE, check_share

#: The most one claim takes (the default of ``claim_batch``). At 256 slots on PostgreSQL a
#: settle-and-claim then claims every slot its batch frees: with 100 it claimed 96 and left the
#: rest to a second claim by the dispatcher (a transaction more per cycle), and the worker spent
#: 15-25% more CPU per job, client and server (docs/performance.md, "PostgreSQL drain").
MAX_CLAIM_BATCH = 256
#: Deprecated ``_ms`` spellings of worker options: old name -> the option it now is (in seconds).
DEPRECATED_MS = {"lease_ms": "lease"}


def _count(maximum: int | None = None, *, optional: bool = False) -> Callable[[Any, str], Any]:
    def check(value: Any, what: str) -> int | None:
        return v.positive_int(value, what, maximum=maximum, allow_none=optional)
    return check


def _secs(*, positive: bool = False, optional: bool = False, minimum: float = 0.0) -> Callable[[Any, str], Any]:
    def check(value: Any, what: str) -> float | None:
        if value is None and optional:
            return None
        return durations.seconds(value, what, positive=positive, minimum=minimum)
    return check


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidType(f"{what} must be True or False, got {value!r}", option=what)
    return value


def _observer(value: Any, what: str) -> Any:
    if value is not None and not callable(value):
        raise InvalidType(f"{what} must be callable (or None), got {value!r}", option=what)
    return value


def _owner(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidType(f"{what} must be a non-empty string (it is diagnostics, never a guard), got {value!r}",
                          option=what)
    return v.text(value, what, max_chars=v.MAX_ID)


def _queues(value: Any, what: str) -> tuple[str, ...] | None:
    return None if value is None else tuple(v.names(value, what))


def _share(value: Any, what: str) -> float:
    return check_share(value)


def _text_number(kind: type) -> Callable[[str, str], Any]:
    def parse(text: str, what: str) -> Any:
        try:
            return kind(text.strip())
        except ValueError:
            raise InvalidArgument(f"{what}: {text!r} is not a{'n integer' if kind is int else ' number'}",
                                  option=what, value=text) from None
    return parse


def _text_list(text: str, what: str) -> tuple[str, ...]:
    return tuple(q.strip() for q in text.split(",") if q.strip())


def _text_str(text: str, what: str) -> str:
    return text


def _opt(default: Any, unit: str, doc: str, check: Callable[[Any, str], Any],
         text: Callable[[str, str], Any] | None = None) -> Any:
    """One row of the table: a dataclass field whose metadata says its unit, doc line, check and
    (for the options a command line can set) how its text form is read."""
    return field(default=default, metadata={"unit": unit, "doc": doc, "check": check, "text": text})


_SECONDS_TEXT = durations.parse


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """Every option of a worker, validated at construction (see the module docstring). Build one
    with keywords (``WorkerConfig(lease=10, concurrency=4)``) or :meth:`build`; every worker entry
    point also takes the same keywords directly."""

    concurrency: int = _opt(1, "slots", "attempts in flight at most (1-10000)", _count(10_000),
                            _text_number(int))
    queues: tuple[str, ...] | None = _opt(None, "names", "claim only from these queues (default: all but "
                                          "dead-letter queues)", _queues, _text_list)
    lease: float = _opt(DEFAULT_LEASE_MS / 1000, "seconds", "each claimed job's lease, renewed at a third of "
                        "it while the job runs (at least 1 ms)", _secs(positive=True, minimum=0.001),
                        _SECONDS_TEXT)
    poll_interval: float = _opt(0.5, "seconds", "an idle worker's claim cadence (enqueues wake it sooner)",
                                _secs(), _SECONDS_TEXT)
    renew: bool = _opt(True, "", "renew leases while handlers run", _flag)
    owner: str | None = _opt(None, "text", "diagnostics only, never a guard (default: the worker's instance id)",
                             _owner, _text_str)
    on_outcome: Callable[[dict[str, Any]], Any] | None = _opt(None, "", "called once per settled attempt",
                                                              _observer)
    backoff_base: float = _opt(1.0, "seconds", "first retry delay; doubles per attempt", _secs(), _SECONDS_TEXT)
    backoff_cap: float = _opt(60.0, "seconds", "longest retry delay", _secs(), _SECONDS_TEXT)
    stop_grace: float = _opt(5.0, "seconds", "what stop() waits for handlers by default", _secs(), _SECONDS_TEXT)
    timeout: float | None = _opt(None, "seconds", "default per-job timeout for jobs enqueued without one",
                                 _secs(positive=True, optional=True), _SECONDS_TEXT)
    claim_batch: int = _opt(MAX_CLAIM_BATCH, "jobs", "most jobs one claim asks for (1-10000)", _count(10_000),
                            _text_number(int))
    watch: bool = _opt(True, "", "wake on the engine's cross-process signal, not only the poll", _flag)
    maintenance: bool = _opt(True, "", "share the store's maintenance service (cron, sweeps, heartbeats)", _flag)
    max_jobs: int | None = _opt(None, "jobs", "stop claiming after this many jobs", _count(optional=True),
                                _text_number(int))
    zombie_share: float = _opt(DEFAULT_ZOMBIE_SHARE, "share", "unhealthy once zombie handlers hold this share "
                               "of the slots, in (0, 1]", _share, _text_number(float))
    zombie_grace: float | None = _opt(None, "seconds", "a handler still running this long after it was asked "
                                      "to stop is a zombie (default: stop_grace)", _secs(optional=True),
                                      _SECONDS_TEXT)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = f.metadata["check"](getattr(self, f.name), f.name)
            object.__setattr__(self, f.name, value)

    # -- building ----------------------------------------------------------------------------------
    @classmethod
    def build(cls, config: WorkerConfig | None = None, options: Mapping[str, Any] | None = None) -> WorkerConfig:
        """``config`` (default: every default) with ``options`` applied, validated. Deprecated
        ``_ms`` names warn and are converted; an unknown name is :class:`InvalidArgument` naming
        the nearest known option."""
        if config is not None and not isinstance(config, WorkerConfig):
            raise InvalidType(f"config must be a tenure.WorkerConfig, got {type(config).__name__}")
        changes = durations.renamed_ms(dict(options or {}), DEPRECATED_MS, "worker")
        v.known_options(changes, NAMES, "worker")
        if config is None:
            return cls(**changes)
        return dataclasses.replace(config, **changes) if changes else config

    @classmethod
    def from_text(cls, texts: Mapping[str, str], config: WorkerConfig | None = None) -> WorkerConfig:
        """A configuration from the text form of some options (``{"lease": "10s", "concurrency":
        "4"}``): what ``tenure worker`` and the supervisor's children read. Options without a text
        form (``on_outcome``, the switches) are refused."""
        v.known_options(texts, NAMES, "worker")
        parsed = {}
        for name, text in texts.items():
            reader = _FIELDS[name].metadata["text"]
            if reader is None:
                raise InvalidArgument(f"the worker option {name} has no text form", option=name)
            parsed[name] = reader(text, name)
        return cls.build(config, parsed)

    def to_text(self) -> dict[str, str]:
        """The options that differ from their defaults, in the text form :meth:`from_text` reads
        back to an equal configuration. An option without a text form that is set (an
        ``on_outcome`` observer, a switch turned off) cannot cross to another process:
        :class:`InvalidArgument` names it."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            if f.metadata["text"] is None:
                raise InvalidArgument(f"the worker option {f.name}={value!r} cannot be passed to another process",
                                      option=f.name)
            out[f.name] = ",".join(value) if isinstance(value, tuple) else _number_text(value) if isinstance(
                value, float) else str(value)
        return out

    def options(self) -> dict[str, Any]:
        """The options as a plain dict (field name -> value)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # -- derived -------------------------------------------------------------------------------------
    @property
    def lease_ms(self) -> int:
        """The lease in whole milliseconds: the job format's ``lease_ms`` (docs/spec.md, 3.3)."""
        return durations.to_ms(self.lease)


def _number_text(value: float) -> str:
    """A float as text the duration parser reads back exactly where it can (``repr``), never in
    exponent notation (``1e-05`` is not a duration)."""
    text = repr(value)
    return text if "e" not in text else f"{value:.9f}".rstrip("0").rstrip(".")


_FIELDS = {f.name: f for f in fields(WorkerConfig)}
#: Every worker option's name, in declaration order.
NAMES: tuple[str, ...] = tuple(_FIELDS)


def option_doc(name: str) -> tuple[str, str]:
    """``(unit, doc line)`` of one worker option (for help texts and generated docs)."""
    md = _FIELDS[name].metadata
    return md["unit"], md["doc"]


def text_options() -> tuple[str, ...]:
    """The options a command line can set (those with a text form)."""
    return tuple(n for n, f in _FIELDS.items() if f.metadata["text"] is not None)

