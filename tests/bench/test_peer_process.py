"""bench.peer_process: a peer's worker process is torn down the same way however its block ends."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from bench.peer_process import stderr_tail, worker_process


class _System:
    def __init__(self) -> None:
        self.discarded = 0

    def discard(self) -> None:
        self.discarded += 1


def test_a_failing_block_kills_the_process_closes_its_stderr_and_discards_the_store(tmp_path: Path) -> None:
    system = _System()
    code = "import sys; sys.stderr.write('went wrong'); sys.stderr.flush(); print('ready', flush=True); sys.stdin.read()"
    with pytest.raises(RuntimeError, match="went wrong"):
        with worker_process(system, [sys.executable, "-c", code], None, str(tmp_path)) as (proc, stderr):
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            raise RuntimeError(stderr_tail(stderr))
    assert proc.returncode is not None  # killed and reaped: no process left behind
    assert stderr.closed
    assert system.discarded == 1


def test_a_process_that_cannot_start_still_discards_the_store(tmp_path: Path) -> None:
    system = _System()
    with pytest.raises(OSError):
        with worker_process(system, [str(tmp_path / "no-such-program")], None, str(tmp_path)):
            pass
    assert system.discarded == 1
