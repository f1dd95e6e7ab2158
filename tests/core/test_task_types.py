"""Typed tasks: a type checker sees a task's parameters and its result. mypy runs over an
example module: the correct calls check clean (with ``assert_type`` on what each answers), and every
line marked ``# E: <what mypy says>`` in the wrong module is an error, and nothing else is."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

COMMON = """\
from typing import assert_type

import tenure
from tenure import JobContext
from tenure.app import Handle

app = tenure.App("sqlite:///types.db")


@app.task(queue="emails", max_attempts=5)
def send_email(to: str, subject: str = "hi") -> dict[str, str]:
    return {"sent": to}


@app.task
def resize(job: JobContext, image: int, *, width: int = 100) -> int:
    return image * width


@app.task()
async def fetch(url: str) -> bytes:
    return url.encode()
"""

GOOD = COMMON + """
h = send_email.enqueue("a@example.com", subject="x")
assert_type(h, Handle[dict[str, str]])
assert_type(h.result(timeout=1), dict[str, str])
assert_type(send_email("a@example.com"), dict[str, str])      # a direct call keeps the type
assert_type(send_email.with_options(delay=5).enqueue(to="b@example.com"), Handle[dict[str, str]])
assert_type(send_email.with_options(delay="10s", priority=2, conn=None).enqueue("b"), Handle[dict[str, str]])

assert_type(resize.enqueue(7, width=50).result(), int)         # the context is not an argument
assert_type(fetch.enqueue("https://example.com").result(), bytes)


async def later() -> None:
    assert_type(await send_email.enqueue_async("c@example.com"), Handle[dict[str, str]])
    assert_type(await fetch("https://example.com"), bytes)
    assert_type(await app.store.jobs.enqueue_async("k", {}, delay="5s", queue="q", conn=None), str | None)
"""

BAD = COMMON + """
send_email.enqueue(too="x")                  # E: Unexpected keyword argument "too"
send_email.enqueue(to=1)                     # E: Argument "to" to "enqueue" of "Task" has incompatible type "int"
send_email.enqueue()                         # E: Missing positional argument "to"
send_email("a", "b", "c")                    # E: Too many arguments
n: int = send_email.enqueue("a").result()    # E: Incompatible types in assignment
resize.enqueue("seven")                      # E: has incompatible type "str"; expected "int"
fetch.enqueue(b"x")                          # E: has incompatible type "bytes"; expected "str"
send_email.with_options(dealy=5)             # E: Unexpected keyword argument "dealy"
send_email.with_options(priority="high")     # E: has incompatible type "str"; expected "int"


async def wrong_async() -> None:
    await app.store.jobs.enqueue_async("k", priorty=1)  # E: Unexpected keyword argument "priorty"
    await app.store.jobs.enqueue_async("k", max_attempts="3")  # E: has incompatible type "str"
"""


def _mypy(tmp_path: Path) -> dict[str, list[tuple[int, str]]]:
    pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")
    for name, text in (("good_tasks.py", GOOD), ("bad_tasks.py", BAD)):
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["MYPYPATH"] = str(ROOT / "src")  # this checkout's tenure, not an installed one
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--strict", "--no-incremental",
         "--cache-dir", os.devnull, "--follow-imports", "silent", "good_tasks.py", "bad_tasks.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    errors: dict[str, list[tuple[int, str]]] = {"good_tasks.py": [], "bad_tasks.py": []}
    for line in proc.stdout.splitlines():
        m = re.match(r"(\w+\.py):(\d+): error: (.*)", line)
        if m:
            errors[m.group(1)].append((int(m.group(2)), m.group(3)))
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return errors


def test_a_type_checker_passes_the_correct_calls_and_flags_each_wrong_one(tmp_path):
    errors = _mypy(tmp_path)
    assert errors["good_tasks.py"] == [], errors["good_tasks.py"]
    expected = {n: line.split("# E: ", 1)[1] for n, line in enumerate(BAD.splitlines(), 1) if "# E: " in line}
    got: dict[int, list[str]] = {}
    for n, message in errors["bad_tasks.py"]:
        got.setdefault(n, []).append(message)
    assert set(got) == set(expected), f"expected errors on lines {sorted(expected)}, got {got}"
    for n, want in expected.items():
        assert any(want in message for message in got[n]), f"line {n}: wanted {want!r}, got {got[n]}"
