"""A run's identity: what a resume must agree with before it reuses recorded values.

Beside a run's checkpoints, under the reserved node id :data:`RUN_NODE`, a workflow run records
(spec §7, spec 7.10-7.14):

- ``revision``: the workflow document's revision;
- ``input_hash``: a hash of the run's input;
- ``task_versions``: the canonical map ``{task name: declared version}`` of the tasks the flow
  uses, and ``task_versions_hash``, its hash.

It also records, for display only, the flow's name and shape (``flow``, ``nodes``, ``output``),
so :func:`tenure.flow.describe_run` can show pending nodes without the flow's code. The shape
never takes part in the comparison: the revision stands for it.

A record with no ``task_versions_hash`` is a *legacy* record (written by a release that did not
record task identity). The legacy rule is deterministic and never reads unknown as equal: with no
node value recorded the identity is upgraded in place; with values, the resume is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ResumeMismatch

if TYPE_CHECKING:
    from .document import Flow
    from .registry import Version

#: The reserved checkpoint node id under which a run records its identity.
RUN_NODE = "__tenure_run__"
#: The fields a legacy record lacks; their absence marks it legacy.
LEGACY_MARKER = "task_versions_hash"


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value``: sorted keys, no whitespace, UTF-8, no NaN."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(value: Any) -> str:
    """``"sha256:<hex>"`` of the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def input_hash(run_input: Any) -> str:
    """The hash recorded for a run's input (its canonical JSON's SHA-256)."""
    return digest(run_input)


def task_versions_hash(versions: Mapping[str, Version]) -> str:
    """The hash recorded for a canonical task-version map."""
    return digest(dict(sorted(versions.items())))


@dataclass(frozen=True, slots=True)
class RunIdentity:
    """The identity of one run of one flow: what is recorded under :data:`RUN_NODE`."""

    flow: str
    revision: str | int
    input_hash: str
    task_versions: dict[str, Version]
    task_versions_hash: str
    nodes: dict[str, dict[str, Any]]
    output: Any

    @classmethod
    def of(cls, flow: Flow, run_input: Any, versions: Mapping[str, Version]) -> RunIdentity:
        """The identity a run of ``flow`` on ``run_input`` has under the given task versions."""
        canonical = dict(sorted(versions.items()))
        return cls(flow.name, flow.revision, input_hash(run_input), canonical,
                   task_versions_hash(canonical), flow.shape(), flow.output)

    def record(self) -> dict[str, Any]:
        """The JSON value saved under :data:`RUN_NODE`."""
        return {"flow": self.flow, "revision": self.revision, "input_hash": self.input_hash,
                "task_versions": self.task_versions, "task_versions_hash": self.task_versions_hash,
                "nodes": self.nodes, "output": self.output}


def is_legacy(record: Mapping[str, Any]) -> bool:
    """True for a record written without task identity (no ``task_versions_hash``)."""
    return LEGACY_MARKER not in record


def _fmt(value: Any) -> str:
    return repr(value)


def differences(recorded: Mapping[str, Any], current: RunIdentity) -> list[tuple[str, str]]:
    """What changed between a recorded identity and the current one, as ``(what, sentence)``
    pairs in a stable order: ``revision``, then ``input``, then ``task_versions``. Each change is
    named separately; a moved task names the task and both versions. A legacy record is compared
    on what it has (revision and input hash)."""
    out: list[tuple[str, str]] = []
    rev = recorded.get("revision")
    if rev != current.revision:
        out.append(("revision", f"the document revision changed from {_fmt(rev)} to {_fmt(current.revision)}"))
    ih = recorded.get("input_hash")
    if ih != current.input_hash:
        out.append(("input", f"the input hash changed from {ih} to {current.input_hash}"))
    if is_legacy(recorded):
        return out
    before = recorded.get("task_versions")
    if not isinstance(before, Mapping):
        before = {}
    moved = []
    for name in sorted(set(before) | set(current.task_versions)):
        if name not in current.task_versions:
            moved.append(f"task {name!r} (version {_fmt(before[name])}) is no longer used")
        elif name not in before:
            moved.append(f"task {name!r} was added at version {_fmt(current.task_versions[name])}")
        elif before[name] != current.task_versions[name]:
            moved.append(f"{name!r} moved from version {_fmt(before[name])} to "
                         f"{_fmt(current.task_versions[name])}")
    for sentence in moved:
        out.append(("task_versions", sentence))
    if not moved and recorded.get(LEGACY_MARKER) != current.task_versions_hash:
        out.append(("task_versions", f"the task versions hash changed from {recorded.get(LEGACY_MARKER)} "
                    f"to {current.task_versions_hash} although the recorded map is equal"))
    return out


def refuse(job_id: str, flow: str, changes: list[tuple[str, str]], *, legacy_values: list[str] | None = None,
           unknown_nodes: list[str] | None = None) -> ResumeMismatch:
    """The :class:`~tenure.errors.ResumeMismatch` (TN2069) for a resume that must not proceed.

    ``details``: ``job_id``, ``flow``, ``changed`` (the kinds of change, in order, from
    ``revision``/``input``/``task_versions``/``legacy``/``unknown_nodes``) and ``changes`` (the
    sentences)."""
    sentences = [s for _, s in changes]
    kinds = [k for k, _ in changes]
    if legacy_values:
        kinds.append("legacy")
        sentences.append(
            "the run was checkpointed without task identity (no task_versions_hash) and has recorded "
            f"values for {', '.join(repr(n) for n in legacy_values)}: the implementation that produced "
            "them cannot be confirmed, so they are not reused")
    if unknown_nodes:
        kinds.append("unknown_nodes")
        sentences.append(f"recorded values for {', '.join(repr(n) for n in unknown_nodes)} belong to no "
                         "node of this document")
    message = (f"cannot resume run {job_id!r} of flow {flow!r}: " + "; ".join(sentences) +
               ". Start it again as a new run (tenure.flow.restart), or deploy the code that wrote "
               "its checkpoints")
    return ResumeMismatch(message, job_id=job_id, flow=flow, changed=list(dict.fromkeys(kinds)),
                          changes=sentences)
