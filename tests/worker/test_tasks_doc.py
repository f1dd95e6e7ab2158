"""Every snippet of docs/tasks.md runs as printed: the python blocks in order in one namespace (a
block whose first line is ``# NAME.py`` is written to that file, importable, as the reader would
save it), and the shell block through bash with the installed ``tenure`` script."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "tasks.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_every_snippet_of_docs_tasks_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "mailapp", raising=False)
    python, shell = _blocks("python"), _blocks("shell")
    assert len(python) == 4 and len(shell) == 1
    namespace: dict = {}
    try:
        for n, block in enumerate(python, 1):
            first = block.splitlines()[0]
            if re.fullmatch(r"# \w+\.py", first):
                (tmp_path / first[2:]).write_text(block, encoding="utf-8")
                continue
            exec(compile(block, f"docs/tasks.md[python {n}]", "exec"), namespace)
        printed = capsys.readouterr().out
        assert "[TN1002] task 'mail.send' has no parameter 'too' (did you mean 'to'?)" in printed
        assert "sent to ops@example.com: hi" in printed
        assert "'job' is the job context" in printed and "video 7, attempt 1" in printed
        assert (
            "['00000000-0000-0000-0000-000000000007', '9.98', 'pro', '2026-12-03T00:00:00+00:00']" in printed
        )
        assert "UUID 9.99 PRO 2026" in printed
    finally:
        for app in (namespace.get("app"), namespace.get("ctx_app"), namespace.get("billing")):
            if app is not None:
                app.store.close()
        sys.modules.pop("mailapp", None)

    env = {k: v for k, v in os.environ.items() if not k.startswith("TENURE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["TENURE_LOG_LEVEL"] = "WARNING"
    proc = subprocess.run(
        ["bash", "-e", "-c", shell[0]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "refused, exit status 2" in proc.stdout
    assert "[TN1002] task 'mail.send' has no parameter 'too' (did you mean 'to'?)" in proc.stderr
    import tenure

    store = tenure.connect("sqlite:///tasks-demo.db")
    try:
        pending = sorted(json.dumps(j.payload) for j in store.jobs.page(state="pending").items)
    finally:
        store.close()
    assert pending == [
        json.dumps({"args": ["ops@example.com"], "kwargs": {"subject": "hi"}}),
        json.dumps({"args": [], "kwargs": {"to": "ops@example.com", "subject": "hi"}}),
    ]
