"""One round trip per enqueue: on PostgreSQL one ``enqueue`` is ONE statement, the
INSERT with the queue's defaults resolved inside it (no registry read first, nothing cached). These
tests pin what that path must keep, on both engines: every default and policy resolved as the
registry resolves them, a queue changed by another process taking effect on the very next enqueue,
the outbox (``tx.jobs.enqueue``) included."""

from __future__ import annotations

import multiprocessing as mp

import psycopg
import pytest

import tenure

from ._helpers import column, jobs_in


def _update_queue(url: str, out) -> None:
    """Child process: change queue ``q``'s defaults and empty queue ``p``'s policy, report any error."""
    error = None
    try:
        s = tenure.connect(url)
        try:
            s.queues.update("q", max_attempts=7, timeout=3, retention=20, dead_letter="q.dead")
            s.queues.update("p", policy="short")
        finally:
            s.close()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails with it
        error = f"{type(exc).__name__}: {exc}"
    out.put(error)


def test_a_queue_updated_in_another_process_takes_effect_on_the_next_enqueue(store, engine_url, clock):
    store.queues.create("q", max_attempts=2)
    store.queues.create("p")
    standard = [store.jobs.enqueue("k", 1, queue="p"), store.jobs.enqueue("k", 2, queue="p")]
    assert len(set(standard)) == 2  # no key under the standard policy
    assert all(store.jobs.cancel(j) for j in standard)  # settled: the policy may change
    before = store.jobs.enqueue("k", None, queue="q")
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    p = ctx.Process(target=_update_queue, args=(engine_url, out))
    p.start()
    assert out.get(timeout=60) is None
    p.join(timeout=30)
    after = store.jobs.enqueue("k", None, queue="q")
    assert (store.jobs.get(before).max_attempts, store.jobs.get(before).timeout_ms) == (2, None)
    job = store.jobs.get(after)
    assert (job.max_attempts, job.timeout_ms, job.dead_letter) == (7, 3000, "q.dead")
    assert column(store, after, "keep_until") == clock() + 20_000
    # The new policy holds at once: a second job without a key collides on the queue-wide key.
    short = store.jobs.enqueue("k", 3, queue="p")
    assert (column(store, short, "policy"), column(store, short, "singleton_key")) == ("short", "")
    assert store.jobs.enqueue("other", 4, queue="p") == short


def test_one_enqueue_resolves_every_default_and_policy_as_the_registry_does(store, clock):
    store.queues.create(
        "q",
        max_attempts=3,
        timeout=30,
        retry_delay=4,
        retry_backoff=True,
        retry_delay_max=9,
        retention=60,
        delete_after=120,
        dead_letter="q.dlq",
    )
    one = store.jobs.enqueue("k", None, queue="q", delay=10, tags=["a"], meta={"m": 1}, priority=4)
    (many,) = store.jobs.enqueue_many(
        [{"kind": "k", "queue": "q", "delay": 10, "tags": ["a"], "meta": {"m": 1}, "priority": 4}]
    )
    cols = (
        "max_attempts, timeout_ms, retry_delay_ms, retry_backoff, retry_delay_max_ms, keep_until, "
        "delete_after_ms, dead_letter, policy, singleton_key, singleton_on, priority, tags, meta, run_at"
    )
    assert [column(store, one, c) for c in cols.split(", ")] == [
        column(store, many, c) for c in cols.split(", ")
    ]
    assert column(store, one, "keep_until") == clock() + 70_000
    assert (column(store, one, "retry_backoff"), column(store, one, "max_attempts")) == (1, 3)

    # Throttling: the bucket is rounded on the statement's clock; a second enqueue in the bucket
    # answers the first job.
    t1 = store.jobs.enqueue("k", 1, queue="t", singleton_for=60)
    assert column(store, t1, "singleton_on") == clock() - clock() % 60_000
    assert store.jobs.enqueue("k", 2, queue="t", singleton_for=60) == t1
    clock.advance(60_000)
    assert store.jobs.enqueue("k", 3, queue="t", singleton_for=60) != t1

    # A queue without those defaults: the built-ins (max_attempts 5, nothing else).
    store.queues.create("bare", delete_after=1)
    bare = store.jobs.get(store.jobs.enqueue("k", None, queue="bare"))
    assert (bare.dead_letter, bare.max_attempts, bare.timeout_ms) == (None, 5, None)
    assert (column(store, bare.id, "keep_until"), column(store, bare.id, "delete_after_ms")) == (None, 1000)

    # An exclusive queue: one live job of the queue-wide key; the duplicate answers it.
    store.queues.create("x", policy="exclusive")
    x = store.jobs.enqueue("k", 1, queue="x")
    assert store.jobs.enqueue("k", 2, queue="x") == x
    assert store.jobs.enqueue("k", 3, queue="x", id=x) == x
    assert len(jobs_in(store, "x")) == 1


def test_outbox_enqueue_resolves_the_queue_defaults_and_rolls_back_with_the_transaction(store):
    store.queues.create("o", max_attempts=2, policy="short")
    with store.transaction() as tx:
        a = tx.jobs.enqueue("k", 1, queue="o")
        assert tx.jobs.enqueue("k", 2, queue="o") == a
    assert (store.jobs.get(a).max_attempts, column(store, a, "policy")) == (2, "short")
    with pytest.raises(RuntimeError), store.transaction() as tx:
        b = tx.jobs.enqueue("k", 3, queue="fresh")
        raise RuntimeError("roll back")
    assert store.jobs.get(b) is None


@pytest.fixture
def pg_statements(monkeypatch):
    """Every statement text a psycopg cursor executes, in order (a spy: they still run). A
    cursor's, so a statement run on a connection's reused cursor is seen too."""
    seen: list[str] = []
    real = psycopg.Cursor.execute

    def spy(self, query, *args, **kwargs):
        seen.append(str(query))
        return real(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", spy)
    return seen


def test_one_enqueue_is_one_statement_on_postgres(store, pg_statements):
    if store.dialect != "postgres":
        pytest.skip("the in-statement resolution is PostgreSQL's (a SQLite call costs microseconds)")
    store.queues.create("q", max_attempts=2, retention=60)
    store.jobs.enqueue("k", None, queue="q")  # the pool's first connection is checked once
    pg_statements.clear()
    jid = store.jobs.enqueue("k", None, queue="q", singleton_for=5)
    assert len(pg_statements) == 1 and "INSERT INTO tenure_jobs" in pg_statements[0], pg_statements
    assert store.jobs.get(jid).max_attempts == 2
    pg_statements.clear()
    with store.transaction() as tx:
        tx.jobs.enqueue("k", None, queue="q")
    assert sum("INSERT INTO tenure_jobs" in s for s in pg_statements) == 1
    assert not any("FROM tenure_queues" in s and "INSERT" not in s for s in pg_statements), pg_statements
