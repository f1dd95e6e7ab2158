"""PostgreSQL queries for the queue registry, policies, dead letters and fan-out (mixed into the session).

The same methods as :mod:`tenure.engine.sqlite.queues`, statement for statement. ``now`` None
means the database's clock (``tenure_now_ms()``, read once per statement). Uniqueness is the
partial unique indexes of migration 0004 with ``ON CONFLICT DO NOTHING``: of two transactions
inserting one key at once, the second waits for the first to commit and then writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..limited import queue_rates, rewindowed
from ..rows import (
    QUEUE_COLUMNS,
    Inserted,
    NewJob,
    QueueDeleted,
    QueuePut,
    QueueRow,
    RateWindowRow,
    SubscriptionRow,
    new_job_params,
    queue_row,
)
from . import queries as Q
from .conn import _atomic

QUEUE_COLS = ", ".join(QUEUE_COLUMNS)
#: Options a caller may set on a queue, with their SQL types (whitelisted before any SQL is built).
QUEUE_SETTINGS = {
    "policy": "text", "max_attempts": "int", "retry_delay_ms": "bigint", "retry_backoff": "int",
    "retry_delay_max_ms": "bigint", "timeout_ms": "bigint", "retention_ms": "bigint", "delete_after_ms": "bigint",
    "dead_letter": "text", "concurrency_limit": "int", "group_limit": "int",
    "rate_limit": "int", "rate_period_ms": "bigint", "group_rate_limit": "int", "group_rate_period_ms": "bigint",
    "fairness": "text", "group_weights": "text",
}
LIVE = "('pending', 'leased', 'failed')"
#: Columns whose change recomputes the queue's rate windows.
RATE_SETTINGS = frozenset({"rate_limit", "rate_period_ms", "group_rate_limit", "group_rate_period_ms"})
CLOCK = "clock AS (SELECT coalesce(%(now)s::bigint, tenure_now_ms()) AS ms)"
NOW = "(SELECT ms FROM clock)"

QUEUE_GET = f"SELECT {QUEUE_COLS} FROM tenure_queues WHERE name = %(name)s::text"
QUEUE_LIST = f"SELECT {QUEUE_COLS} FROM tenure_queues ORDER BY name"
QUEUE_DEFAULTS = f"SELECT {QUEUE_COLS} FROM tenure_queues WHERE name = ANY(%(names)s::text[])"
QUEUE_INSERT = f"""
WITH {CLOCK}
INSERT INTO tenure_queues (name, created_at, updated_at) SELECT %(name)s::text, ms, ms FROM clock
ON CONFLICT (name) DO NOTHING
"""
# A policy may change only while the queue holds no live job: live rows carry the policy they
# were enqueued under, and the claim must not see two policies for one key.
QUEUE_UPDATE = f"""
WITH {CLOCK}
UPDATE tenure_queues SET {{assignments}}, updated_at = {NOW}
WHERE name = %(name)s::text AND (%(policy)s::text IS NULL OR policy = %(policy)s::text OR NOT EXISTS (
  SELECT 1 FROM tenure_jobs WHERE queue = %(name)s::text AND state IN {LIVE}))
RETURNING {QUEUE_COLS}
"""
QUEUE_PAUSE = f"""
WITH {CLOCK}
UPDATE tenure_queues SET paused = %(paused)s::int, updated_at = {NOW} WHERE name = %(name)s::text
RETURNING {QUEUE_COLS}
"""
QUEUE_LOCK = "SELECT name FROM tenure_queues WHERE name = %(name)s::text FOR UPDATE"
QUEUE_LIVE = f"SELECT count(*) FROM tenure_jobs WHERE queue = %(name)s::text AND state IN {LIVE}"
# Without force only settled jobs go: a job that became live after the count survives (and the
# queue's registry row with it: the caller reports "not empty").
QUEUE_DELETE = f"""
WITH doomed AS (SELECT id FROM tenure_jobs
                WHERE queue = %(name)s::text AND (%(force)s::bool OR state NOT IN {LIVE})),
checkpoints AS (DELETE FROM tenure_checkpoints WHERE run_id IN (SELECT id FROM doomed)),
jobs AS (DELETE FROM tenure_jobs WHERE id IN (SELECT id FROM doomed) RETURNING 1),
subscriptions AS (DELETE FROM tenure_subscriptions WHERE queue = %(name)s::text),
queue AS (DELETE FROM tenure_queues WHERE name = %(name)s::text)
SELECT count(*) FROM jobs
"""

# The job a uniqueness duplicate collided with, index by index (see migration 0004).
FIND_DUPLICATE = """
SELECT id FROM tenure_jobs
WHERE queue = %(queue)s::text AND singleton_key = %(key)s::text AND (
  (%(on)s::bigint IS NOT NULL AND singleton_on = %(on)s::bigint AND state <> 'cancelled')
  OR (%(policy)s::text IN ('short', 'stately') AND policy IN ('short', 'stately') AND state = 'pending')
  OR (%(policy)s::text = 'exclusive' AND policy = 'exclusive' AND state IN ('pending', 'failed', 'leased'))
  OR (%(debounce)s::bool AND kind = %(kind)s::text AND debounce_ms IS NOT NULL AND state = 'pending'))
ORDER BY created_at, id LIMIT 1
"""

# Debounce: a later enqueue moves the pending debounced job of its (queue, kind, key).
DEBOUNCE_UPDATE = f"""
WITH {CLOCK}
UPDATE tenure_jobs SET payload = %(payload)s::text,
  run_at = coalesce(%(run_at)s::bigint, {NOW} + %(delay_ms)s::bigint),
  keep_until = %(keep_until)s::bigint, updated_at = {NOW}
WHERE queue = %(queue)s::text AND kind = %(kind)s::text AND singleton_key = %(singleton_key)s::text
  AND state = 'pending' AND debounce_ms IS NOT NULL
RETURNING id
"""
DEBOUNCE_INSERT = f"""
WITH {CLOCK}
INSERT INTO tenure_jobs (id, kind, payload, state, run_at, attempts, max_attempts, lease_generation,
  created_at, updated_at, queue, priority, timeout_ms, singleton_key, singleton_on, policy, group_key,
  dead_letter, origin_id, retry_delay_ms, retry_backoff, retry_delay_max_ms, keep_until, delete_after_ms,
  last_error, debounce_ms, headers)
SELECT %(id)s::text, %(kind)s::text, %(payload)s::text, 'pending',
  coalesce(%(run_at)s::bigint, c.ms + %(delay_ms)s::bigint), 0, %(max_attempts)s::int, 0, c.ms, c.ms,
  %(queue)s::text, %(priority)s::int, %(timeout_ms)s::bigint, %(singleton_key)s::text,
  %(singleton_on)s::bigint, %(policy)s::text, %(group_key)s::text, %(dead_letter)s::text,
  %(origin_id)s::text, %(retry_delay_ms)s::bigint, %(retry_backoff)s::int, %(retry_delay_max_ms)s::bigint,
  %(keep_until)s::bigint, %(delete_after_ms)s::bigint, %(last_error)s::text, %(debounce_ms)s::bigint, %(headers)s::text
FROM clock c
ON CONFLICT DO NOTHING
RETURNING id
"""

# Dead letters: copy each newly dead job into its dead-letter queue, with that queue's defaults
# (max_attempts: the dead-letter queue's, else the dead job's own: docs/queues.md, "Dead letters"),
# in ONE statement (inside the failure's transaction). Copies are standard-policy jobs
# (policies never police dead-letter delivery) that remember where they came from: origin_id
# (the dead job) and origin_queue (for redrive).
DEAD_LETTER = f"""
WITH {CLOCK}
INSERT INTO tenure_jobs (id, kind, payload, state, run_at, attempts, max_attempts, lease_generation,
  created_at, updated_at, queue, priority, timeout_ms, singleton_key, policy, group_key, dead_letter,
  origin_id, origin_queue, retry_delay_ms, retry_backoff, retry_delay_max_ms, keep_until, delete_after_ms,
  last_error, headers)
SELECT m.copy_id, d.kind, d.payload, 'pending', c.ms, 0,
  coalesce(q.max_attempts, d.max_attempts, %(max_attempts)s::int), 0,
  c.ms, c.ms, d.dead_letter, d.priority, q.timeout_ms, d.singleton_key, 'standard', d.group_key,
  CASE WHEN q.dead_letter <> d.dead_letter THEN q.dead_letter END, d.id, d.queue, q.retry_delay_ms,
  q.retry_backoff, q.retry_delay_max_ms, c.ms + q.retention_ms, q.delete_after_ms, d.last_error, d.headers
FROM clock c, unnest(%(dead_ids)s::text[], %(copy_ids)s::text[]) AS m(dead_id, copy_id)
JOIN tenure_jobs d ON d.id = m.dead_id
LEFT JOIN tenure_queues q ON q.name = d.dead_letter
WHERE d.state = 'dead' AND d.dead_letter IS NOT NULL AND d.dead_letter <> d.queue
ON CONFLICT DO NOTHING
"""

# Redrive: the dead-letter copies still waiting in a queue, oldest first; SKIP LOCKED so a
# consumer of the dead-letter queue claiming one right now is passed, not waited for.
REDRIVE_SELECT = """
SELECT id, kind, payload, origin_queue, origin_id, priority, singleton_key, group_key, created_at
FROM tenure_jobs
WHERE queue = %(queue)s::text AND origin_queue IS NOT NULL AND state IN ('pending', 'failed')
  AND (%(after_created)s::bigint IS NULL OR (created_at, id) > (%(after_created)s::bigint, %(after_id)s::text))
ORDER BY created_at, id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED
"""
# Each redriven copy is settled as cancelled, naming the job that replaced it.
REDRIVE_SETTLE = f"""
WITH {CLOCK}
UPDATE tenure_jobs j SET state = 'cancelled', result = json_build_object('redriven_as', m.new_id)::text,
  lease_until = NULL, lease_owner = NULL, lease_token = NULL, updated_at = {NOW}
FROM unnest(%(ids)s::text[], %(new_ids)s::text[]) AS m(id, new_id)
WHERE j.id = m.id AND j.state IN ('pending', 'failed')
"""

SUBSCRIBE = """
INSERT INTO tenure_subscriptions (event, queue) VALUES (%(event)s::text, %(queue)s::text)
ON CONFLICT DO NOTHING RETURNING 1
"""
REGISTER_QUEUE = f"""
WITH {CLOCK}
INSERT INTO tenure_queues (name, created_at, updated_at) SELECT %(queue)s::text, ms, ms FROM clock
ON CONFLICT (name) DO NOTHING
"""
UNSUBSCRIBE = "DELETE FROM tenure_subscriptions WHERE event = %(event)s::text AND queue = %(queue)s::text"
SUBSCRIBERS = "SELECT queue FROM tenure_subscriptions WHERE event = %(event)s::text ORDER BY queue"
SUBSCRIPTIONS_ALL = "SELECT event, queue FROM tenure_subscriptions ORDER BY event, queue"
SUBSCRIPTIONS_OF = "SELECT event, queue FROM tenure_subscriptions WHERE event = %(event)s::text ORDER BY queue"


def _job_params(j: NewJob, now: int | None, debounce_ms: int | None) -> dict[str, Any]:
    return {**new_job_params(j, now), "debounce_ms": debounce_ms}


class PostgresQueuesMixin:
    """Queue-registry methods of the PostgreSQL session (see tenure.queues)."""

    _conn: Any

    @contextmanager
    def queue_atomic(self) -> Iterator[None]:
        """One transaction for several statements (joins the caller's open one)."""
        with _atomic(self._conn):
            yield

    # -- registry -------------------------------------------------------------------------------
    def queue_get(self, name: str) -> QueueRow | None:
        return queue_row(self._conn.execute(QUEUE_GET, {"name": name}).fetchone())

    def queue_lock_dead_letters(self) -> None:
        """Serialise changes to the dead-letter graph (held to the end of the caller's transaction),
        so two concurrent updates cannot each close half of a cycle."""
        self._conn.execute("SELECT pg_advisory_xact_lock(hashtext('tenure.dead_letters'))")

    def queue_defaults(self, names: Sequence[str]) -> dict[str, QueueRow]:
        """The registry rows of ``names`` that exist, by name."""
        if len(names) == 1:
            row = queue_row(self._conn.execute(QUEUE_GET, {"name": names[0]}).fetchone())
            return {} if row is None else {row.name: row}
        return {r[0]: QueueRow(*r) for r in self._conn.execute(QUEUE_DEFAULTS, {"names": list(names)})}

    def queue_put(self, name: str, settings: dict[str, Any], now: int | None, *,
                  create: bool) -> QueuePut:
        conn = self._conn
        with self.queue_atomic():
            if create:
                conn.execute(QUEUE_INSERT, {"name": name, "now": now})
            if not settings:
                row = queue_row(conn.execute(QUEUE_GET, {"name": name}).fetchone())
                return QueuePut("missing", None) if row is None else QueuePut("ok", row)
            sql = QUEUE_UPDATE.format(assignments=", ".join(
                f"{c} = %({c})s::{QUEUE_SETTINGS[c]}" for c in settings))
            params = {"policy": None, **settings, "name": name, "now": now}
            if settings.get("retry_backoff") is not None:
                params["retry_backoff"] = int(settings["retry_backoff"])
            if RATE_SETTINGS & settings.keys():
                conn.execute(Q.LOCK_QUEUE, {"name": name})  # no claim of it uses the windows meanwhile
            row = queue_row(conn.execute(sql, params).fetchone())
            if row is not None:
                if RATE_SETTINGS & settings.keys():
                    windows = conn.execute(Q.RATE_WINDOW_LIST, {"queue": name, "limit": None}).fetchall()
                    rate, group_rate = queue_rates(row)
                    rows = rewindowed(windows, rate, group_rate)
                    if rows:
                        conn.execute(Q.RATE_WINDOW_SAVE, {
                            "queue": name, "scopes": [r[0] for r in rows], "keys": [r[1] for r in rows],
                            "starts": [r[2] for r in rows], "blocked": [r[3] for r in rows],
                            "turns": [r[4] for r in rows]})
                return QueuePut("ok", row)
            row = queue_row(conn.execute(QUEUE_GET, {"name": name}).fetchone())
            return QueuePut("missing", None) if row is None else QueuePut("busy", row)

    def queue_rate_windows(self, name: str, limit: int) -> list[RateWindowRow]:
        return [RateWindowRow(*r) for r in self._conn.execute(Q.RATE_WINDOW_LIST, {"queue": name, "limit": limit})]

    def queue_pause(self, name: str, paused: bool, now: int | None) -> QueueRow | None:
        return queue_row(self._conn.execute(QUEUE_PAUSE, {"name": name, "paused": int(paused), "now": now}).fetchone())

    def queue_delete(self, name: str, force: bool) -> QueueDeleted:
        """Delete the queue, its jobs (live ones only when ``force``), their checkpoints and its
        subscriptions, in one transaction. The registry row is locked first, so two deletes queue up."""
        conn = self._conn
        with self.queue_atomic():
            if conn.execute(QUEUE_LOCK, {"name": name}).fetchone() is None:
                return QueueDeleted("missing", 0)
            live = conn.execute(QUEUE_LIVE, {"name": name}).fetchone()[0]
            if live and not force:
                return QueueDeleted("busy", live)
            removed = conn.execute(QUEUE_DELETE, {"name": name, "force": force}).fetchone()[0]
            conn.execute(Q.RATE_WINDOW_DELETE, {"queue": name})
        return QueueDeleted("deleted", removed)

    # -- uniqueness -----------------------------------------------------------------------------
    def queue_find_duplicate(self, j: NewJob, debounce: bool) -> str | None:
        """The live job ``j`` collided with under its uniqueness rules, or None."""
        if j.singleton_key is None:
            return None
        row = self._conn.execute(FIND_DUPLICATE, {
            "queue": j.queue, "key": j.singleton_key, "on": j.singleton_on, "policy": j.policy,
            "debounce": debounce, "kind": j.kind}).fetchone()
        return None if row is None else row[0]

    def queue_debounce(self, j: NewJob, debounce_ms: int, now: int | None) -> Inserted | None:
        """Move the pending debounced job of ``j``'s (queue, kind, key) to ``j``'s payload and
        run_at (answers its id, not inserted), else insert ``j``; None when
        another uniqueness rule (or a racing insert) refused the insert."""
        params = _job_params(j, now, debounce_ms)
        conn = self._conn
        row = conn.execute(DEBOUNCE_UPDATE, params).fetchone()
        if row is not None:
            return Inserted(row[0], False)
        if conn.execute(DEBOUNCE_INSERT, params).fetchone() is not None:
            return Inserted(j.id, True)
        return None

    # -- dead letters ---------------------------------------------------------------------------
    def queue_dead_letter(self, pairs: Sequence[tuple[str, str]], default_max_attempts: int,
                          now: int | None) -> int:
        """Copy each dead job (``pairs`` of ``(dead_id, copy_id)``) into its dead-letter queue."""
        cur = self._conn.execute(DEAD_LETTER, {
            "dead_ids": [p[0] for p in pairs], "copy_ids": [p[1] for p in pairs], "now": now,
            "max_attempts": default_max_attempts})
        return cur.rowcount

    def queue_redrive_settle(self, pairs: Sequence[tuple[str, str]], now: int | None) -> int:
        cur = self._conn.execute(REDRIVE_SETTLE, {"ids": [p[0] for p in pairs],
                                                  "new_ids": [p[1] for p in pairs], "now": now})
        return cur.rowcount

    # -- fan-out --------------------------------------------------------------------------------
    def subscription_add(self, event: str, queue: str, now: int | None) -> bool:
        with self.queue_atomic():
            added = self._conn.execute(SUBSCRIBE, {"event": event, "queue": queue}).fetchone() is not None
            self._conn.execute(REGISTER_QUEUE, {"queue": queue, "now": now})
        return added

    def subscription_remove(self, event: str, queue: str) -> bool:
        return self._conn.execute(UNSUBSCRIBE, {"event": event, "queue": queue}).rowcount == 1

    def subscription_queues(self, event: str) -> list[str]:
        return [r[0] for r in self._conn.execute(SUBSCRIBERS, {"event": event})]

    def subscription_list(self, event: str | None) -> list[SubscriptionRow]:
        if event is None:
            return [SubscriptionRow(*r) for r in self._conn.execute(SUBSCRIPTIONS_ALL)]
        return [SubscriptionRow(*r) for r in self._conn.execute(SUBSCRIPTIONS_OF, {"event": event})]
