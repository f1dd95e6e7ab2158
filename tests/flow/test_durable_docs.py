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
