"""docs/workflows.md's durable-steps example runs as printed and prints what the doc says."""

from __future__ import annotations

from tests.docs_snippets import run_section, section_snippets

HEADING = "## Sleeping, signals and children (durable steps)"


def test_the_durable_steps_example_runs_and_prints_what_the_doc_says(capsys):
    run_section("workflows.md", HEADING)
    printed = capsys.readouterr().out.splitlines()
    promised = [line[2:] for line in section_snippets("workflows.md", HEADING)[0].splitlines()
                if line.startswith("# ")]
    assert printed == promised == ["{'reserved': ['a:ok', 'b:ok', 'c:ok'], 'approved_by': 'ann'}",
                                   "reminded ann 0"]
