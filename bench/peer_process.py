"""A peer system's worker process, as ``python -m bench.peers`` runs one for a measurement: started
with pipes for its commands and answers, its standard error kept in a file, and torn down the
same way whatever happened (the drain of :mod:`bench.peer_measure`, the latency run of
:mod:`bench.peers_calls`).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any


@contextmanager
def worker_process(system: Any, argv: list[str], env: dict[str, str] | None,
                   cwd: str) -> Iterator[tuple[subprocess.Popen[str], IO[str]]]:
    """Start ``argv`` (text pipes on its stdin and stdout, its stderr in a temporary file) and
    yield the process and that file. On leaving, however the block ends: a process still running
    is killed and reaped, the file is closed, and ``system``'s store is discarded."""
    stderr = tempfile.TemporaryFile("w+")
    proc: subprocess.Popen[str] | None = None
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                text=True, env=env, cwd=cwd)
        yield proc, stderr
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        stderr.close()
        system.discard()


def stderr_tail(stderr: IO[str], chars: int = 3000) -> str:
    """The last ``chars`` characters the process wrote to ``stderr`` (read from its start)."""
    stderr.seek(0)
    return stderr.read()[-chars:]
