"""The machine a run was measured on (numbers without it mean little)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from typing import Any


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _mem_total_mb() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def loadavg() -> list[float] | None:
    """The 1/5/15-minute load averages (other processes compete for the same cores)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5,
                             cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def describe() -> dict[str, Any]:
    """Cores, CPU, memory, OS, Python, and the tenure commit under test."""
    import tenure

    dirty = _git("status", "--porcelain", "--", "src")
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_mb": _mem_total_mb(),
        "os": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "python_executable": sys.executable,
        "tenure_version": getattr(tenure, "__version__", None),
        "tenure_commit": _git("rev-parse", "--short", "HEAD"),
        "tenure_src_dirty": bool(dirty) if dirty is not None else None,
        "loadavg_at_start": loadavg(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid``, every thread (Linux ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
