"""Profile a worker draining no-op jobs: ``python -m bench.profile [--engine sqlite] [--gil]``.

The worker runs in its own process (``python -m bench.child drain``) under ``py-spy record``
(``pip install py-spy``); the raw samples are kept and summarised here: samples per thread, the
functions that are on CPU themselves ("self"), and the tenure/sqlite3/psycopg functions with
everything they call ("inclusive"). ``--gil`` keeps only samples of the thread holding the GIL:
with many worker threads the GIL is the shared resource, so this shows where the Python time of
a job goes. Without it, a thread running SQLite's C code (which releases the GIL) counts too.
The drain is verified like every bench run (every job done exactly once).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from .experiments import applied
from .scenarios import Prepared
from .targets import make_target, verify_store

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")
_THREAD = re.compile(r"^thread \(\w+\)(?:: (?P<name>.*))?$")


def _short(frame: str) -> str:
    """``func (path/to/file.py:12)`` -> ``func (file.py)`` (aggregate by function, not line)."""
    m = _FRAME.match(frame)
    if not m:
        return frame
    path = m.group("file")
    for marker in ("/src/", "/site-packages/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{m.group('func')} ({os.path.basename(path) if path.startswith('/') else path})"


def _thread_group(name: str | None) -> str:
    if not name:
        return "main/unnamed"
    return re.sub(r"-\d+$", "-*", name)


def summarise(raw_path: str, top: int = 25) -> dict[str, Any]:
    """Self and inclusive sample counts from py-spy's raw (collapsed-stack) output."""
    self_c: collections.Counter[str] = collections.Counter()
    incl_c: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    with open(raw_path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            n = int(count)
            frames = stack.split(";")
            m = _THREAD.match(frames[0])
            if m:
                threads[_thread_group(m.group("name"))] += n
                frames = frames[1:]
            total += n
            if not frames:
                continue
            shorts = [_short(fr) for fr in frames]
            self_c[shorts[-1]] += n
            for fr in set(shorts):
                incl_c[fr] += n

    def pct(c: int) -> float:
        return round(100 * c / total, 1) if total else 0.0

    ours = [(f, c) for f, c in incl_c.most_common() if any(k in f for k in (".py)",))
            and not f.startswith(("_bootstrap", "Thread.", "<module>", "_run_code", "_run_module"))]
    return {
        "samples": total,
        "threads": [{"thread": t, "samples": c, "pct": pct(c)} for t, c in threads.most_common()],
        "self": [{"function": f, "samples": c, "pct": pct(c)} for f, c in self_c.most_common(top)],
        "inclusive": [{"function": f, "samples": c, "pct": pct(c)} for f, c in ours[:top]],
    }


def render(summary: dict[str, Any], title: str, us_per_sample: float) -> str:
    """The summary as text; ``us/job`` is samples x sampling interval / jobs."""
    def row(r: dict[str, Any]) -> str:
        return f"  {r['pct']:5.1f}%  {r['samples'] * us_per_sample:7.1f} us/job  {r.get('function') or r['thread']}"

    lines = [f"## {title}", f"{summary['samples']} samples ({summary['samples'] * us_per_sample:.0f} us/job)", "",
             "threads:"]
    lines += [row(t) for t in summary["threads"]]
    lines += ["", "self (on CPU in this function):"]
    lines += [row(r) for r in summary["self"]]
    lines += ["", "inclusive (this function and what it calls):"]
    lines += [row(r) for r in summary["inclusive"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", default="sqlite", choices=("sqlite", "postgres"))
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    p.add_argument("--gil", action="store_true", help="only samples holding the GIL")
    p.add_argument("--native", action="store_true", help="include C frames (SQLite's own functions)")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--out", help="directory for the raw samples and the summary (default: a temp dir)")
    p.add_argument("--pg-url")
    p.add_argument("--patch", default="", help="comma-separated bench.experiments patches to profile with")
    args = p.parse_args(argv)
    patches = [n for n in args.patch.split(",") if n]
    if shutil.which("py-spy") is None:
        print("py-spy is not installed (pip install py-spy): nothing profiled", file=sys.stderr)
        return 2
    out_dir = args.out or tempfile.mkdtemp(prefix="tenure-profile-")
    os.makedirs(out_dir, exist_ok=True)
    target = make_target(args.engine, pg_url=args.pg_url)
    prepared = Prepared(target)
    suffix = ("-gil" if args.gil else "") + ("-" + "+".join(patches) if patches else "")
    raw = os.path.join(out_dir, f"{args.engine}-c{args.concurrency}{suffix}.txt")
    with applied(patches):  # the store is made (migrated) and the drain process runs with them
        return _profile(args, target, prepared, raw, out_dir, patches)


def _profile(args: Any, target: Any, prepared: Any, raw: str, out_dir: str, patches: list[str]) -> int:
    try:
        url, ids = prepared.store("profile", args.jobs)
        result_path = os.path.join(out_dir, "drain-result.json")
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        child = subprocess.Popen([sys.executable, "-m", "bench.child", "drain", url, str(args.jobs),
                                  str(args.concurrency), result_path], cwd=here, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert child.stdout is not None and child.stdin is not None
        if child.stdout.readline().strip() != "ready":
            child.kill()
            print("the drain process did not start", file=sys.stderr)
            return 1
        cmd = ["py-spy", "record", "--format", "raw", "--threads", "-r", str(args.rate), "-o", raw,
               "--pid", str(child.pid)]
        cmd += ["--gil"] if args.gil else []
        cmd += ["--native"] if args.native else []
        spy = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # py-spy attaches
        child.stdin.write("go\n")
        child.stdin.flush()
        child.wait(timeout=1800)
        _, err = spy.communicate(timeout=60)
        if child.returncode != 0 or not os.path.exists(raw):
            print(err[-3000:], file=sys.stderr)
            return 1
        with open(result_path) as f:
            res = json.load(f)
        with target.connect(url) as conn:
            ver = verify_store(conn, done=args.jobs, handled_ids=res.pop("ids"), enqueued_ids=ids)
        target.discard(url)
    finally:
        prepared.close()
        target.close()
    summary = summarise(raw, args.top)
    title = (f"{args.engine} worker drain, {args.jobs} no-op jobs, concurrency {args.concurrency}"
             f"{', GIL-holding samples only' if args.gil else ''}"
             f"{', patched: ' + '+'.join(patches) if patches else ''}: {res['jobs_per_s']:.0f} jobs/s "
             f"under the profiler, {res['cpu_us_per_job']:.0f} us CPU/job")
    text = render(summary, title, 1e6 / args.rate / args.jobs)
    print(text)
    print(f"\nexactly-once verification: {'passed' if ver.ok else 'FAILED ' + '; '.join(ver.failures)}")
    with open(os.path.join(out_dir, os.path.basename(raw).replace(".txt", ".md")), "w") as f:
        f.write(text + "\n")
    with open(raw.replace(".txt", ".json"), "w") as f:
        json.dump({"title": title, "drain": res, "summary": summary, "verified": ver.as_dict()}, f, indent=2)
    print(f"raw samples: {raw}")
    return 0 if ver.ok else 1


if __name__ == "__main__":
    sys.exit(main())
