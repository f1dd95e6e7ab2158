"""What a per-group rate limit costs the claim: ``python -m bench.rate_limit [--url URL]
[--groups 10000] [--free 500] [--claims 300]``.

Two queues hold the same jobs: one pending job for each of ``--groups`` group keys, in random
order. In ``limited`` (``group_rate_limit="1/h"``) every group but ``--free`` of them has already
started a job this hour, so its window is closed: a claim must skip those groups' jobs (one probe
of the window row each, about 20 of them ahead of each free one here) to find a free group's job,
then record the start in that group's window. ``plain`` has no limit. Each sample is one
``job_claim`` of one job from one queue, timed inside a transaction that is then rolled back, so
every sample sees the same state; samples alternate between the queues. It prints the median of
each and their ratio (the issue's bar: within 2).

Nothing is written but the two queues of a fresh store (a temporary SQLite file by default; with
``--url`` a PostgreSQL database whose tenure tables are emptied first).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

import tenure


class _Rollback(Exception):
    """Raised to roll a timed claim back."""


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def fill(store: tenure.Store, groups: int, free: int, seed: int = 7) -> list[str]:
    """The two queues, and the windows of all but ``free`` groups closed the honest way (one
    started job each, then done). Answers the closed groups."""
    if store.dialect == "postgres":
        with store._session() as s:
            for table in ("tenure_rate_windows", "tenure_checkpoints", "tenure_jobs", "tenure_queues"):
                s.execute(f"DELETE FROM {table}")
    store.queues.create("limited", group_rate_limit="1/h")
    store.queues.create("plain")
    keys = [f"tenant-{i:05d}" for i in range(groups)]
    closed = keys[free:]
    store.jobs.enqueue_many([{"kind": "warm", "payload": k, "queue": "limited", "group_key": k} for k in closed])
    while True:
        got = store.jobs.claim_many("warm", owner="bench", limit=1_000, queues="limited")
        if not got:
            break
        store.jobs.complete_many([(c.lease, None) for c in got])
    order = keys[:]
    random.Random(seed).shuffle(order)
    for queue in ("limited", "plain"):
        store.jobs.enqueue_many([{"kind": "k", "payload": k, "queue": queue, "group_key": k} for k in order])
    return closed


def run(url: str, groups: int, free: int, claims: int) -> dict[str, float]:
    """Fill, then time ``claims`` rolled-back claims from each queue; answers the medians (ms)
    and their ratio."""
    store = tenure.connect(url)
    try:
        store.jobs  # noqa: B018 - migrate
        closed = set(fill(store, groups, free))
        times: dict[str, list[float]] = {"limited": [], "plain": []}
        for _ in range(claims):
            for queue in ("limited", "plain"):
                try:
                    with store._transaction_session() as s:
                        t0 = time.perf_counter()
                        rows = s.job_claim(kinds=["k"], queues=[queue], owner="bench", lease_ms=30_000, now=None,
                                           limit=1)
                        times[queue].append(time.perf_counter() - t0)
                        assert len(rows) == 1, f"{queue}: nothing claimable"
                        assert queue == "plain" or rows[0][18] not in closed, "a closed group was claimed"
                        raise _Rollback
                except _Rollback:
                    pass
        out = {"limited_ms": _median_ms(times["limited"]), "plain_ms": _median_ms(times["plain"])}
        out["ratio"] = out["limited_ms"] / out["plain_ms"]
        return out
    finally:
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=None, help="a PostgreSQL URL (default: a temporary SQLite file)")
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--free", type=int, default=500, help="groups whose window is open")
    ap.add_argument("--claims", type=int, default=300)
    args = ap.parse_args()
    url = args.url or f"sqlite:///{os.path.join(tempfile.mkdtemp(), 'rate.db')}"
    r = run(url, args.groups, args.free, args.claims)
    print(f"{url.split(':')[0]}: {args.groups} groups, {args.groups - args.free} at their rate limit: "
          f"claim {r['limited_ms']:.3f} ms (limited) vs {r['plain_ms']:.3f} ms (no limit): "
          f"ratio {r['ratio']:.2f} (bar: 2.0)")


if __name__ == "__main__":
    main()
