"""Where a SQLite claim's time goes: ``python -m bench.anatomy [--depth 20000]``.

Times the parts of the engine's own statements on a filled store, as CPU time of this thread
(``time.thread_time``), so other processes loading the host barely move them. Each variant runs
``--calls`` times per repetition inside one transaction that is rolled back (identical state for
every variant; no commit unless the variant is the commit), variants interleaved over
``--reps`` repetitions; the minimum and the median per call are reported.

* the claim's row selection alone (its ``WHERE id IN (...)`` sub-select) and its parts;
* the claim's write (its ``SET`` clause, ``UPDATE ... WHERE id = ?``) and the completion's write,
  with the indexes as migrated, with the partial indexes' ``IS NOT NULL`` term moved first, and
  with index sets dropped (on private copies of the file);
* what one WAL commit adds (autocommit vs one transaction).

Every statement is derived from ``tenure.engine.sqlite`` (the engine's ``_claim_sql`` and
``queries``) at run time, never copied. A part the current statements no longer have is skipped.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import tenure

from .experiments import _null_test_first
from .scenarios import fill


def _now() -> int:
    return time.time_ns() // 1_000_000


def _time(conn: Any, sql: str, params: Callable[[int], Any], calls: int, txn: bool = True) -> float:
    if txn:
        conn.execute("BEGIN IMMEDIATE")
    t0 = time.thread_time()
    for i in range(calls):
        conn.execute(sql, params(i)).fetchall()
    spent = time.thread_time() - t0
    if txn:
        conn.execute("ROLLBACK")
    return spent / calls * 1e6


def main(argv: list[str] | None = None) -> int:  # noqa: C901 - a report script, one branch per section
    p = argparse.ArgumentParser(prog="python -m bench.anatomy", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--depth", type=int, default=20_000, help="pending jobs in the store")
    p.add_argument("--reps", type=int, default=11)
    p.add_argument("--calls", type=int, default=200)
    args = p.parse_args(argv)

    from tenure.engine.sqlite import queries as Q
    from tenure.engine.sqlite.engine import SQLiteEngine
    from tenure.engine.sqlite.session import _claim_params, _claim_sql

    work = tempfile.mkdtemp(prefix="tenure-anatomy-")
    try:
        tpl = os.path.join(work, "template.db")
        with tenure.connect(f"sqlite:///{tpl}") as store:
            fill(store, args.depth)

        def copy(name: str, setup: list[str]) -> Any:
            path = os.path.join(work, f"{name}.db")
            shutil.copyfile(tpl, path)
            conn = SQLiteEngine(f"sqlite:///{path}")._connect()
            for stmt in setup:
                conn.execute(stmt)
            return conn

        base = copy("base", [])
        claim = _claim_sql(1, True, False)
        ids = [r[0] for r in base.execute("SELECT id FROM tenure_jobs LIMIT ?", (args.calls,))]
        if len(ids) < args.calls:
            raise SystemExit("--depth must be at least --calls")

        def claim_params(_: int) -> dict[str, Any]:
            return _claim_params(["noop"], ["default"], "anatomy", 30_000, _now(), 1)

        def by_id(i: int) -> dict[str, Any]:
            return {**claim_params(i), "the_id": ids[i]}

        rows: dict[str, tuple[Any, str, Callable[[int], Any], bool]] = {}
        rows["claim statement (one row)"] = (base, claim, claim_params, True)
        m = re.search(r"WHERE id IN \((.*)\)\s*RETURNING", claim, re.S)
        if m:
            rows["  its row selection (sub-select)"] = (base, m.group(1), claim_params, True)
        head = Q.CLAIM_QUEUE_HEAD.format(i=0, kind_filter=Q.KIND_FILTER, group_filter="",
                                         singleton_filter=Q.SINGLETON_FILTER)
        rows["    the queue head alone"] = (base, head, claim_params, True)
        rows["    the expired-lease branch alone"] = (
            base, Q.CLAIM_EXPIRED.format(kind_filter=Q.KIND_FILTER, group_filter=""), claim_params, True)
        s = re.search(r"(SET .*?)\s+WHERE id IN", claim, re.S)
        indexes = base.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND "
                               "tbl_name = 'tenure_jobs' AND sql IS NOT NULL").fetchall()
        partial = [(n, sql) for n, sql in indexes if " WHERE " in sql]
        reorder = []
        for name, sql in partial:
            head_sql, _, where = re.split(r"\b(WHERE)\b", sql, maxsplit=1)
            new = _null_test_first(where.strip())
            if new != where.strip():
                reorder += [f"DROP INDEX {name}", f"{head_sql} WHERE {new}"]
        hot = ("tenure_jobs_claim", "tenure_jobs_leased")
        index_sets = {
            f"{len(indexes)} indexes as migrated": base,
            "partial indexes, IS NOT NULL term first": copy("reordered", reorder) if reorder else None,
            "only the claim + leased indexes": copy("hot", [f"DROP INDEX {n}" for n, _ in indexes if n not in hot]),
            "no secondary index": copy("none", [f"DROP INDEX {n}" for n, _ in indexes]),
        }
        complete_write = ("UPDATE tenure_jobs SET state = 'done', lease_until = NULL, lease_owner = NULL, "
                          "updated_at = :now WHERE id = :the_id")
        if s:
            write = f"UPDATE tenure_jobs {s.group(1)} WHERE id = :the_id"
            for label, conn in index_sets.items():
                if conn is None:
                    continue
                rows[f"claim write, {label}"] = (conn, write, by_id, True)
                rows[f"complete write, {label}"] = (conn, complete_write, lambda i: {"now": _now(),
                                                                                    "the_id": ids[i]}, True)
            rows["claim write + its own WAL commit (autocommit)"] = (base, write, by_id, False)
        results: dict[str, list[float]] = {k: [] for k in rows}
        for _ in range(args.reps):
            for label, (conn, sql, params, txn) in rows.items():
                if not txn:  # autocommitted claim writes change the file: put the rows back afterwards
                    results[label].append(_time(conn, sql, params, args.calls, txn=False))
                    conn.execute("UPDATE tenure_jobs SET state = 'pending', attempts = 0, lease_generation = 0, "
                                 "lease_token = NULL, lease_until = NULL, lease_owner = NULL "
                                 "WHERE state = 'leased'")
                else:
                    results[label].append(_time(conn, sql, params, args.calls))
        width = max(len(k) for k in rows)
        print(f"SQLite {base.execute('select sqlite_version()').fetchone()[0]}, {args.depth:,} pending jobs, "
              f"CPU us per call (min / median of {args.reps} x {args.calls}):")
        for label, vals in results.items():
            print(f"  {label.ljust(width)}  {min(vals):7.1f} / {statistics.median(vals):7.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
