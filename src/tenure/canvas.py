"""The canvas: signatures, chains, groups and chords over the task API (docs/composition.md).

```python
flow = tenure.chain(fetch.s(url), parse.s(), store.s(table="pages"))
flow.enqueue().result(timeout=60)          # store's result

tenure.group([resize.s(p) for p in photos]).enqueue().result()     # [each result, in order]
tenure.chord(tenure.group([count.s(f) for f in files]), total.s()).enqueue().result()
```

Every step is its own job, with its own lease and fence, run by any worker; the composition is
written by ONE ``enqueue_many`` (one transaction, :mod:`tenure.dependencies`), so it appears whole
or not at all. How a result travels: a dependent step's stored payload says which parents it
receives (``{"args": [...], "kwargs": {...}, "parents": "result" | "results"}``); when it runs,
its handler reads them from the store (they are settled and their results stored) and passes
them as the FIRST positional argument, before the signature's own arguments:

- ``"result"``: the one parent's result (a chain step after a single step);
- ``"results"``: a :class:`Results` list of every parent's result in ``depends_on`` order (a chord
  callback, or a chain step after a group), ``None`` for a parent that did not complete, with
  ``.failures`` describing those.

Nothing rewrites a dependent's payload when its parents finish: the payload stays as enqueued.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from . import enqueue_options as eo
from .engine.rows import PARENT_FAILURE_POLICIES
from .errors import InvalidArgument, InvalidType, JobCancelled, JobDead, ResultTimeout
from .handle import Handle
from .ids import new_job_id
from .records import Dependency, Job

if TYPE_CHECKING:
    from .app import Task
    from .store import Store

#: The payload key that marks a step receiving its parents' results.
PARENTS_KEY = "parents"
RECEIVE_ONE, RECEIVE_ALL = "result", "results"


class Results(list):
    """What a step after several parents (a chord's callback) receives first: each parent's result
    in order, ``None`` for one that did not complete; :attr:`failures` lists those, each
    ``{"index", "job_id", "state", "error"}`` (empty unless ``on_parent_failure="run"`` let the
    step run after a failure)."""

    failures: list[dict[str, Any]]

    def __init__(self, values: Iterable[Any] = (), failures: Sequence[dict[str, Any]] = ()) -> None:
        super().__init__(values)
        self.failures = list(failures)


def inject_parents(payload: Any, parents: list[Dependency]) -> Any:
    """A stored step payload with its parents' results put first among its arguments (module
    docstring); any other payload unchanged."""
    if not (isinstance(payload, dict) and PARENTS_KEY in payload and payload.keys() <= {"args", "kwargs", PARENTS_KEY}):
        return payload
    mode = payload[PARENTS_KEY]
    values, failures = [], []
    for i, d in enumerate(parents):
        job = d.job
        if job is not None and job.state == "done":
            values.append(job.result)
            continue
        values.append(None)
        failures.append({"index": i, "job_id": d.parent_id, "state": None if job is None else job.state,
                         "error": None if job is None else job.last_error})
    first: Any = Results(values, failures) if mode == RECEIVE_ALL else (values[0] if values else None)
    return {"args": [first, *(payload.get("args") or [])], "kwargs": payload.get("kwargs") or {}}


class Canvas:
    """What a chain, a group, a chord and a signature share: ``enqueue()`` writes the whole
    composition in one transaction and answers a :class:`CompositionHandle`."""

    def _build(self, b: _Builder, parents: list[str], receive: str | None) -> list[str]:
        raise NotImplementedError  # pragma: no cover

    def _app_store(self) -> Store:
        raise NotImplementedError  # pragma: no cover

    #: Whether the final result is a list (a group's), rather than one step's.
    _many = False

    def enqueue(self, *, conn: Any = None) -> CompositionHandle:
        """Write every step in ONE transaction (the caller's with ``conn=``); answers a handle on
        the whole composition (``.result(timeout=...)``: the final result; ``.ids``)."""
        store = self._app_store()
        b = _Builder()
        final = self._build(b, [], None)
        ids = store.jobs.enqueue_many(b.specs, conn=conn)
        if ids != [s["id"] for s in b.specs]:  # pragma: no cover - minted ids never collide
            raise InvalidArgument("a step of the composition was deduplicated; its ids were not written")
        return CompositionHandle(store, [s["id"] for s in b.specs], final, self._many)

    def __or__(self, other: Canvas) -> Chain:
        """``a.s() | b.s()`` is ``chain(a.s(), b.s())``."""
        return chain(self, other)


class _Builder:
    def __init__(self) -> None:
        self.specs: list[dict[str, Any]] = []


class Signature(Canvas):
    """One task call to make later: ``task.s(*args, **kwargs)``. As a step after others, it
    receives their result(s) first (module docstring), so its own arguments are the rest."""

    def __init__(self, task: Task, args: tuple[Any, ...], kwargs: dict[str, Any],
                 options: dict[str, Any] | None = None) -> None:
        self.task = task
        self.args = args
        self.kwargs = kwargs
        self.options = dict(options or {})

    def __repr__(self) -> str:
        inner = ", ".join([*map(repr, self.args), *(f"{k}={v!r}" for k, v in self.kwargs.items())])
        return f"{self.task.name}.s({inner})"

    def set(self, **options: Any) -> Signature:
        """The same call with enqueue options (``queue``, ``priority``, ``max_attempts``,
        ``on_parent_failure``, ...); ``id`` and ``depends_on`` belong to the composition."""
        eo.checked(options, eo.SIGNATURE)  # each name and value by the table, now
        return Signature(self.task, self.args, self.kwargs, {**self.options, **options})

    def _app_store(self) -> Store:
        return self.task.app.store

    def _build(self, b: _Builder, parents: list[str], receive: str | None) -> list[str]:
        sig = self.task.signature
        if receive is None:
            payload: dict[str, Any] = sig.payload(self.args, self.kwargs)
        else:  # checked as called with the parents' result(s) first
            try:
                payload = sig.payload((None, *self.args), self.kwargs)
            except InvalidType as exc:
                if "argument" in exc.details:  # a keyword no parameter takes: the positions are not the matter
                    raise
                what = "the previous step's result" if receive == "result" else "the list of its parents' results"
                raise InvalidType(f"{exc.message}; a step after another receives {what} as its first "
                                  f"argument, before the {len(self.args)} given to .s()", **exc.details) from None
            payload = {"args": payload["args"][1:], "kwargs": payload["kwargs"], PARENTS_KEY: receive}
        job_id = new_job_id()
        spec: dict[str, Any] = {**self.task.options, **self.options, "kind": self.task.name, "payload": payload,
                                "id": job_id}
        spec.pop("conn", None)
        if parents:
            spec["depends_on"] = list(parents)
        elif "on_parent_failure" in spec:
            del spec["on_parent_failure"]
        b.specs.append(spec)
        return [job_id]


def _as_canvas(step: Any, where: str) -> Canvas:
    if isinstance(step, Canvas):
        return step
    raise InvalidType(f"{where} takes signatures (task.s(...)), chains, groups or chords, got "
                      f"{type(step).__name__}")


class Chain(Canvas):
    """Steps run one after another, each receiving the previous step's result first (a list,
    :class:`Results`, after a group). The final result is the last step's."""

    def __init__(self, steps: Sequence[Canvas]) -> None:
        if not steps:
            raise InvalidArgument("a chain needs at least one step")
        self.steps = [_as_canvas(s, "chain()") for s in steps]
        self._many = self.steps[-1]._many

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.steps))

    def _app_store(self) -> Store:
        return self.steps[0]._app_store()

    def _build(self, b: _Builder, parents: list[str], receive: str | None) -> list[str]:
        for i, step in enumerate(self.steps):
            if i:
                receive = RECEIVE_ALL if self.steps[i - 1]._many else RECEIVE_ONE
            parents = step._build(b, parents, receive)
        return parents


class Group(Canvas):
    """Steps run in parallel (no order among them); the result is the list of their results,
    in the group's order."""

    _many = True

    def __init__(self, steps: Iterable[Canvas]) -> None:
        if isinstance(steps, Canvas) or not isinstance(steps, Iterable):
            raise InvalidType("group() takes a list of signatures, chains or chords")
        self.steps = [_as_canvas(s, "group()") for s in steps]
        if not self.steps:
            raise InvalidArgument("a group needs at least one step")
        nested = [s for s in self.steps if s._many]
        if nested:
            raise InvalidArgument("a group's steps must each end in one job (a signature, or a chain or chord "
                                  f"ending in one); got {nested[0]!r}")

    def __repr__(self) -> str:
        return f"group([{', '.join(map(repr, self.steps))}])"

    def _app_store(self) -> Store:
        return self.steps[0]._app_store()

    def _build(self, b: _Builder, parents: list[str], receive: str | None) -> list[str]:
        out: list[str] = []
        for step in self.steps:
            out.extend(step._build(b, parents, receive))
        return out


class Chord(Canvas):
    """A group, then ``callback`` once every member has completed, receiving their results in
    order (:class:`Results`). ``on_parent_failure``: ``cancel`` (default: a member that ends dead
    or cancelled cancels the callback), ``run`` (the callback runs once every member has settled,
    with ``None`` for each failed member and ``results.failures`` saying why) or ``wait``."""

    def __init__(self, header: Group | Iterable[Canvas], callback: Canvas, on_parent_failure: str = "cancel") -> None:
        self.header = header if isinstance(header, Group) else Group(header)
        self.callback = _as_canvas(callback, "chord()")
        if on_parent_failure not in PARENT_FAILURE_POLICIES:
            raise InvalidArgument(f"on_parent_failure must be one of {', '.join(PARENT_FAILURE_POLICIES)}, "
                                  f"got {on_parent_failure!r}")
        self.on_parent_failure = on_parent_failure
        self._many = self.callback._many

    def __repr__(self) -> str:
        return f"chord({self.header!r}, {self.callback!r})"

    def _app_store(self) -> Store:
        return self.header._app_store()

    def _build(self, b: _Builder, parents: list[str], receive: str | None) -> list[str]:
        members = self.header._build(b, parents, receive)
        first = len(b.specs)
        out = self.callback._build(b, members, RECEIVE_ALL)
        # the callback's entry job(s): those whose parents are the members
        for spec in b.specs[first:]:
            if spec.get("depends_on") == members:
                spec["on_parent_failure"] = self.on_parent_failure
        return out


def chain(*steps: Canvas) -> Chain:
    """``chain(a.s(1), b.s(), c.s())``: a, then b(a's result), then c(b's result)."""
    if len(steps) == 1 and not isinstance(steps[0], Canvas) and isinstance(steps[0], Iterable):
        steps = tuple(steps[0])
    return Chain(steps)


def group(steps: Iterable[Canvas]) -> Group:
    """``group([a.s(1), a.s(2)])``: in parallel; the result is the list of results, in order."""
    return Group(steps)


def chord(header: Group | Iterable[Canvas], callback: Canvas, *, on_parent_failure: str = "cancel") -> Chord:
    """``chord(group([...]), cb.s())``: ``cb`` receives every member's result, in order."""
    return Chord(header, callback, on_parent_failure)


class CompositionHandle:
    """The answer of ``canvas.enqueue()``: ``ids`` (every step, parents first), ``final`` (the
    job(s) whose result is the composition's) and :meth:`result`."""

    def __init__(self, store: Store, ids: list[str], final: list[str], many: bool) -> None:
        self.store = store
        self.ids = ids
        self.final = final
        self._many = many

    def __repr__(self) -> str:
        return f"CompositionHandle({len(self.ids)} jobs, final={self.final!r})"

    @property
    def id(self) -> str:
        """The first step's id: what ``tenure jobs show`` and the dashboard start from."""
        return self.ids[0]

    def handles(self) -> list[Handle]:
        return [Handle(i, self.store) for i in self.final]

    def result(self, timeout: float | None = None, *, poll: float = 0.005) -> Any:
        """Wait for the final step(s) and answer the result: the last step's for a chain or a
        chord, the list of results for a group. A step that ended dead raises :class:`JobDead`
        naming THAT step (also when the final one was cancelled because of it); a cancelled one
        :class:`JobCancelled`; :class:`ResultTimeout` after ``timeout`` seconds."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        out = []
        for h in self.handles():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                out.append(h.result(left, poll=poll))
            except (JobDead, JobCancelled) as exc:
                raise self._cause(exc) from None
            except ResultTimeout:
                raise ResultTimeout(f"the composition of {len(self.ids)} jobs has not finished after {timeout} s "
                                    f"(final step {h.id!r}){self._stuck()}", job_id=h.id) from None
        return out if self._many else out[0]

    def _stuck(self) -> str:
        """``: step <id> (<kind>) <why>`` for the first queued step no parent holds back that has
        not run (tenure.kinds.why_waiting), or empty: what a timeout's reader wants to know."""
        from . import kinds

        try:
            for job_id in self.ids:
                job = self.store.jobs.get(job_id)
                if job is not None and job.state in ("pending", "failed") and not job.waiting_on:
                    why = kinds.why_waiting(self.store, job)
                    return f": step {job.id!r} ({job.kind}): {why}" if why else ""
        except Exception:  # noqa: BLE001 - only an explanation: the timeout stands on its own
            return ""
        return ""

    def _cause(self, exc: JobDead | JobCancelled) -> JobDead | JobCancelled:
        """The failure to report: the first step (parents first) that ended dead, else ``exc``."""
        jobs: list[Job] = [j for j in (self.store.jobs.get(i) for i in self.ids) if j is not None]
        dead = next((j for j in jobs if j.state == "dead"), None)
        if dead is None:
            return exc
        return JobDead(f"step {dead.id!r} ({dead.kind}) of the composition is dead after {dead.attempts} "
                       f"attempt(s): {dead.last_error}", job_id=dead.id, last_error=dead.last_error)

    def jobs(self) -> list[Job]:
        """Every step's record, parents first."""
        return [j for j in (self.store.jobs.get(i) for i in self.ids) if j is not None]

    def cancel(self) -> dict[str, int]:
        """Cancel every unsettled step (``jobs.cancel_composition``)."""
        return self.store.jobs.cancel_composition(self.ids[0])
