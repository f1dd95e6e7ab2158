"""Dependencies between jobs: ``enqueue(..., depends_on=[...])`` (docs/composition.md).

The model, in one place:

- **A dependent is an ordinary ``pending`` job** (spec 2.5's six states) that is not eligible while
  its ``waiting_on`` count is above 0: the number of its parent edges not yet met. The claim
  requires ``waiting_on = 0`` (and a waiting dependent is in no claim index, so a claim never walks
  past one).
- **An edge is met** when its parent is ``done``, or when the parent ends ``dead``/``cancelled``
  and the dependent's ``on_parent_failure`` is ``run``.
- **A parent that ends dead or cancelled** settles its dependents by each one's policy:
  ``cancel`` (the default: the dependent is cancelled, ``last_error`` opening with TN2103, and its
  own dependents after it by theirs), ``run`` (the edge counts as met: it runs once the other
  parents have settled, and reads every parent's outcome) or ``wait`` (left pending, to run when
  an operator requeues the parent and it completes).
- **The settlement side is in the database**: a trigger on the jobs table (migrations 0013 and
  0016, both engines) does it in the same transaction as the parent's settlement, whichever statement
  settled it. This module is the enqueue side and the reads.
- **An enqueue with dependencies is one transaction**: the jobs, their edges and their counts
  appear together (outbox-safe with ``tx.jobs`` or ``conn=``). Unknown parents (TN2101),
  self-dependency and cycles (TN2102) are refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from . import _validate as v
from .engine.base import Session
from .engine.rows import PARENT_FAILURE_POLICIES, Edge, NewJob
from .errors import DependencyCycle, InvalidArgument, InvalidType, ParentFailed, UnknownParent
from .records import Dependency, Job

if TYPE_CHECKING:
    from .store import Store

#: At most this many parents per job (a chord's callback has one per child).
MAX_PARENTS = 10_000
#: ``jobs.composition(id)`` walks at most this many jobs.
MAX_COMPOSITION = 100_000
FAILED_STATES = ("dead", "cancelled")


def checked(depends_on: Any, on_parent_failure: Any) -> tuple[tuple[str, ...], str]:
    """``depends_on`` and ``on_parent_failure`` checked: a tuple of distinct job ids, and one of
    :data:`PARENT_FAILURE_POLICIES` (TN1001/TN1002 naming the option)."""
    if on_parent_failure is None:
        on_parent_failure = "cancel"
    if not isinstance(on_parent_failure, str):
        raise InvalidType(f"on_parent_failure must be a string, got {type(on_parent_failure).__name__}")
    if on_parent_failure not in PARENT_FAILURE_POLICIES:
        raise InvalidArgument(f"on_parent_failure must be one of {', '.join(PARENT_FAILURE_POLICIES)}, "
                              f"got {on_parent_failure!r}")
    if depends_on is None:
        return (), on_parent_failure
    if isinstance(depends_on, str | bytes | dict) or not isinstance(depends_on, Iterable):
        raise InvalidType(f"depends_on takes a list of job ids, got {type(depends_on).__name__}")
    ids = tuple(v.job_id(p) for p in depends_on)
    if len(ids) > MAX_PARENTS:
        raise InvalidArgument(f"depends_on lists {len(ids)} jobs; at most {MAX_PARENTS}")
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        twice = next(p for p in ids if p in seen or seen.add(p))  # type: ignore[func-returns-value]
        raise InvalidArgument(f"depends_on lists job {twice!r} twice")
    return ids, on_parent_failure


def check_graph(jobs: Sequence[NewJob]) -> None:
    """Refuse a job that depends on itself, or jobs of one call that depend on each other in a
    cycle (TN2102, naming them), before anything is written."""
    in_batch = {j.id: j for j in jobs}
    for j in jobs:
        if j.id in j.depends_on:
            raise DependencyCycle(f"job {j.id!r} depends on itself", cycle=[j.id])
    # Only edges inside the batch can close a cycle: a stored job never gains a parent.
    state: dict[str, int] = {}  # 1: on the path, 2: done
    for start in in_batch:
        if state.get(start):
            continue
        stack: list[tuple[str, Iterable[str]]] = [(start, iter(in_batch[start].depends_on))]
        path = [start]
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next((p for p in it if p in in_batch), None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
                continue
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                raise DependencyCycle(f"depends_on forms a cycle: {' -> '.join(cycle)} (each waits for the "
                                      "next, so none could ever run)", cycle=cycle)
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(in_batch[nxt].depends_on)))


def _failure_message(parent: str, state: str) -> str:
    return (f"{ParentFailed.code}: parent {parent} ended {state}, so this dependent was cancelled "
            "(on_parent_failure=cancel)")


def write(store: Store, s: Session, jobs: list[NewJob], now: int | None) -> list[str | None]:
    """Insert ``jobs`` and their dependencies in the caller's transaction on ``s``; answers the ids
    as ``enqueue_many`` does. A job whose id already existed (or that a uniqueness policy
    deduplicated) is unchanged and gains no parents."""
    check_graph(jobs)
    batch = {j.id for j in jobs}
    outside = sorted({p for j in jobs for p in j.depends_on if p not in batch})
    if outside:
        found = s.job_states(outside)
        missing = [p for p in outside if p not in found]
        if missing:
            raise UnknownParent(f"depends_on names job(s) that do not exist: {', '.join(missing[:10])}"
                                + (f" (and {len(missing) - 10} more)" if len(missing) > 10 else ""),
                                missing=missing)
    dependents = [j for j in jobs if j.depends_on]
    existed = s.job_states([j.id for j in dependents])
    answered = store.queues.insert(s, jobs, now)
    alias = {j.id: a for j, a in zip(jobs, answered, strict=True)}
    fresh = [j for j, a in zip(jobs, answered, strict=True) if j.depends_on and a == j.id and j.id not in existed]
    if not fresh:
        return answered
    wanted = sorted({alias.get(p) or p for j in fresh for p in j.depends_on})
    states = s.dependency_mark_parents(wanted)
    missing = [p for p in wanted if p not in states]
    if missing:  # deleted since the check above, or a batch job no insert could answer for
        raise UnknownParent(f"depends_on names job(s) that do not exist: {', '.join(missing[:10])}",
                            missing=missing)
    edges: list[Edge] = []
    waiting: dict[str, int] = {}
    cancelled: list[tuple[str, str]] = []
    for j in _parents_first(fresh):
        unmet = 0
        why = None
        for position, given in enumerate(j.depends_on):
            parent = alias.get(given) or given
            state = states[parent]
            met = state == "done" or (state in FAILED_STATES and j.on_parent_failure == "run")
            if state in FAILED_STATES and j.on_parent_failure == "cancel" and why is None:
                why = _failure_message(parent, state)
            unmet += not met
            edges.append(Edge(j.id, parent, position, j.on_parent_failure, met))
        waiting[j.id] = unmet
        if why is not None:
            cancelled.append((j.id, why))
            states[j.id] = "cancelled"  # for its dependents later in this batch
    s.dependency_add(edges, waiting, cancelled, now)
    return answered


def _parents_first(jobs: list[NewJob]) -> list[NewJob]:
    """``jobs`` in an order where each comes after its parents among them (the graph is acyclic)."""
    ids = {j.id: j for j in jobs}
    out: list[NewJob] = []
    placed: set[str] = set()

    def place(j: NewJob) -> None:
        stack = [(j, iter(j.depends_on))]
        while stack:
            node, it = stack[-1]
            nxt = next((ids[p] for p in it if p in ids and p not in placed), None)
            if nxt is None:
                stack.pop()
                if node.id not in placed:
                    placed.add(node.id)
                    out.append(node)
            else:
                stack.append((nxt, iter(nxt.depends_on)))

    for j in jobs:
        if j.id not in placed:
            place(j)
    return out


def edges_of(store: Store, job_id: str, parents: bool) -> list[Dependency]:
    """The dependencies of ``job_id`` (``parents``) or its dependents, as records."""
    from .job_rows import row_to_job

    v.job_id(job_id)
    with store._session() as s:
        rows = s.dependency_list(job_id, parents)
    out = []
    for r in rows:
        job: Job | None = None if r.job is None else row_to_job(r.job)
        child, parent = (job_id, r.other_id) if parents else (r.other_id, job_id)
        out.append(Dependency(child, parent, int(r.position), r.policy, r.released, job))
    return out


def composition(store: Store, job_id: str) -> list[Job]:
    """Every job connected to ``job_id`` through dependencies (parents, dependents, their parents
    ...), itself included, parents before their dependents. Unknown ``job_id``: an empty list."""
    root = store.jobs.get(job_id)
    if root is None:
        return []
    seen: dict[str, Job] = {job_id: root}
    parents_of: dict[str, list[str]] = {}
    queue = [job_id]
    while queue:
        current = queue.pop()
        for parents in (True, False):
            for d in edges_of(store, current, parents):
                if parents:
                    parents_of.setdefault(current, []).append(d.parent_id)
                other = d.parent_id if parents else d.job_id
                if other not in seen and d.job is not None:
                    if len(seen) >= MAX_COMPOSITION:
                        raise InvalidArgument(f"the composition of {job_id!r} holds more than {MAX_COMPOSITION} jobs")
                    seen[other] = d.job
                    queue.append(other)
    order: list[str] = []
    done: set[str] = set()

    def visit(n: str) -> None:
        stack = [(n, iter(parents_of.get(n, ())))]
        while stack:
            node, it = stack[-1]
            nxt = next((p for p in it if p in seen and p not in done), None)
            if nxt is None:
                stack.pop()
                if node not in done:
                    done.add(node)
                    order.append(node)
            else:
                stack.append((nxt, iter(parents_of.get(nxt, ()))))

    for n in sorted(seen):
        if n not in done:
            visit(n)
    return [seen[n] for n in order]


def cancel_composition(store: Store, job_id: str) -> dict[str, int]:
    """Cancel every job of ``job_id``'s composition that has not settled: dependents first (so a
    ``run``-policy dependent is never released by its parent's cancellation), each with
    ``request_cancel`` (queued ones now, running ones through their holders). Answers
    ``{"cancelled": n, "requested": n}``."""
    counts = {"cancelled": 0, "requested": 0}
    for job in reversed(composition(store, job_id)):
        if job.state in ("pending", "failed", "leased"):
            try:
                answer = store.jobs.request_cancel(job.id)
            except Exception:  # noqa: BLE001 - settled meanwhile (TN2065): nothing left to cancel
                continue
            if answer in counts:
                counts[answer] += 1
    return counts


def requeue_composition(store: Store, job_id: str) -> int:
    """Requeue every failed, dead or cancelled job of ``job_id``'s composition (parents first);
    done ones stay done and their results stand. A requeued dependent waits again for the parents
    it still lacks. Answers how many were requeued."""
    n = 0
    for job in composition(store, job_id):
        if job.state in ("failed", "dead", "cancelled"):
            try:
                n += bool(store.jobs.requeue(job.id))
            except Exception:  # noqa: BLE001 - moved meanwhile (claimed, settled): leave it
                continue
    return n


def parent_outcomes(store: Store, job_id: str) -> list[Dependency]:
    """The parents of ``job_id`` in ``depends_on`` order with their records (what a dependent
    reads at run time: its parents are settled, their results stored)."""
    return edges_of(store, job_id, True)
