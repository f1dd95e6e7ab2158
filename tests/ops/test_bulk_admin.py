"""Admin at scale: ``jobs.delete(id)`` and cancel / requeue / delete BY FILTER with a
dry-run count, on both engines. Each filtered operation touches exactly the rows a model of the
rules picks (and nothing else), and its dry run counts exactly as many."""

from __future__ import annotations

import pytest

import tenure

DAY = 86_400_000


@pytest.fixture
def population(any_store, clock):
    jobs = any_store.jobs
    made = {}
    # Build deterministically: one claim per job, by explicit per-job queues so claim picks it.
    clock.set(1_700_000_000_000)
    for i, (kind, queue, tags) in enumerate(
        [("a", "q1", ["x"]), ("b", "q1", []), ("a", "q2", ["x", "y"]), ("b", "q2", ["y"])]
    ):
        if i == 2:
            clock.advance(3 * DAY)  # groups 2 and 3 are younger than 2 days at the end
        for state in ("pending", "failed", "dead", "cancelled", "done", "live", "expired"):
            jid = f"{kind}-{queue}-{i}-{state}"
            jobs.enqueue(
                kind,
                queue=f"{queue}.{jid}",
                tags=tags or None,
                id=jid,
                max_attempts=1 if state == "dead" else 5,
            )
            made[jid] = {
                "kind": kind,
                "queue": f"{queue}.{jid}",
                "group": queue,
                "tags": tags,
                "state": state,
                "created": clock(),
            }
    for jid, info in made.items():
        state = info["state"]
        if state == "pending":
            continue
        c = jobs.claim(
            info["kind"], queues=info["queue"], owner="t", lease_ms=1_000 if state == "expired" else 10 * DAY
        )
        assert c is not None and c.job.id == jid
        if state in ("failed", "dead"):
            jobs.fail(c.lease, "boom", backoff_base_ms=1)
        elif state == "cancelled":
            jobs.cancel(jid, c.lease)
        elif state == "done":
            jobs.complete(c.lease, 1)
    clock.advance(2_000)  # the 'expired' leases run out; 'live' ones hold for days
    for jid, info in made.items():
        want = {"live": "leased", "expired": "leased"}.get(info["state"], info["state"])
        assert jobs.get(jid).state == want, jid
    return made


def _snapshot(jobs):
    out, after = {}, None
    while True:
        page = jobs.page(after=after, limit=500)
        out.update({j.id: j for j in page.items})
        if page.next_after is None:
            return out
        after = page.next_after


def _matches(info, filters, now):
    if "state" in filters:
        want = filters["state"]
        actual = {"live": "leased", "expired": "leased"}.get(info["state"], info["state"])
        if actual != want:
            return False
    if "kind" in filters and info["kind"] != filters["kind"]:
        return False
    if "queue" in filters and info["queue"] != filters["queue"]:
        return False
    if "tag" in filters and filters["tag"] not in info["tags"]:
        return False
    if "older_than" in filters and not info["created"] < now - filters["older_than"] * 1000:
        return False
    return True


ELIGIBLE = {
    "cancel": {"pending", "failed", "live", "expired"},
    "requeue": {"failed", "dead", "cancelled", "expired"},
    "delete": {"pending", "failed", "dead", "cancelled", "done", "expired"},
}

FILTERS = [
    {"kind": "a"},
    {"tag": "y"},
    {"state": "leased"},
    {"older_than": 2 * 86_400},
    {"kind": "b", "tag": "y"},
    {"state": "dead", "kind": "a"},
    {"queue": "q1.b-q1-1-failed"},  # each job has a queue of its own: the filter picks one row
    {"queue": "q2.a-q2-2-live", "kind": "a"},
    {"queue": "q2.a-q2-2-expired", "kind": "b"},  # matches nothing
]


@pytest.mark.parametrize("operation", ["cancel", "requeue", "delete"])
@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()))
def test_filtered_bulk_touches_exactly_the_matching_rows(any_store, clock, population, operation, filters):
    jobs = any_store.jobs
    now = clock()
    expected = {
        jid
        for jid, info in population.items()
        if _matches(info, filters, now) and info["state"] in ELIGIBLE[operation]
    }
    fn = getattr(jobs, f"{operation}_where")
    before = _snapshot(jobs)
    assert fn(**filters, dry_run=True) == len(expected)
    assert _snapshot(jobs) == before  # a dry run writes nothing
    assert fn(**filters) == len(expected)
    after = _snapshot(jobs)
    changed = {jid for jid in before if jid not in after or after[jid] != before[jid]}
    assert changed == expected
    for jid in expected:
        state = population[jid]["state"]
        if operation == "delete":
            assert jid not in after
        elif operation == "requeue":
            assert after[jid].state == "pending" and after[jid].attempts == before[jid].attempts
        elif state == "live":  # request_cancel semantics: flagged, still leased by its holder
            assert after[jid].state == "leased" and after[jid].cancel_requested_at is not None
            assert after[jid].lease_generation == before[jid].lease_generation
        else:
            assert after[jid].state == "cancelled"
    assert fn(**filters, dry_run=True) == (
        len([j for j in expected if population[j]["state"] == "live"]) if operation == "cancel" else 0
    )


def test_bulk_limit_and_batches(any_store, monkeypatch):
    from tenure import bulk_admin

    monkeypatch.setattr(bulk_admin, "BATCH", 7)
    jobs = any_store.jobs
    jobs.enqueue_many([{"kind": "k", "tags": ["t"]} for _ in range(30)] + [{"kind": "k"} for _ in range(5)])
    assert jobs.cancel_where(tag="t", dry_run=True) == 30
    assert jobs.cancel_where(tag="t", limit=10) == 10
    assert jobs.cancel_where(tag="t") == 20
    assert jobs.counts()["cancelled"] == 30 and jobs.counts()["pending"] == 5
    assert jobs.delete_where(state="cancelled") == 30
    assert jobs.counts()["cancelled"] == 0


def test_bulk_needs_a_filter_and_validates_it(any_store):
    jobs = any_store.jobs
    with pytest.raises(ValueError) as info:
        jobs.delete_where()
    assert info.value.code == "TN1001"
    with pytest.raises(ValueError) as info:
        jobs.cancel_where(state="bogus")
    assert info.value.code == "TN1001"
    with pytest.raises(TypeError) as info:
        jobs.requeue_where(kind=3)
    assert info.value.code == "TN1002"


def test_delete_one_job(any_store):
    jobs = any_store.jobs
    done = jobs.enqueue("k", id="done")
    c = jobs.claim("k", owner="t")
    jobs.complete(c.lease, 1)
    running = jobs.enqueue("k", id="running")
    held = jobs.claim("k", owner="t")
    assert held.job.id == running
    with pytest.raises(tenure.errors.JobRunning) as info:
        jobs.delete(running)
    assert info.value.code == "TN2091" and jobs.get(running).state == "leased"
    assert jobs.delete(done) is True and jobs.get(done) is None
    assert jobs.delete(done) is False
    jobs.complete(held.lease, 2)  # the attempt was never disturbed
    assert jobs.delete(running) is True


def test_cli_bulk_with_confirmation(cli, engine_url):
    for _ in range(3):
        cli("enqueue", "k", "--tag", "old")
    cli("enqueue", "k")
    out = cli("jobs", "cancel", "--tag", "old", "--dry-run").out
    assert "3 job(s)" in out
    refused = cli("jobs", "cancel", "--tag", "old", stdin="n\n", expect=None)
    assert refused.code != 0 and "3" in refused.out
    assert cli("jobs", "list", "--state", "cancelled", "--json").json()["items"] == []
    cli("jobs", "cancel", "--tag", "old", stdin="y\n")
    assert len(cli("jobs", "list", "--state", "cancelled", "--json").json()["items"]) == 3
    assert cli("jobs", "requeue", "--state", "cancelled", "--yes", "--json").json() == {"requeued": 3}
    assert cli("jobs", "delete", "--tag", "old", "--yes", "--json").json() == {"deleted": 3}
    assert len(cli("jobs", "list", "--json").json()["items"]) == 1
    cli("jobs", "delete", "--yes", expect=2)  # no filter: a usage error
