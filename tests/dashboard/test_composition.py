"""The job page's composition (docs/composition.md) over real HTTP, on both engines: the steps,
parents first, with states and parents; cancel and requeue the whole composition (CSRF-checked
like every action, through store.jobs.cancel_composition / requeue_composition)."""

from __future__ import annotations

import httpx

import tenure
from tenure.dashboard import create_app

from .test_http import _csrf


def test_job_page_shows_the_composition_and_acts_on_all_of_it(engine_url, serve):
    store = tenure.connect(engine_url)
    try:
        store.jobs.enqueue_many([{"kind": "a", "id": "a"}, {"kind": "b", "id": "b", "depends_on": ["a"]},
                                 {"kind": "c", "id": "c", "depends_on": ["a", "b"]}])
        store.jobs.enqueue("alone", id="z")
        srv = serve(create_app(store))
        base = srv.url()
        with httpx.Client() as client:
            steps = client.get(f"{base}/api/jobs/b").json()["composition"]
            assert [(s["id"], s["state"], s["parents"], s["waiting_on"]) for s in steps] == [
                ("a", "pending", [], 0), ("b", "pending", ["a"], 1), ("c", "pending", ["a", "b"], 2)]
            assert client.get(f"{base}/api/jobs/z").json()["composition"] == []
            assert client.get(f"{base}/jobs/b").status_code == 200
            ok = {"X-Tenure-CSRF": _csrf(client, base), "Origin": base}
            assert client.post(f"{base}/api/jobs/b/composition/cancel").status_code == 403  # no CSRF
            r = client.post(f"{base}/api/jobs/b/composition/cancel", headers=ok)
            assert r.status_code == 200 and r.json()["cancelled"] == 3
            assert [store.jobs.get(i).state for i in "abcz"] == ["cancelled"] * 3 + ["pending"]
            r = client.post(f"{base}/api/jobs/c/composition/requeue", headers=ok)
            assert r.status_code == 200 and r.json()["requeued"] == 3
            assert [store.jobs.get(i).waiting_on for i in "abc"] == [0, 1, 2]
            assert client.post(f"{base}/api/jobs/c/composition/explode", headers=ok).status_code == 404
    finally:
        store.close()
