"""Every enqueue option, once: its name, type, verdict, stored column, the surfaces that accept
it, the spec row it implements and one line of documentation (docs/enqueue-options.md is made
from this table by ``scripts/gen_options_doc.py``; a test keeps the two equal).

A surface is one place a caller can give options; each derives what it accepts from
:data:`OPTIONS` through :func:`names` and refuses the rest through :func:`refuse`:

- ``enqueue``: the keywords of ``store.jobs.enqueue`` / ``tx.jobs.enqueue``;
- ``enqueue_many``: the keys of an ``enqueue_many`` item;
- ``task``: ``@app.task(...)`` defaults and ``task.with_options(...)``;
- ``signature``: ``task.s(...).set(...)`` (a composition sets the rest);
- ``queue``: ``store.queues.create/update`` (a queue's default for its jobs, or its own setting);
- ``publish``: ``store.queues.publish(event, payload, ...)`` (one job per subscribed queue);
- ``schedule``: ``store.schedules.add(options=...)`` and ``@app.periodic(...)``;
- ``django``: what ``TenureBackend`` reads from a Django task (:attr:`Option.django`);
- ``cli``: the flags of ``tenure enqueue`` (:attr:`Option.cli`);
- ``from_file``: the keys of a ``tenure enqueue --from-file`` line.

Durations are seconds (or timedeltas) on every surface and milliseconds in the stored column.
This module is semantics: it imports values and verdicts, never the store or the worker.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from . import _validate as v
from . import dependencies, durations
from .errors import InvalidArgument, InvalidType, TenureError
from .queue_settings import _fairness, _flag, _limit, _policy, _rate, _weights

ENQUEUE = "enqueue"
MANY = "enqueue_many"
TASK = "task"
SIGNATURE = "signature"
QUEUE = "queue"
PUBLISH = "publish"
SCHEDULE = "schedule"
DJANGO = "django"
CLI = "cli"
FILE = "from_file"
#: Every surface, in the order the docs table shows them.
SURFACES: tuple[str, ...] = (ENQUEUE, MANY, TASK, SIGNATURE, QUEUE, PUBLISH, SCHEDULE, DJANGO, CLI, FILE)
#: How a refusal names each surface.
SURFACE_NAMES: dict[str, str] = {
    ENQUEUE: "jobs.enqueue", MANY: "an enqueue_many item", TASK: "@app.task", SIGNATURE: "signature.set",
    QUEUE: "queues.create", PUBLISH: "queues.publish", SCHEDULE: "a schedule's options", DJANGO: "the Django backend",
    CLI: "tenure enqueue", FILE: "a --from-file line",
}


@dataclass(frozen=True, slots=True)
class Cli:
    """A ``tenure enqueue`` flag: its name and the form of its value (``text``, ``int``,
    ``int>=1``, ``duration`` like ``30s``/``5m``, ``json``, ``text*`` for a repeatable flag)."""

    flag: str
    form: str


@dataclass(frozen=True, slots=True)
class Option:
    """One enqueue option. ``check`` answers the value to store (raising TN1001/TN1002 naming
    the option); None for what the surface itself reads (``kind``, ``payload``, ``conn``).
    ``column`` is the field of the job record (``NewJob``) or queue row it fills."""

    name: str
    type: str
    check: Callable[[Any], Any] | None
    column: str | None
    surfaces: frozenset[str]
    spec: str
    doc: str
    cli: Cli | None = None
    #: The attribute of a Django task ``TenureBackend`` reads it from.
    django: str | None = None
    #: Why a surface does not take it, said in that surface's refusal.
    why_not: Mapping[str, str] = field(default_factory=dict)
    #: False when a job given it may collide with a stored one (an id, a uniqueness key) or must
    #: be written with its dependency edges: ``enqueue_many`` never streams such a job.
    streams: bool = True


# -- the verdicts the table names ------------------------------------------------------------------

#: Kind and queue names already found valid, so a bulk enqueue checks each name once.
VALID_NAMES: set[str] = set()
_VALID_NAMES_MAX = 10_000


def checked_name(value: Any, what: str) -> str:
    """``v.name`` of a kind or queue name, costing no call for a name already found valid."""
    if type(value) is str and value in VALID_NAMES:
        return value
    v.name(value, what)
    if len(VALID_NAMES) >= _VALID_NAMES_MAX:
        VALID_NAMES.clear()
    VALID_NAMES.add(value)
    return value


def _priority(x: Any) -> int:
    if type(x) is not int or not v.INT4_MIN <= x <= v.INT4_MAX:
        v.int4(x, "priority")
    return x


def _duration(what: str, *, positive: bool = False) -> Callable[[Any], int | None]:
    """A duration (seconds, a timedelta or text like ``"10s"``, :func:`tenure.durations.ms`) -> ms;
    ``positive``: 0 is refused rather than read as none."""
    return lambda x: durations.ms(x, what, positive=positive)


def _parents(x: Any) -> tuple[str, ...]:
    return dependencies.checked(x, None)[0]


def _parent_policy(x: Any) -> str:
    return dependencies.checked(None, x)[1]


_JOB = frozenset({ENQUEUE, MANY, TASK, SIGNATURE, PUBLISH, SCHEDULE, FILE})  # every surface that makes jobs
_ALL_JOB = _JOB | {QUEUE}  # ... and a queue's default for its jobs
_NOT_ON_A_SCHEDULE = {SCHEDULE: "each fire runs at its boundary"}
_QUEUE_SETTING = "a queue setting, not a job option: store.queues.create(queue, {}=...)"


def _queue_only(name: str) -> dict[str, str]:
    why = _QUEUE_SETTING.format(name)
    return {s: why for s in (ENQUEUE, MANY, SIGNATURE, PUBLISH, SCHEDULE, FILE)}


_OPTIONS: tuple[Option, ...] = (
    # -- what every job has --------------------------------------------------------------------
    Option("kind", "name", None, "kind", frozenset({MANY, CLI, FILE}), "spec 2.2",
           "what handler runs the job (enqueue's first argument, KIND on the command line)",
           why_not={PUBLISH: "the event is the kind", SCHEDULE: "pass kind to add()", TASK: "the task's name is"
                    " its kind: @app.task(name=...)"}),
    Option("payload", "JSON", None, "payload", frozenset({MANY, CLI, FILE}), "spec 2.4",
           "the job's input, any JSON value (enqueue's second argument)", cli=Cli("--payload", "json"),
           why_not={SCHEDULE: "pass payload= to add()"}),
    Option("id", "job id", lambda x: None if x is None else v.job_id(x), "id", frozenset({ENQUEUE, MANY, TASK, FILE, CLI}), "spec 2.3",
           "the caller's id: enqueueing an existing id changes nothing and answers it",
           cli=Cli("--id", "text"),
           why_not={SCHEDULE: "each fire's id is cron:<name>:<fire ms>",
                    SIGNATURE: "a signature's id is set by its composition",
                    PUBLISH: "publish makes one job per subscribed queue, each with its own id"}, streams=False),
    Option("queue", "name", lambda x: checked_name(x, "queue"), "queue",
           frozenset({ENQUEUE, MANY, TASK, SIGNATURE, DJANGO, CLI, FILE}), "spec §11",
           "the queue the job waits in (default: 'default')", cli=Cli("--queue", "text"), django="queue_name",
           why_not={SCHEDULE: "pass queue= to add()", PUBLISH: "publish makes one job per subscribed queue"}),
    Option("priority", "int", _priority, "priority", _JOB | {DJANGO, CLI}, "spec 8.2",
           "higher runs first among eligible jobs (default 0; a 32-bit integer)", cli=Cli("--priority", "int"),
           django="priority"),
    Option("run_at", "epoch ms or datetime", lambda x: None if x is None else v.epoch_ms(x, "run_at"),
           "run_at", frozenset({ENQUEUE, MANY, TASK, SIGNATURE, PUBLISH, DJANGO, FILE}), "spec 2.6",
           "when the job becomes eligible (not with delay)", django="run_after", why_not=_NOT_ON_A_SCHEDULE),
    Option("delay", "seconds", _duration("delay"), "delay_ms",
           frozenset({ENQUEUE, MANY, TASK, SIGNATURE, PUBLISH, CLI, FILE}), "spec 2.6",
           "eligible this long after the enqueue (not with run_at)", cli=Cli("--delay", "duration"),
           why_not=_NOT_ON_A_SCHEDULE),
    Option("max_attempts", "int >= 1",
           lambda x: v.positive_int(x, "max_attempts", maximum=v.MAX_ATTEMPTS_LIMIT, allow_none=True),
           "max_attempts", _ALL_JOB | {DJANGO, CLI}, "spec 2.8",
           "attempts before the job is dead (queue default, else 5)", cli=Cli("--max-attempts", "int>=1"),
           django="max_attempts"),
    Option("timeout", "seconds", _duration("timeout", positive=True), "timeout_ms", _ALL_JOB, "spec §11",
           "longest one attempt may run (queue default, else none)"),
    Option("tags", "list of text", lambda x: None if x is None else v.tags(x), "tags", _JOB | {CLI}, "spec §11",
           "short strings to filter jobs by (page(tag=...))", cli=Cli("--tag", "text*")),
    Option("meta", "JSON object", lambda x: None if x is None else v.meta(x), "meta", _JOB | {CLI}, "spec §11",
           "a JSON object of at most 4 KiB stored with the job", cli=Cli("--meta", "json")),
    Option("conn", "driver connection", None, None, frozenset({ENQUEUE, TASK, PUBLISH}), "spec 3.19",
           "write in the caller's own open transaction (the outbox)",
           why_not={SCHEDULE: "fires are written by tenure", SIGNATURE: "enqueue(conn=...) the composition"}),
    # -- uniqueness and groups (docs/queues.md) --------------------------------------------------
    Option("singleton_key", "key", lambda x: None if x is None else v.key(x, "singleton_key"), "singleton_key",
           _JOB, "spec §11", "the key of the queue's uniqueness policy and of throttling", streams=False),
    Option("singleton_for", "seconds", _duration("singleton_for", positive=True), "singleton_on", _JOB,
           "spec §11", "at most one job per key in each bucket of this many seconds (throttling)", streams=False),
    Option("singleton_next_slot", "bool", lambda x: _flag(x, "singleton_next_slot"), "singleton_next_slot", _JOB,
           "spec §11", "a throttled job goes to the next singleton_for bucket instead"),
    Option("debounce", "seconds", _duration("debounce", positive=True), "debounce_ms", _JOB - {SCHEDULE},
           "spec §11", "a later enqueue of the same key while pending replaces the payload and pushes run_at",
           why_not={SCHEDULE: "each fire runs at its boundary, and debounce sets the run time itself"}, streams=False),
    Option("group_key", "key", lambda x: None if x is None else v.key(x, "group_key"), "group_key", _JOB,
           "spec §11", "the group of group limits, group rates and fairness"),
    # -- retries, retention, dead letters (job option or queue default) --------------------------
    Option("retry_delay", "seconds", _duration("retry_delay"), "retry_delay_ms", _ALL_JOB, "spec 4.2",
           "delay before a retry (queue default, else the worker's backoff)"),
    Option("retry_backoff", "bool", lambda x: _flag(x, "retry_backoff"), "retry_backoff", _ALL_JOB, "spec 4.2",
           "double retry_delay at each attempt"),
    Option("retry_delay_max", "seconds", _duration("retry_delay_max", positive=True), "retry_delay_max_ms",
           _ALL_JOB, "spec 4.2", "cap on the retry delay"),
    Option("retention", "seconds", _duration("retention", positive=True), "retention_ms", _ALL_JOB, "spec §11",
           "a job still queued this long after its run time expires"),
    Option("delete_after", "seconds", _duration("delete_after"), "delete_after_ms", _ALL_JOB, "spec §11",
           "how long a settled job is kept (queue default, else maintenance's)"),
    Option("dead_letter", "name", lambda x: None if x is None else v.name(x, "dead_letter"), "dead_letter",
           _ALL_JOB, "spec 4.3", "the queue a dead job is copied to"),
    # -- dependencies (docs/composition.md) ------------------------------------------------------
    Option("depends_on", "list of job ids", _parents, "depends_on", frozenset({ENQUEUE, MANY, TASK}), "spec §11",
           "run only after these jobs are done",
           why_not={SIGNATURE: "a signature's parents are set by its composition",
                    SCHEDULE: "a schedule's fires have no parents",
                    PUBLISH: "publish writes no dependency edges: enqueue the dependents instead"}, streams=False),
    Option("on_parent_failure", "cancel, run or wait", _parent_policy, "on_parent_failure",
           frozenset({ENQUEUE, MANY, TASK, SIGNATURE}), "spec §11",
           "what a dependent does when a parent ends dead or cancelled (default cancel)", streams=False),
    # -- settings of the queue itself (docs/queues.md) -------------------------------------------
    Option("policy", "name", lambda x: _policy("standard" if x is None else x), "policy", frozenset({QUEUE}),
           "spec §11", "the uniqueness policy: standard, short, singleton, stately, exclusive, strict_fifo",
           why_not=_queue_only("policy")),
    Option("concurrency_limit", "int >= 1", lambda x: _limit(x, "concurrency_limit"), "concurrency_limit",
           frozenset({QUEUE}), "spec §11", "most jobs of the queue leased at once, across hosts",
           why_not=_queue_only("concurrency_limit")),
    Option("group_limit", "int >= 1", lambda x: _limit(x, "group_limit"), "group_limit", frozenset({QUEUE}),
           "spec §11", "most jobs of one group_key leased at once", why_not=_queue_only("group_limit")),
    Option("rate_limit", "rate", lambda x: _rate(x, "rate_limit"), "rate_limit,rate_period_ms",
           frozenset({QUEUE, TASK}), "spec §11", "starts per period for the queue (\"50/s\", \"6000/min\")",
           why_not=_queue_only("rate_limit")),
    Option("group_rate_limit", "rate", lambda x: _rate(x, "group_rate_limit"),
           "group_rate_limit,group_rate_period_ms", frozenset({QUEUE, TASK}), "spec §11",
           "starts per period for each group_key", why_not=_queue_only("group_rate_limit")),
    Option("fairness", "round_robin", _fairness, "fairness", frozenset({QUEUE}), "spec §11",
           "serve the group keys in turn", why_not=_queue_only("fairness")),
    Option("group_weights", "{group_key: int}", _weights, "group_weights", frozenset({QUEUE}), "spec §11",
           "round-robin weights by group key", why_not=_queue_only("group_weights")),
)

#: Every option by name.
OPTIONS: dict[str, Option] = {o.name: o for o in _OPTIONS}
_BY_SURFACE: dict[str, dict[str, Option]] = {s: {o.name: o for o in _OPTIONS if s in o.surfaces} for s in SURFACES}


def names(surface: str) -> frozenset[str]:
    """The options ``surface`` accepts."""
    return frozenset(_BY_SURFACE[surface])


def on(surface: str) -> dict[str, Option]:
    """The options ``surface`` accepts, by name, in the table's order."""
    return _BY_SURFACE[surface]


#: What Celery, RQ and Oban call an option, and tenure's name for it: tenure's own spelling is
#: suggested for these rather than the nearest spelling ("countdown" is not a misspelt "conn").
PEER_NAMES: dict[str, str] = {
    "countdown": "delay", "eta": "run_at", "scheduled_at": "run_at", "schedule_in": "delay",
    "enqueue_in": "delay", "enqueue_at": "run_at", "retries": "max_attempts", "max_retries": "max_attempts",
    "time_limit": "timeout", "soft_time_limit": "timeout", "job_timeout": "timeout",
    "routing_key": "queue", "job_id": "id", "task_id": "id", "unique_key": "singleton_key",
    "default_retry_delay": "retry_delay", "retry_backoff_max": "retry_delay_max", "result_ttl": "retention",
}

_COUNTS_THE_FIRST = " max_attempts counts the first run too: max_retries=3 is max_attempts=4"
_PEER_NOTES = {"max_retries": _COUNTS_THE_FIRST, "retries": _COUNTS_THE_FIRST}


def refusal(name: Any, surface: str) -> TenureError:
    """The coded error for ``name`` given where ``surface`` does not take it: TN1001 naming the
    option with the nearest accepted name ("did you mean 'singleton_key'?") or, for an option of
    another surface, where it belongs."""
    where = SURFACE_NAMES[surface]
    if not isinstance(name, str):
        return InvalidType(f"{where} takes option names as strings, got {type(name).__name__}", option=name)
    known = OPTIONS.get(name)
    if known is not None:
        why = known.why_not.get(surface) or "it is accepted by " + ", ".join(
            SURFACE_NAMES[s] for s in SURFACES if s in known.surfaces)
        return InvalidArgument(f"{where} does not take {name!r}: {why}", option=name, surface=surface)
    peer = PEER_NAMES.get(name)
    near = ([peer] if peer in _BY_SURFACE[surface]
            else difflib.get_close_matches(name, list(_BY_SURFACE[surface]), n=1, cutoff=0.6))
    hint = f" (did you mean {near[0]!r}?{_PEER_NOTES.get(name, '')})" if near else ""
    return InvalidArgument(f"unknown option {name!r} for {where}{hint}", option=name, surface=surface)


def refuse(given: Iterable[Any], surface: str) -> None:
    """Raise :func:`refusal` for the first of ``given`` that ``surface`` does not take (sorted,
    so the answer does not depend on the order the caller gave them in)."""
    accepted = _BY_SURFACE[surface]
    bad = [n for n in given if n not in accepted]
    if bad:
        raise refusal(sorted(bad, key=str)[0], surface)


def checked(options: Mapping[str, Any], surface: str) -> dict[str, Any]:
    """``{column: stored value}`` for the options given (``kind``, ``payload`` and ``conn`` left
    to the caller); the first one ``surface`` does not take, or whose value is refused, raises.
    Nothing is written: a verdict, not an action."""
    accepted = _BY_SURFACE[surface]
    out: dict[str, Any] = {}
    for name, value in options.items():
        opt = accepted.get(name)
        if opt is None:
            raise refusal(name, surface)
        if opt.check is not None:
            out[opt.column] = opt.check(value)  # type: ignore[index]
    return out


def queue_columns(options: Mapping[str, Any]) -> dict[str, Any]:
    """A queue's settings as ``{column: value}``; a rate fills two columns (N, period_ms)."""
    out: dict[str, Any] = {}
    for column, value in checked(options, QUEUE).items():
        if "," in column:
            out.update(zip(column.split(","), value, strict=True))
        else:
            out[column] = value
    return out


class EnqueueOptions(TypedDict, total=False):
    """The keywords of ``jobs.enqueue`` besides ``kind``, ``payload`` and ``conn`` (the table's
    ``enqueue`` surface; a test keeps the two equal). Durations are seconds or timedeltas."""

    id: str | None
    run_at: Any
    delay: Any
    max_attempts: int | None
    queue: str
    priority: int
    timeout: Any
    tags: Sequence[str] | None
    meta: dict[str, Any] | None
    singleton_key: str | None
    singleton_for: Any
    singleton_next_slot: bool | None
    debounce: Any
    group_key: str | None
    retry_delay: Any
    retry_backoff: bool | None
    retry_delay_max: Any
    retention: Any
    delete_after: Any
    dead_letter: str | None
    depends_on: Sequence[str] | None
    on_parent_failure: str | None


class QueueOptions(TypedDict, total=False):
    """The keywords of ``store.queues.create/update`` besides the name (the table's ``queue``
    surface; a test keeps the two equal). ``None`` clears a setting back to the built-in."""

    policy: str | None
    max_attempts: int | None
    retry_delay: Any
    retry_backoff: bool | None
    retry_delay_max: Any
    timeout: Any
    retention: Any
    delete_after: Any
    dead_letter: str | None
    concurrency_limit: int | None
    group_limit: int | None
    rate_limit: str | None
    group_rate_limit: str | None
    fairness: str | None
    group_weights: dict[str, int] | None
