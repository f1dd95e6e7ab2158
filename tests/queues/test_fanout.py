"""Fan-out: ``store.publish(event, payload)`` enqueues one job of kind ``event`` on every
queue subscribed with ``store.subscribe(event, queue)``, in one transaction."""

from __future__ import annotations

import pytest

from ._helpers import jobs_in, refused


def test_publish_enqueues_one_job_per_subscribed_queue(store, clock):
    assert store.subscribe("user.created", "mail") is True
    assert store.subscribe("user.created", "mail") is False  # idempotent
    store.subscribe("user.created", "crm")
    store.subscribe("order.paid", "crm")
    assert store.queues.get("mail").name == "mail"  # subscribing registers the queue
    ids = store.publish("user.created", {"id": 7}, priority=4, delay=2)
    jobs = [store.jobs.get(i) for i in ids]
    assert [j.queue for j in jobs] == ["crm", "mail"]  # queue-name order
    assert all((j.kind, j.payload, j.priority, j.run_at) == ("user.created", {"id": 7}, 4, clock() + 2000)
               for j in jobs)
    assert store.queues.subscriptions() == [("order.paid", "crm"), ("user.created", "crm"),
                                            ("user.created", "mail")]
    assert store.queues.subscriptions("order.paid") == [("order.paid", "crm")]


def test_each_queue_applies_its_own_defaults_and_policy(store):
    store.queues.create("mail", max_attempts=2, policy="short")
    store.subscribe("evt", "mail")
    store.subscribe("evt", "audit")
    first = store.publish("evt", 1, singleton_key="u1")
    second = store.publish("evt", 2, singleton_key="u1")
    assert first[1] == second[1]  # mail (short): the queued job answers
    assert first[0] != second[0]  # audit (standard): a new job each time
    assert [store.jobs.get(i).max_attempts for i in first] == [5, 2]


def test_unsubscribe_and_publish_to_nobody(store):
    store.subscribe("evt", "q")
    assert store.unsubscribe("evt", "q") is True
    assert store.unsubscribe("evt", "q") is False
    assert store.publish("evt", {"x": 1}) == []
    assert store.jobs.counts()["pending"] == 0


def test_publish_is_atomic_and_validated(store):
    store.subscribe("evt", "a")
    store.subscribe("evt", "b")
    with refused("TN1001"):
        store.publish("evt", None, id="fixed")
    with refused("TN1001"):
        store.publish("evt", None, dead_letter="b")  # valid for queue a, refused for b: nothing written
    with refused("TN1002"):
        store.publish("evt", object())
    with refused("TN1001"):
        store.publish("bad event!", None)
    assert jobs_in(store, "a") == [] and jobs_in(store, "b") == []


def test_publish_in_the_callers_transaction(store):
    store.subscribe("evt", "a")
    store.subscribe("evt", "b")
    with pytest.raises(RuntimeError):
        with store.transaction() as tx:
            store.publish("evt", 1, conn=tx.connection)
            raise RuntimeError("rollback")
    assert store.jobs.counts()["pending"] == 0
    with store.transaction() as tx:
        ids = store.publish("evt", 2, conn=tx.connection)
    assert [store.jobs.get(i).queue for i in ids] == ["a", "b"]
