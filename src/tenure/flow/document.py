"""Workflow documents: named nodes, their dependencies, the tasks they run, and validation.

A :class:`Flow` is declared in Python (decorators or :meth:`Flow.node`) or loaded from a JSON
document (a dict, JSON text, or YAML text if PyYAML is installed)::

    {
      "name": "sync-report",          # the job kind that starts a run
      "revision": "2026-08-01",       # optional: derived from the shape when absent
      "max_parallel": 4,              # optional: nodes running at once within one run
      "output": "report",             # a node id, a list of node ids, or absent (every sink)
      "nodes": {
        "fetch":     {"task": "fetch", "version": 1},
        "transform": {"needs": ["fetch"]},
        "load_a":    {"task": "load", "needs": ["transform"]},
        ...
      }
    }

``nodes`` may also be a list of ``{"id": ..., ...}``. A node's ``task`` defaults to its id; its
``version``, when present, pins the version the document was written against (the registry's
declared version must match). Unknown keys are refused: a misspelt ``"need"`` would otherwise
silently drop a dependency. Validation errors are :class:`~tenure.errors.InvalidArgument`
(TN1001) or :class:`~tenure.errors.InvalidType` (TN1002) with ``details["problem"]`` one of
``empty``, ``duplicate_node``, ``unknown_dependency``, ``cycle``, ``unknown_output``,
``unknown_task``, ``version_conflict``, ``bad_document``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument, InvalidType
from .identity import digest
from .registry import Registry, TaskImpl, Version, check_name, check_version

DEFAULT_MAX_PARALLEL = 4
_DOC_KEYS = {"name", "revision", "max_parallel", "output", "nodes", "description"}
_NODE_KEYS = {"id", "task", "needs", "version", "description"}


@dataclass(frozen=True, slots=True)
class Node:
    """One node: ``id`` (unique in the flow), the ``task`` it runs, the node ids it ``needs``,
    and the task ``version`` the document pins (None: whatever the registry declares)."""

    id: str
    task: str
    needs: tuple[str, ...] = ()
    version: Version | None = None


def _bad(message: str, problem: str, **details: Any) -> InvalidArgument:
    return InvalidArgument(message, problem=problem, **details)


def _unique_keys(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    """A JSON object's pairs as a dict; a key given twice is refused, not silently overwritten
    (a second ``needs`` would drop the first one's dependencies)."""
    out: dict[Any, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _bad(f"the workflow document gives the key {key!r} twice in one object", "duplicate_key",
                       key=key)
        out[key] = value
    return out


def _load_json(text: str | bytes) -> Any:
    """JSON text -> value; every failure is :class:`InvalidArgument` (TN1001), never a raw error."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise _bad("the workflow document is nested too deeply to read", "bad_document") from None
    except UnicodeDecodeError as exc:
        raise _bad(f"the workflow document is not UTF-8 text: {exc.reason}", "bad_document") from None
    except ValueError as exc:
        if isinstance(exc, InvalidArgument):
            raise
        raise _bad(f"the workflow document is not valid JSON: {exc}", "bad_document") from None


def _load_yaml(yaml: Any, text: str) -> Any:
    """YAML text -> value with PyYAML's safe loader; a duplicate key, a syntax error or absurd
    nesting is :class:`InvalidArgument` (TN1001) naming the problem."""

    class _UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                except TypeError:  # an unhashable key: the base constructor words the error
                    break
                if duplicate:
                    raise _bad(f"the workflow document gives the key {key!r} twice in one mapping "
                               f"(line {key_node.start_mark.line + 1})", "duplicate_key", key=key)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except RecursionError:
        raise _bad("the workflow document is nested too deeply to read", "bad_document") from None
    except yaml.YAMLError as exc:
        raise _bad(f"the workflow document is not valid YAML: {' '.join(str(exc).split())}",
                   "bad_document") from None


class Flow:
    """A workflow: a DAG of nodes run as one job of kind :attr:`name`.

    ```python
    flow = Flow("sync-report", revision="1", output="report")

    @flow.task(version=1)
    def fetch(ctx): return download(ctx.input["day"])

    @flow.task(needs=["fetch"], version=1)
    def transform(ctx): return clean(ctx["fetch"])
    ```
    Tasks registered through :meth:`task` live in :attr:`registry`; a node may also name a task
    that the :class:`tenure.flow.Runner`'s registry provides.
    """

    def __init__(self, name: str, *, revision: str | int | None = None, output: str | list[str] | tuple[str, ...] | None = None,
                 max_parallel: int = DEFAULT_MAX_PARALLEL, registry: Registry | None = None) -> None:
        check_name(name, "flow name")
        if revision is not None:
            if isinstance(revision, bool) or not isinstance(revision, str | int) or revision == "":
                raise InvalidType(f"flow {name!r}: revision must be a non-empty string or an int, got "
                                  f"{revision!r}")
        if isinstance(max_parallel, bool) or not isinstance(max_parallel, int) or max_parallel < 1:
            raise InvalidArgument(f"flow {name!r}: max_parallel must be a positive int, got {max_parallel!r}",
                                  problem="bad_document")
        if output is not None and not isinstance(output, str):
            if not isinstance(output, list | tuple) or not all(isinstance(o, str) for o in output):
                raise InvalidType(f"flow {name!r}: output must be a node id or a list of node ids, got "
                                  f"{output!r}")
        self.name = name
        self._revision = revision
        self._output = output if output is None or isinstance(output, str) else tuple(output)
        self.max_parallel = max_parallel
        self.registry = registry if registry is not None else Registry()
        self._nodes: dict[str, Node] = {}
        self._order: tuple[str, ...] | None = None

    # -- declaring ---------------------------------------------------------------------------------
    def node(self, id: str, task: str | None = None, *, needs: Iterable[str] = (),
             version: Version | None = None) -> Node:
        """Add a node running ``task`` (default: a task named like the node) after ``needs``."""
        check_name(id, f"flow {self.name!r}: node id")
        task = id if task is None else task
        check_name(task, f"flow {self.name!r}: the task of node {id!r}")
        if isinstance(needs, str):
            needs = [needs]
        needs_t = tuple(needs)
        for dep in needs_t:
            if not isinstance(dep, str):
                raise InvalidType(f"flow {self.name!r}: node {id!r} needs {dep!r}, which is not a node id")
        if len(set(needs_t)) != len(needs_t):
            raise _bad(f"flow {self.name!r}: node {id!r} lists a dependency twice: {list(needs_t)}",
                       "bad_document", node=id)
        if version is not None:
            check_version(version, f"flow {self.name!r}: the version of node {id!r}")
        if id in self._nodes:
            raise _bad(f"flow {self.name!r}: node {id!r} is declared twice", "duplicate_node", node=id)
        node = Node(id, task, needs_t, version)
        self._nodes[id] = node
        self._order = None
        return node

    def task(self, name: str | None = None, *, version: Version, needs: Iterable[str] = (),
             node: str | None = None) -> Callable[[Callable], Callable]:
        """Decorator: register the function as a task of this flow (named ``name`` or its
        ``__name__``) at ``version``, and add a node for it (id ``node``, default the task name)."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            task_name = name or fn.__name__
            self.registry.add(task_name, fn, version=version)
            self.node(node or task_name, task_name, needs=needs)
            return fn

        return register

    # -- reading -----------------------------------------------------------------------------------
    @property
    def nodes(self) -> dict[str, Node]:
        """The nodes by id, in declaration order."""
        return dict(self._nodes)

    @property
    def output(self) -> str | list[str] | None:
        """What the run answers: a node id (that node's value), a list of ids (a map of their
        values), or None (a map of every sink's value)."""
        return list(self._output) if isinstance(self._output, tuple) else self._output

    @property
    def revision(self) -> str | int:
        """The declared revision, or ``"auto:<hash of the shape>"`` when none was declared (so an
        edited shape is a new revision even if nobody bumped it)."""
        if self._revision is not None:
            return self._revision
        return "auto:" + digest({"nodes": self.shape(), "output": self.output}).split(":", 1)[1][:16]

    def shape(self) -> dict[str, dict[str, Any]]:
        """``{node id: {"task": ..., "needs": [...]}}``, in declaration order."""
        return {n.id: {"task": n.task, "needs": list(n.needs)} for n in self._nodes.values()}

    def sinks(self) -> list[str]:
        """Nodes no other node needs, in declaration order."""
        needed = {d for n in self._nodes.values() for d in n.needs}
        return [i for i in self._nodes if i not in needed]

    @property
    def order(self) -> tuple[str, ...]:
        """A topological order of the node ids (dependencies first; ties in declaration order)."""
        self.validate()
        assert self._order is not None
        return self._order

    # -- validation --------------------------------------------------------------------------------
    def validate(self) -> Flow:
        """Check the shape: at least one node, every dependency declared, no cycle, the output
        naming declared nodes. Answers the flow; raises a coded error naming the problem."""
        if self._order is not None:
            return self
        nodes = self._nodes
        if not nodes:
            raise _bad(f"flow {self.name!r} has no nodes", "empty", flow=self.name)
        for n in nodes.values():
            for dep in n.needs:
                if dep not in nodes:
                    raise _bad(f"flow {self.name!r}: node {n.id!r} needs {dep!r}, which is not a node of "
                               "this flow", "unknown_dependency", flow=self.name, node=n.id, dependency=dep)
        # Kahn's algorithm, stable on declaration order.
        indegree = {i: len(n.needs) for i, n in nodes.items()}
        dependents: dict[str, list[str]] = {i: [] for i in nodes}
        for n in nodes.values():
            for dep in n.needs:
                dependents[dep].append(n.id)
        ready = [i for i in nodes if indegree[i] == 0]
        order: list[str] = []
        while ready:
            i = ready.pop(0)
            order.append(i)
            for d in dependents[i]:
                indegree[d] -= 1
                if indegree[d] == 0:
                    ready.append(d)
        if len(order) != len(nodes):
            cycle = self._find_cycle({i for i in nodes if i not in order})
            raise _bad(f"flow {self.name!r} has a cycle: {' -> '.join(cycle)}", "cycle", flow=self.name,
                       cycle=cycle)
        out = self._output
        names = [out] if isinstance(out, str) else list(out or ())
        if isinstance(out, tuple) and not out:
            raise _bad(f"flow {self.name!r}: output is an empty list", "unknown_output", flow=self.name)
        for o in names:
            if o not in nodes:
                raise _bad(f"flow {self.name!r}: output names {o!r}, which is not a node of this flow",
                           "unknown_output", flow=self.name, output=o)
        self._order = tuple(order)
        return self

    def _find_cycle(self, candidates: set[str]) -> list[str]:
        nodes = self._nodes
        start = next(i for i in nodes if i in candidates)
        path: list[str] = []
        seen: dict[str, int] = {}
        cur = start
        while cur not in seen:
            seen[cur] = len(path)
            path.append(cur)
            cur = next(d for d in nodes[cur].needs if d in candidates)
        cycle = path[seen[cur]:] + [cur]
        cycle.reverse()  # dependency direction: a -> b means b needs a
        return cycle

    def resolve(self, registry: Registry | None = None) -> dict[str, TaskImpl]:
        """The implementation of every task the flow uses: the flow's own registry first, then
        ``registry``. Refused when a task is missing, or when the document pins a version the
        implementation does not declare."""
        self.validate()
        out: dict[str, TaskImpl] = {}
        for n in self._nodes.values():
            impl = self.registry.get(n.task) or (registry.get(n.task) if registry is not None else None)
            if impl is None:
                raise _bad(f"flow {self.name!r}: node {n.id!r} runs task {n.task!r}, which no registry "
                           "provides", "unknown_task", flow=self.name, node=n.id, task=n.task)
            if n.version is not None and n.version != impl.version:
                raise _bad(f"flow {self.name!r}: node {n.id!r} pins task {n.task!r} at version "
                           f"{n.version!r}, but the registered implementation declares version "
                           f"{impl.version!r}", "version_conflict", flow=self.name, node=n.id, task=n.task,
                           pinned=n.version, declared=impl.version)
            out[n.task] = impl
        return out

    # -- documents ---------------------------------------------------------------------------------
    @classmethod
    def from_document(cls, document: Mapping[str, Any] | str, *, registry: Registry | None = None) -> Flow:
        """Load and validate a flow from a document: a dict, or JSON text. ``registry`` becomes
        the flow's own registry (tasks may also come from the runner's)."""
        if isinstance(document, str | bytes):
            document = _load_json(document)
        if not isinstance(document, Mapping):
            raise InvalidType(f"a workflow document must be a JSON object, got {type(document).__name__}")
        extra = set(document) - _DOC_KEYS
        if extra:
            raise _bad(f"unknown keys in the workflow document: {sorted(extra)} (allowed: {sorted(_DOC_KEYS)})",
                       "bad_document", keys=sorted(extra))
        if "name" not in document:
            raise _bad("the workflow document needs a 'name' (the job kind that starts a run)", "bad_document")
        flow = cls(document["name"], revision=document.get("revision"), output=document.get("output"),
                   max_parallel=document.get("max_parallel", DEFAULT_MAX_PARALLEL), registry=registry)
        raw = document.get("nodes")
        if isinstance(raw, Mapping):
            items = []
            for key, spec in raw.items():
                if not isinstance(spec, Mapping):
                    raise InvalidType(f"flow {flow.name!r}: node {key!r} must be an object, got "
                                      f"{type(spec).__name__}")
                if "id" in spec and spec["id"] != key:
                    raise _bad(f"flow {flow.name!r}: node {key!r} says its id is {spec['id']!r}", "bad_document")
                items.append({**spec, "id": key})
        elif isinstance(raw, list):
            items = list(raw)
        else:
            raise _bad(f"flow {flow.name!r}: 'nodes' must be an object or a list", "bad_document")
        for spec in items:
            if not isinstance(spec, Mapping):
                raise InvalidType(f"flow {flow.name!r}: every node must be an object, got {spec!r}")
            extra = set(spec) - _NODE_KEYS
            if extra:
                raise _bad(f"flow {flow.name!r}: unknown keys in node {spec.get('id')!r}: {sorted(extra)} "
                           f"(allowed: {sorted(_NODE_KEYS)})", "bad_document", keys=sorted(extra))
            if "id" not in spec:
                raise _bad(f"flow {flow.name!r}: a node in the list has no 'id'", "bad_document")
            needs = spec.get("needs", [])
            if isinstance(needs, str) or not isinstance(needs, list):
                raise InvalidType(f"flow {flow.name!r}: node {spec['id']!r}: 'needs' must be a list of node ids")
            flow.node(spec["id"], spec.get("task"), needs=needs, version=spec.get("version"))
        return flow.validate()

    @classmethod
    def from_yaml(cls, text: str, *, registry: Registry | None = None) -> Flow:
        """Load a flow from YAML text (needs PyYAML, which tenure does not depend on)."""
        try:
            import yaml
        except ImportError:
            raise InvalidArgument("loading a YAML workflow document needs PyYAML (pip install pyyaml); "
                                  "or pass the parsed dict to Flow.from_document", problem="bad_document") from None
        return cls.from_document(_load_yaml(yaml, text), registry=registry)

    def to_document(self) -> dict[str, Any]:
        """The flow as a JSON document that :meth:`from_document` loads back."""
        nodes: dict[str, Any] = {}
        for n in self._nodes.values():
            spec: dict[str, Any] = {"task": n.task, "needs": list(n.needs)}
            if n.version is not None:
                spec["version"] = n.version
            nodes[n.id] = spec
        doc: dict[str, Any] = {"name": self.name, "max_parallel": self.max_parallel, "nodes": nodes}
        if self._revision is not None:
            doc["revision"] = self._revision
        if self._output is not None:
            doc["output"] = self.output
        return doc

    def __repr__(self) -> str:
        return f"<tenure.flow.Flow {self.name!r} revision={self.revision!r} nodes={list(self._nodes)}>"
