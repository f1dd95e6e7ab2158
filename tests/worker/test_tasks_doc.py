"""Every snippet of docs/tasks.md runs as printed (through tests/docs_snippets.py: the python blocks in
order in one namespace, a block whose first line is ``# NAME.py`` saved to that file, the shell
block through bash with this checkout's ``tenure`` script), and prints what the page says."""

from __future__ import annotations

import json

import tenure
from tests.docs_snippets import blocks, run_page

PAGE = "docs/tasks.md"


def test_every_snippet_of_docs_tasks_runs():
    python = [b for b in blocks(PAGE) if b.lang == "python"]
    shell = [b for b in blocks(PAGE) if b.lang == "shell"]
    assert len(python) == 9 and len(shell) == 1
    run = run_page(PAGE)
    assert run.failure() is None, run.failure()
    printed = "".join(r.stdout for r in run.runs if r.lang == "python")
    assert "[TN1002] task 'mail.send' has no parameter 'too' (did you mean 'to'?)" in printed
    assert "sent to ops@example.com: hi" in printed
    assert "'job' is the job context" in printed and "video 7, attempt 1" in printed
    assert "['00000000-0000-0000-0000-000000000007', '9.98', 'pro', '2026-12-03T00:00:00+00:00']" in printed
    assert "UUID 9.99 PRO 2026" in printed
    assert "'total': [999, 'EUR']}" in printed and "#42 19.98 EUR 2026-12-31" in printed  # dataclass, registered
    assert "TN1002 inv\n" in printed
    assert "[]\n['proj_tasks']\n['proj.hello']\n" in printed  # autodiscovery

    sh = next(r for r in run.runs if r.lang == "shell")
    assert "refused, exit status 2" in sh.stdout
    assert "[TN1002] task 'mail.send' has no parameter 'too' (did you mean 'to'?)" in sh.stderr
    store = tenure.connect(f"sqlite:///{run.directory}/tasks-demo.db")
    try:
        pending = sorted(json.dumps(j.payload) for j in store.jobs.page(state="pending").items)
    finally:
        store.close()
    assert pending == [
        json.dumps({"args": ["ops@example.com"], "kwargs": {"subject": "hi"}}),
        json.dumps({"args": [], "kwargs": {"to": "ops@example.com", "subject": "hi"}}),
    ]
