"""Workflow documents and the task registry: declaring, loading, validating (spec §7).

Validation problems are coded (TN1001 / TN1002) and name the problem in ``details["problem"]``."""

from __future__ import annotations

import json

import pytest

from tenure.errors import InvalidArgument, InvalidType
from tenure.flow import Flow, Registry

DOC = {
    "name": "sync-report",
    "revision": "2026-08-01",
    "max_parallel": 3,
    "output": "report",
    "nodes": {
        "fetch": {"task": "fetch", "version": 1},
        "transform": {"needs": ["fetch"]},
        "load_a": {"task": "load", "needs": ["transform"]},
        "load_b": {"task": "load", "needs": ["transform"]},
        "report": {"needs": ["load_a", "load_b"]},
    },
}


def problem(excinfo) -> str:
    return excinfo.value.details["problem"]


def test_a_document_loads_with_its_shape_order_and_sinks():
    flow = Flow.from_document(DOC)
    assert flow.name == "sync-report" and flow.revision == "2026-08-01" and flow.max_parallel == 3
    assert flow.order == ("fetch", "transform", "load_a", "load_b", "report")
    assert flow.nodes["load_b"].task == "load" and flow.nodes["transform"].task == "transform"
    assert flow.nodes["fetch"].version == 1 and flow.nodes["transform"].version is None
    assert flow.sinks() == ["report"]
    assert Flow.from_document(json.dumps(DOC)).to_document() == flow.to_document()
    assert Flow.from_document(flow.to_document()).shape() == flow.shape()


def test_nodes_may_be_a_list_and_yaml_loads_the_same_document():
    listed = {**DOC, "nodes": [{"id": k, **v} for k, v in DOC["nodes"].items()]}
    assert Flow.from_document(listed).shape() == Flow.from_document(DOC).shape()
    yaml_text = """
name: sync-report
revision: "2026-08-01"
max_parallel: 3
output: report
nodes:
  fetch: {task: fetch, version: 1}
  transform: {needs: [fetch]}
  load_a: {task: load, needs: [transform]}
  load_b: {task: load, needs: [transform]}
  report: {needs: [load_a, load_b]}
"""
    assert Flow.from_yaml(yaml_text).to_document() == Flow.from_document(DOC).to_document()


def test_an_unknown_dependency_is_refused_by_name():
    doc = {**DOC, "nodes": {**DOC["nodes"], "report": {"needs": ["load_a", "load_c"]}}}
    with pytest.raises(InvalidArgument) as e:
        Flow.from_document(doc)
    assert e.value.code == "TN1001" and problem(e) == "unknown_dependency"
    assert e.value.details["dependency"] == "load_c" and "'load_c'" in str(e.value)


def test_a_cycle_is_refused_with_its_path():
    doc = {"name": "loop", "nodes": {"a": {"needs": ["c"]}, "b": {"needs": ["a"]}, "c": {"needs": ["b"]},
                                     "z": {}}}
    with pytest.raises(InvalidArgument) as e:
        Flow.from_document(doc)
    assert e.value.code == "TN1001" and problem(e) == "cycle"
    cycle = e.value.details["cycle"]
    assert cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"} and len(cycle) == 4
    with pytest.raises(InvalidArgument) as e:
        Flow.from_document({"name": "self", "nodes": {"a": {"needs": ["a"]}}})
    assert problem(e) == "cycle" and e.value.details["cycle"] == ["a", "a"]


@pytest.mark.parametrize("doc, expected", [
    ({"name": "x", "nodes": {}}, "empty"),
    ({"name": "x", "nodes": {"a": {}}, "output": "b"}, "unknown_output"),
    ({"name": "x", "nodes": {"a": {}}, "output": []}, "unknown_output"),
    ({"name": "x", "nodes": {"a": {"need": ["b"]}}}, "bad_document"),  # a misspelt key is not ignored
    ({"name": "x", "nodes": {"a": {}}, "revison": "1"}, "bad_document"),
    ({"nodes": {"a": {}}}, "bad_document"),
    ({"name": "x", "nodes": [{"id": "a"}, {"id": "a"}]}, "duplicate_node"),
    ({"name": "x", "nodes": {"a": {"needs": ["b", "b"]}, "b": {}}}, "bad_document"),
    ({"name": "x", "nodes": {"__tenure_run__": {}}}, None),  # reserved
    ({"name": "x", "nodes": {"a": {}}, "max_parallel": 0}, "bad_document"),
    ("{not json", "bad_document"),
])
def test_malformed_documents_are_refused_with_a_code(doc, expected):
    with pytest.raises(InvalidArgument) as e:
        Flow.from_document(doc)
    assert e.value.code == "TN1001"
    if expected is not None:
        assert problem(e) == expected


@pytest.mark.parametrize("doc", [
    [1, 2],
    {"name": 3, "nodes": {"a": {}}},
    {"name": "x", "nodes": {"a": {"needs": "b"}}, "output": "a"},
    {"name": "x", "nodes": {"a": {"version": 1.5}}},
    {"name": "x", "nodes": {"a": {"version": True}}},
    {"name": "x", "nodes": {"a": {}}, "output": 3},
    {"name": "x", "nodes": {"a": {}}, "revision": True},
])
def test_wrong_types_in_documents_are_type_errors(doc):
    with pytest.raises(InvalidType) as e:
        Flow.from_document(doc)
    assert e.value.code == "TN1002"


def test_resolve_needs_every_task_and_honours_pinned_versions():
    flow = Flow.from_document(DOC)
    tasks = Registry()
    tasks.add("fetch", lambda ctx: 1, version=1)
    tasks.add("transform", lambda ctx: 1, version=1)
    tasks.add("report", lambda ctx: 1, version=1)
    with pytest.raises(InvalidArgument) as e:
        flow.resolve(tasks)
    assert problem(e) == "unknown_task" and e.value.details["task"] == "load"
    tasks.add("load", lambda ctx: 1, version="v7")
    impls = flow.resolve(tasks)
    assert {n: i.version for n, i in impls.items()} == {"fetch": 1, "transform": 1, "load": "v7", "report": 1}
    other = Registry()
    other.add("fetch", lambda ctx: 1, version=2)  # the document pins fetch at version 1
    for name in ("transform", "load", "report"):
        other.add(name, lambda ctx: 1, version=1)
    with pytest.raises(InvalidArgument) as e:
        flow.resolve(other)
    assert problem(e) == "version_conflict" and e.value.details["pinned"] == 1
    assert e.value.details["declared"] == 2


def test_registry_refuses_duplicates_bad_versions_and_non_callables():
    tasks = Registry()

    @tasks.task(version=1)
    def draft(ctx):
        return 1

    async def publish(ctx):
        return 2

    tasks.add("publish", publish, version="2024-01")
    assert tasks.versions() == {"draft": 1, "publish": "2024-01"}
    assert tasks.get("publish").is_async and not tasks.get("draft").is_async
    with pytest.raises(InvalidArgument):
        tasks.add("draft", draft, version=2)
    for bad in (None, 1.0, True, [1]):
        with pytest.raises(InvalidType):
            tasks.add("x", draft, version=bad)
    for bad in (-1, ""):
        with pytest.raises(InvalidArgument):
            tasks.add("x", draft, version=bad)
    with pytest.raises(InvalidType):
        tasks.add("x", 42, version=1)
    with pytest.raises(InvalidArgument):
        tasks.add("__tenure_x", draft, version=1)


def test_python_declared_flows_validate_lazily_and_share_tasks_between_nodes():
    flow = Flow("py", output=["b", "c"])

    @flow.task(needs=["a"], version=1)  # a forward reference is fine until validation
    def b(ctx):
        return 1

    @flow.task(version=1)
    def a(ctx):
        return 1

    flow.node("c", "b", needs=["a"])
    assert flow.order == ("a", "b", "c")
    assert flow.resolve()["b"].version == 1 and flow.output == ["b", "c"]
    with pytest.raises(InvalidArgument) as e:
        flow.node("a")
    assert problem(e) == "duplicate_node"


def test_an_undeclared_revision_is_derived_from_the_shape_but_not_from_versions():
    def build(version: int, extra: bool = False) -> Flow:
        f = Flow("auto")
        f.registry.add("a", lambda ctx: 1, version=version)
        f.node("a")
        if extra:
            f.registry.add("b", lambda ctx: 1, version=1)
            f.node("b", needs=["a"])
        return f

    r1 = build(1).revision
    assert r1.startswith("auto:") and build(1).revision == r1
    assert build(2).revision == r1  # a moved task version is the task-version check's business (7.12)
    assert build(1, extra=True).revision != r1
