"""``tenure queues create/update/show`` set and show rate limits, fairness and strict order, through the real console script on both engines, checked against the public API."""

from __future__ import annotations

import tenure


def test_queues_create_update_and_show_rate_limits(cli, engine_url):
    made = cli("queues", "create", "api", "--rate-limit", "100/s", "--group-rate-limit", "5/min",
               "--fairness", "round_robin", "--policy", "strict_fifo", "--json").json()
    assert made["record"]["rate_limit"] == "100/s" and made["record"]["policy"] == "strict_fifo"
    store = tenure.connect(engine_url)
    try:
        q = store.queues.get("api")
        assert (q.rate_limit, q.group_rate_limit, q.fairness) == ("100/s", "5/min", "round_robin")
        store.jobs.enqueue("k", 1, queue="api", group_key="g1")
        assert store.jobs.claim("k", owner="t") is not None
    finally:
        store.close()
    assert "updated" in cli("queues", "update", "api", "--rate-limit", "6000/min", "--fairness", "none").out
    shown = cli("queues", "show", "api", "--json").json()
    assert shown["queue"]["rate_limit"] == "6000/min" and shown["queue"]["fairness"] is None
    assert [(w["group_key"], w["in_window"], w["limit"]) for w in shown["windows"]] == [(None, 1, 6000), ("g1", 1, 5)]
    text = cli("queues", "show", "api").out
    assert "6000/min" in text and "group g1" in text
    assert "rate" in cli("queues", "list").out.lower()
    weighted = cli("queues", "update", "api", "--group-weight", "gold=3", "--group-weight", "silver=2", "--json").json()
    assert weighted["record"]["group_weights"] == {"gold": 3, "silver": 2}
    assert cli("queues", "update", "api", "--group-weight", "none", "--json").json()["record"]["group_weights"] is None
    assert "TN1001" in cli("queues", "update", "api", "--group-weight", "gold=0", expect=2).err
    bad = cli("queues", "update", "api", "--rate-limit", "fast", expect=1)
    assert "TN3004" in bad.err
    missing = cli("queues", "update", "nope", "--rate-limit", "1/s", expect=1)
    assert "TN3001" in missing.err
