"""docs/spec.md 6.1 names the worker's options as the public API spells them (docs/architecture.md,
"Units"): each is a field of :class:`tenure.WorkerConfig`, none a retired ``*_ms`` name."""

from __future__ import annotations

import dataclasses
import re

import tenure
from tests.docs_snippets import ROOT


def _rule_6_1() -> str:
    for line in (ROOT / "docs" / "spec.md").read_text().splitlines():
        if line.startswith("| 6.1 |"):
            return line
    raise AssertionError("docs/spec.md has no rule 6.1")


def test_spec_6_1_names_worker_options_that_worker_config_declares() -> None:
    options = re.search(r"options \(([^)]*)\)", _rule_6_1())
    assert options is not None, _rule_6_1()
    named = re.findall(r"`(\w+)`", options.group(1))
    assert len(named) >= 5, named
    fields = {f.name for f in dataclasses.fields(tenure.WorkerConfig)}
    missing = [n for n in named if n not in fields]
    assert missing == [], f"spec 6.1 names options WorkerConfig lacks: {missing}"
