"""Hostile workflow documents: each is refused with InvalidArgument (TN1001)
naming the problem, never a raw exception and never a silently changed flow.

Before: a key given twice kept only the last value (a second ``needs`` dropped a node's
dependencies, so the node could run before its inputs), a YAML syntax error raised
``yaml.YAMLError``, and 100k-deep JSON raised ``RecursionError``."""

from __future__ import annotations

import pytest

from tenure.errors import InvalidArgument
from tenure.flow import Flow

pytest.importorskip("yaml")

DEEP = 100_000

JSON_DUPLICATES = [
    # the case: the second "needs" would silently drop b's dependency on a
    (
        '{"name": "f", "nodes": {"a": {"task": "t"}, "b": {"task": "t", "needs": ["a"], "needs": []}}}',
        "needs",
    ),
    ('{"name": "f", "nodes": {"a": {"task": "t"}, "a": {"task": "u"}}}', "a"),
    ('{"name": "f", "name": "g", "nodes": {"a": {"task": "t"}}}', "name"),
]
YAML_DUPLICATES = [
    ("name: f\nnodes:\n  a: {task: t}\n  b:\n    task: t\n    needs: [a]\n    needs: []\n", "needs"),
    ("name: f\nnodes:\n  a: {task: t}\n  a: {task: u}\n", "a"),
]


@pytest.mark.parametrize("text,key", JSON_DUPLICATES, ids=[k for _, k in JSON_DUPLICATES])
def test_a_json_key_given_twice_is_refused_naming_it(text, key):
    with pytest.raises(InvalidArgument) as ei:
        Flow.from_document(text)
    assert ei.value.code == "TN1001" and ei.value.details == {"problem": "duplicate_key", "key": key}
    assert repr(key) in str(ei.value)


@pytest.mark.parametrize("text,key", YAML_DUPLICATES, ids=[k for _, k in YAML_DUPLICATES])
def test_a_yaml_key_given_twice_is_refused_naming_it(text, key):
    with pytest.raises(InvalidArgument) as ei:
        Flow.from_yaml(text)
    assert ei.value.code == "TN1001" and ei.value.details == {"problem": "duplicate_key", "key": key}
    assert repr(key) in str(ei.value)


@pytest.mark.parametrize(
    "text",
    [
        "name: f\nnodes: [a, b\n",
        "name: f\n  nodes: x\n bad: [",
        "{[1]: 2}",
        "name: !!python/object:os.system x",
    ],
    ids=["unclosed", "indent", "unhashable-key", "python-tag"],
)
def test_a_yaml_syntax_error_is_coded(text):
    with pytest.raises(InvalidArgument) as ei:
        Flow.from_yaml(text)
    assert ei.value.code == "TN1001" and ei.value.details["problem"] == "bad_document"
    assert "YAML" in str(ei.value)


@pytest.mark.parametrize(
    "load,text",
    [
        (Flow.from_document, "[" * DEEP + "]" * DEEP),
        (Flow.from_document, '{"name": "f", "nodes": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}"),
        (Flow.from_yaml, "[" * DEEP + "]" * DEEP),
    ],
    ids=["json-list", "json-object", "yaml-list"],
)
def test_a_document_nested_100k_deep_is_coded(load, text):
    with pytest.raises(InvalidArgument) as ei:
        load(text)
    assert ei.value.code == "TN1001" and "nested too deeply" in str(ei.value)


def test_the_same_document_without_duplicates_still_loads():
    text = '{"name": "f", "nodes": {"a": {"task": "t"}, "b": {"task": "t", "needs": ["a"]}}}'
    assert Flow.from_document(text).nodes["b"].needs == ("a",)
    assert Flow.from_yaml("name: f\nnodes:\n  a: {task: t}\n  b: {task: t, needs: [a]}\n").nodes[
        "b"
    ].needs == ("a",)
