"""docs/workflows.md's durable-steps example runs as printed and prints what the doc says."""

from __future__ import annotations

from tests.docs_snippets import run_section, section_blocks

DOC = "workflows.md"
HEADING = "## Sleeping, signals and children (durable steps)"
PRINTED = ["{'reserved': ['a:ok', 'b:ok', 'c:ok'], 'approved_by': 'ann'}", "reminded ann 0"]


def test_the_durable_steps_example_runs_and_prints_what_the_doc_says():
    run = run_section(DOC, HEADING)
    (example,) = [b for b in section_blocks(DOC, HEADING) if b.lang == "python"]
    assert run.printed(example.line).splitlines() == PRINTED
    assert all(f"# {line}" in example.code for line in PRINTED)  # its comments say what it prints


DISTRIBUTED = "## Distributed runs: each node its own job"
DISTRIBUTED_PRINTED = [
    "{'left': 14, 'right': 21, 'run': 'order-7'}",
    "[('order-7~node:join.1', {'left': 14, 'right': 21, 'run': 'order-7'}), ('order-7~node:left.1', 14), "
    "('order-7~node:right.1', 21), ('order-7~node:start.1', 7)]",
]


def test_the_distributed_example_runs_and_prints_what_the_doc_says():
    run = run_section(DOC, DISTRIBUTED)
    (example,) = [b for b in section_blocks(DOC, DISTRIBUTED) if b.lang == "python"]
    assert run.printed(example.line).splitlines() == DISTRIBUTED_PRINTED
    assert all(f"# {line}" in example.code for line in DISTRIBUTED_PRINTED)
