"""Order: jobs enqueued without an id get time-ordered ids (UUIDv7, RFC 9562), and
listings walk newest first: ``page(order="newest")`` (the same keyset, down the primary key),
``tenure jobs list`` and the dashboard by default. ``page()``'s default stays docs/spec.md's
ascending id order (spec 10.2, pinned by tests/conformance/test_10_admin.py)."""

from __future__ import annotations

import uuid

import pytest


def test_minted_ids_are_uuid7_and_time_ordered(any_store):
    jobs = any_store.jobs
    ids = [jobs.enqueue("k") for _ in range(50)]
    ids += jobs.enqueue_many([{"kind": "k"} for _ in range(50)])
    assert all(uuid.UUID(i).version == 7 for i in ids)
    assert ids == sorted(ids) and len(set(ids)) == 100
    with any_store.transaction() as tx:
        later = tx.jobs.enqueue("k")
    assert later > ids[-1]


def test_page_newest_first_keyset(any_store):
    jobs = any_store.jobs
    ids = [jobs.enqueue("k", tags=["t"] if n % 2 else None) for n in range(25)]
    seen, after = [], None
    while True:
        page = jobs.page(order="newest", limit=10, after=after)
        seen += [j.id for j in page.items]
        if page.next_after is None:
            break
        assert page.next_after == page.items[-1].id
        after = page.next_after
    assert seen == ids[::-1]
    assert [j.id for j in jobs.page(order="newest", tag="t").items] == [
        i for i in ids[::-1] if ids.index(i) % 2
    ]
    assert [j.id for j in jobs.page().items] == ids  # the default: ascending (spec 10.2)
    assert [j.id for j in jobs.page(order="oldest", limit=3).items] == ids[:3]


@pytest.mark.parametrize(
    ("order", "exc", "code"), [("latest", ValueError, "TN1001"), (1, TypeError, "TN1002")]
)
def test_bad_order_refused(any_store, order, exc, code):
    with pytest.raises(exc) as info:
        any_store.jobs.page(order=order)
    assert info.value.code == code


def test_cli_and_dashboard_list_newest_first(cli, engine_url):
    ids = [cli("enqueue", "k", "--json").json()["id"] for _ in range(3)]
    assert [j["id"] for j in cli("jobs", "list", "--json").json()["items"]] == ids[::-1]
    assert [j["id"] for j in cli("jobs", "list", "--order", "oldest", "--json").json()["items"]] == ids
    from starlette.testclient import TestClient

    import tenure
    from tenure.dashboard import create_app

    store = tenure.connect(engine_url)
    try:
        with TestClient(create_app(store), base_url="http://localhost") as client:
            assert [j["id"] for j in client.get("/api/jobs").json()["items"]] == ids[::-1]
    finally:
        store.close()


def test_minted_ids_increase_within_a_millisecond_and_when_the_clock_steps_back(monkeypatch):
    from tenure import ids

    # The generator remembers the last id it minted; restore it after the test, or every later
    # id in this pytest process would be minted after this fake 2027 millisecond (counter-like
    # random parts, and a test faking the clock near that date would see ids going backwards).
    monkeypatch.setattr(ids, "_last", ids._last)
    now = [1_800_000_000_000 * 1_000_000]
    monkeypatch.setattr(ids.time, "time_ns", lambda: now[0])
    first = ids.new_job_ids(5_000)  # one millisecond: 5 000 ids
    now[0] -= 60_000 * 1_000_000  # the clock steps back a minute
    later = [ids.new_job_id() for _ in range(10)]  # one at a time (its own path, not a batch of one)
    now[0] += 120_000 * 1_000_000  # a minute past the first millisecond: a fresh one is of its own ms
    fresh = ids.new_job_id()
    assert uuid.UUID(fresh).int >> 80 == 1_800_000_060_000
    minted = first + later + [fresh] + ids.new_job_ids(3)
    assert minted == sorted(minted) and len(set(minted)) == len(minted)
    parsed = [uuid.UUID(i) for i in minted]
    assert {(u.version, u.variant) for u in parsed} == {(7, uuid.RFC_4122)}
    assert parsed[0].int >> 80 == 1_800_000_000_000  # the 48-bit millisecond field
