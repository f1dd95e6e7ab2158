"""The run identity recorded under the reserved node id, and how a resume is compared with it
(spec 7.10-7.14; the store-backed half is in test_resume.py)."""

from __future__ import annotations

from tenure.errors import ResumeMismatch
from tenure.flow import RUN_NODE, Flow, RunIdentity, input_hash, task_versions_hash
from tenure.flow.identity import differences, is_legacy, refuse


def flow_with(versions: dict[str, int], revision: str = "r1") -> tuple[Flow, dict[str, int]]:
    flow = Flow("f", revision=revision)
    for name in versions:
        flow.node(name)
    return flow, versions


def test_input_hash_is_canonical():
    assert input_hash({"a": 1, "b": [1, 2]}) == input_hash({"b": [1, 2], "a": 1})
    assert input_hash({"a": 1}) != input_hash({"a": 2})
    assert input_hash(None) != input_hash({}) and input_hash("é").startswith("sha256:")


def test_the_task_version_map_is_canonical_and_hashed():
    flow, versions = flow_with({"draft": 1, "edit": 2})
    ident = RunIdentity.of(flow, {"x": 1}, {"edit": 2, "draft": 1})
    assert list(ident.task_versions) == ["draft", "edit"]
    assert ident.task_versions_hash == task_versions_hash(versions)
    rec = ident.record()
    assert {"revision", "input_hash", "task_versions", "task_versions_hash"} <= set(rec)
    assert rec["nodes"] == {"draft": {"task": "draft", "needs": []}, "edit": {"task": "edit", "needs": []}}
    assert not is_legacy(rec) and is_legacy({"revision": "r1", "input_hash": rec["input_hash"]})
    assert RUN_NODE == "__tenure_run__"


def test_each_change_is_named_separately():
    flow, versions = flow_with({"draft": 1, "edit": 1})
    base = RunIdentity.of(flow, {"day": 1}, versions).record()
    assert differences(base, RunIdentity.of(flow, {"day": 1}, versions)) == []

    rev = differences(base, RunIdentity.of(Flow.from_document({**flow.to_document(), "revision": "r2"}),
                                           {"day": 1}, versions))
    assert [k for k, _ in rev] == ["revision"] and "'r1' to 'r2'" in rev[0][1]

    inp = differences(base, RunIdentity.of(flow, {"day": 2}, versions))
    assert [k for k, _ in inp] == ["input"] and "input hash" in inp[0][1]

    moved = differences(base, RunIdentity.of(flow, {"day": 1}, {"draft": 2, "edit": 1}))
    assert moved == [("task_versions", "'draft' moved from version 1 to 2")]

    all3 = differences(base, RunIdentity.of(Flow.from_document({**flow.to_document(), "revision": "r2"}),
                                            {"day": 2}, {"draft": 1, "edit": 5}))
    assert [k for k, _ in all3] == ["revision", "input", "task_versions"]


def test_tasks_added_or_removed_are_named():
    flow, _ = flow_with({"draft": 1})
    base = RunIdentity.of(flow, None, {"draft": 1, "old": 3}).record()
    got = [s for _, s in differences(base, RunIdentity.of(flow, None, {"draft": 1, "new": 1}))]
    assert got == ["task 'new' was added at version 1", "task 'old' (version 3) is no longer used"]


def test_the_refusal_is_coded_and_carries_what_changed():
    err = refuse("job-1", "f", [("task_versions", "'draft' moved from version 1 to 2")])
    assert isinstance(err, ResumeMismatch) and err.code == "TN2069"
    assert err.details["changed"] == ["task_versions"] and "'draft' moved from version 1 to 2" in str(err)
    legacy = refuse("job-1", "f", [], legacy_values=["a", "b"])
    assert legacy.details["changed"] == ["legacy"] and "cannot be confirmed" in str(legacy)
