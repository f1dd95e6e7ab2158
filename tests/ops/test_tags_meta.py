"""Tags and meta (admin at scale): ``enqueue(..., tags=[...], meta={...})`` on every
enqueue path (``enqueue``, ``enqueue_many``, task options, ``tx.jobs``), ``Job.tags`` /
``Job.meta``, ``page(tag=...)``, the CLI's ``--tag`` and the dashboard's ``/api/jobs?tag=``; one
verdict per bad input on both engines (TN1001 / TN1002, naming the field)."""

from __future__ import annotations

import pytest

import tenure


def test_tags_and_meta_round_trip_and_filter(any_store):
    jobs = any_store.jobs
    a = jobs.enqueue("k", tags=["billing", "eu", "billing"], meta={"customer": 42, "note": "ä"})
    b = jobs.enqueue("k", tags=["eu"])
    c = jobs.enqueue("k")
    [d] = jobs.enqueue_many([{"kind": "k", "tags": ["billing"], "meta": {"batch": 7}}])
    with any_store.transaction() as tx:
        e = tx.jobs.enqueue("k", tags=["tx"], meta={"in": "tx"})
    got = jobs.get(a)
    assert got.tags == ["billing", "eu"] and got.meta == {"customer": 42, "note": "ä"}
    assert jobs.get(c).tags == [] and jobs.get(c).meta == {}
    assert jobs.get(d).meta == {"batch": 7} and jobs.get(e).tags == ["tx"]
    assert {j.id for j in jobs.page(tag="billing").items} == {a, d}
    assert {j.id for j in jobs.page(tag="eu").items} == {a, b}
    assert {j.id for j in jobs.page(tag="eu", state="pending", kind="k").items} == {a, b}
    assert jobs.page(tag="bill").items == []  # a whole tag, never a substring
    for item in jobs.page(tag="billing").items:
        assert item == jobs.get(item.id)


def test_task_options_carry_tags_and_meta(engine_url):
    app = tenure.App(engine_url)

    @app.task(name="t.tagged", tags=["nightly"], meta={"owner": "ops"})
    def tagged() -> None:
        return None

    try:
        handle = tagged.enqueue()
        job = handle.get()
        assert job.tags == ["nightly"] and job.meta == {"owner": "ops"}
        other = tagged.with_options(tags=["adhoc"]).enqueue().get()
        assert other.tags == ["adhoc"] and other.meta == {"owner": "ops"}
    finally:
        app.store.close()


@pytest.mark.parametrize(
    ("kwargs", "exc", "code", "field"),
    [
        ({"tags": "billing"}, TypeError, "TN1002", "tags"),
        ({"tags": [1]}, TypeError, "TN1002", "tags[0]"),
        ({"tags": [""]}, ValueError, "TN1001", "tags[0]"),
        ({"tags": ["x" * 65]}, ValueError, "TN1001", "tags[0]"),
        ({"tags": ["a\x00b"]}, ValueError, "TN1001", "tags[0]"),
        ({"tags": [f"t{i}" for i in range(21)]}, ValueError, "TN1001", "tags"),
        ({"meta": ["not", "an", "object"]}, TypeError, "TN1002", "meta"),
        ({"meta": {1: "int key"}}, TypeError, "TN1002", "meta"),
        ({"meta": {"big": "x" * 5000}}, ValueError, "TN1001", "meta"),
        ({"meta": {"f": float("nan")}}, TypeError, "TN1002", "meta"),
    ],
)
def test_bad_tags_and_meta_one_verdict(any_store, kwargs, exc, code, field):
    for enqueue in (
        lambda: any_store.jobs.enqueue("k", **kwargs),
        lambda: any_store.jobs.enqueue_many([{"kind": "k", **kwargs}]),
    ):
        with pytest.raises(exc) as info:
            enqueue()
        assert info.value.code == code and field in str(info.value)
    assert any_store.jobs.counts()["pending"] == 0


def test_page_tag_filter_validated(any_store):
    with pytest.raises(TypeError) as info:
        any_store.jobs.page(tag=3)
    assert info.value.code == "TN1002"
    with pytest.raises(ValueError) as info:
        any_store.jobs.page(tag="")
    assert info.value.code == "TN1001"


def test_cli_enqueue_tag_list_and_show(cli, engine_url):
    job_id = cli(
        "enqueue", "k", "--tag", "billing", "--tag", "eu", "--meta", '{"customer": 42}', "--json"
    ).json()["id"]
    cli("enqueue", "k", "--tag", "other")
    listed = cli("jobs", "list", "--tag", "billing", "--json").json()["items"]
    assert [j["id"] for j in listed] == [job_id]
    assert listed[0]["tags"] == ["billing", "eu"] and listed[0]["meta"] == {"customer": 42}
    shown = cli("jobs", "show", job_id).out
    assert "billing, eu" in shown and '"customer": 42' in shown


def test_dashboard_jobs_filter_by_tag(any_store):
    from starlette.testclient import TestClient

    from tenure.dashboard import create_app

    a = any_store.jobs.enqueue("k", tags=["vip"])
    any_store.jobs.enqueue("k", tags=["other"])
    with TestClient(create_app(any_store), base_url="http://localhost") as client:
        items = client.get("/api/jobs", params={"tag": "vip"}).json()["items"]
    assert [(j["id"], j["tags"]) for j in items] == [(a, ["vip"])]
