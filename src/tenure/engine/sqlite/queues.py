"""SQLite queries for the queue registry, policies, dead letters and fan-out (mixed into the session).

The semantics (which option wins, what a duplicate answers, what redrive moves) live in
:mod:`tenure.queues`; each method here is one statement, or a few inside one write transaction.
Times are epoch ms; ``now`` None means the wall clock.
"""

from __future__ import annotations

import json
import time
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

QUEUE_COLS = ", ".join(QUEUE_COLUMNS)
#: Options a caller may set on a queue (column names; whitelisted before any SQL is built).
QUEUE_SETTINGS = ("policy", "max_attempts", "retry_delay_ms", "retry_backoff", "retry_delay_max_ms", "timeout_ms",
                  "retention_ms", "delete_after_ms", "dead_letter", "concurrency_limit", "group_limit",
                  "rate_limit", "rate_period_ms", "group_rate_limit", "group_rate_period_ms", "fairness",
                  "group_weights")
LIVE = "('pending', 'leased', 'failed')"
#: Columns whose change recomputes the queue's rate windows.
RATE_SETTINGS = frozenset({"rate_limit", "rate_period_ms", "group_rate_limit", "group_rate_period_ms"})

QUEUE_GET = f"SELECT {QUEUE_COLS} FROM tenure_queues WHERE name = ?"
QUEUE_LIST = f"SELECT {QUEUE_COLS} FROM tenure_queues ORDER BY name"
QUEUE_DEFAULTS = f"SELECT {QUEUE_COLS} FROM tenure_queues WHERE name IN (SELECT value FROM json_each(?))"
QUEUE_INSERT = f"""
INSERT INTO tenure_queues (name, created_at, updated_at) VALUES (:name, :now, :now)
ON CONFLICT (name) DO NOTHING RETURNING {QUEUE_COLS}
"""
# A policy may change only while the queue holds no live job: live rows carry the policy they
# were enqueued under, and the claim must not see two policies for one key.
QUEUE_UPDATE = """
UPDATE tenure_queues SET {assignments}, updated_at = :now
WHERE name = :name AND (:policy IS NULL OR policy = :policy OR NOT EXISTS (
  SELECT 1 FROM tenure_jobs WHERE queue = :name AND state IN {live}))
RETURNING {cols}
"""
QUEUE_PAUSE = f"UPDATE tenure_queues SET paused = :paused, updated_at = :now WHERE name = :name RETURNING {QUEUE_COLS}"
QUEUE_LIVE = f"SELECT count(*) FROM tenure_jobs WHERE queue = ? AND state IN {LIVE}"
QUEUE_DELETE_CHECKPOINTS = """
DELETE FROM tenure_checkpoints WHERE run_id IN (SELECT id FROM tenure_jobs WHERE queue = ?)"""
QUEUE_DELETE_JOBS = "DELETE FROM tenure_jobs WHERE queue = ?"
QUEUE_DELETE_SUBSCRIPTIONS = "DELETE FROM tenure_subscriptions WHERE queue = ?"
QUEUE_DELETE = "DELETE FROM tenure_queues WHERE name = ?"

# The job a uniqueness duplicate collided with, index by index (see migration 0004).
FIND_DUPLICATE = """
SELECT id FROM tenure_jobs INDEXED BY tenure_jobs_singleton
WHERE queue = :queue AND singleton_key = :key AND (
  (:on IS NOT NULL AND singleton_on = :on AND state <> 'cancelled')
  OR (:policy IN ('short', 'stately') AND policy IN ('short', 'stately') AND state = 'pending')
  OR (:policy = 'exclusive' AND policy = 'exclusive' AND state IN ('pending', 'failed', 'leased'))
  OR (:debounce AND kind = :kind AND debounce_ms IS NOT NULL AND state = 'pending'))
ORDER BY created_at, id LIMIT 1
"""

# Debounce: a later enqueue moves the pending debounced job of its (queue, kind, key).
DEBOUNCE_UPDATE = """
UPDATE tenure_jobs SET payload = :payload, run_at = coalesce(:run_at, :now + :delay_ms),
  keep_until = :keep_until, updated_at = :now
WHERE queue = :queue AND kind = :kind AND singleton_key = :singleton_key AND state = 'pending'
  AND debounce_ms IS NOT NULL
RETURNING id
"""
DEBOUNCE_INSERT = """
INSERT INTO tenure_jobs (id, kind, payload, state, run_at, attempts, max_attempts, lease_generation,
  created_at, updated_at, queue, priority, timeout_ms, singleton_key, singleton_on, policy, group_key,
  dead_letter, origin_id, retry_delay_ms, retry_backoff, retry_delay_max_ms, keep_until, delete_after_ms,
  last_error, debounce_ms, headers)
VALUES (:id, :kind, :payload, 'pending', coalesce(:run_at, :now + :delay_ms), 0, :max_attempts, 0,
  :now, :now, :queue, :priority, :timeout_ms, :singleton_key, :singleton_on, :policy, :group_key,
  :dead_letter, :origin_id, :retry_delay_ms, :retry_backoff, :retry_delay_max_ms, :keep_until,
  :delete_after_ms, :last_error, :debounce_ms, :headers)
ON CONFLICT DO NOTHING
RETURNING id
"""

# Dead letters: copy each newly dead job into its dead-letter queue, with that queue's defaults
# (max_attempts: the dead-letter queue's, else the dead job's own: docs/queues.md, "Dead letters"),
# in ONE statement (inside the failure's transaction). :pairs is [[dead_id, new_id], ...].
# Copies are standard-policy jobs (policies never police dead-letter delivery) that remember
# where they came from: origin_id (the dead job) and origin_queue (for redrive).
DEAD_LETTER = """
INSERT INTO tenure_jobs (id, kind, payload, state, run_at, attempts, max_attempts, lease_generation,
  created_at, updated_at, queue, priority, timeout_ms, singleton_key, policy, group_key, dead_letter,
  origin_id, origin_queue, retry_delay_ms, retry_backoff, retry_delay_max_ms, keep_until, delete_after_ms,
  last_error, headers)
SELECT m.value ->> 1, d.kind, d.payload, 'pending', :now, 0, coalesce(q.max_attempts, d.max_attempts, :max_attempts), 0,
  :now, :now, d.dead_letter, d.priority, q.timeout_ms, d.singleton_key, 'standard', d.group_key,
  CASE WHEN q.dead_letter <> d.dead_letter THEN q.dead_letter END, d.id, d.queue, q.retry_delay_ms,
  q.retry_backoff, q.retry_delay_max_ms, :now + q.retention_ms, q.delete_after_ms, d.last_error, d.headers
FROM json_each(:pairs) m JOIN tenure_jobs d ON d.id = m.value ->> 0
LEFT JOIN tenure_queues q ON q.name = d.dead_letter
WHERE d.state = 'dead' AND d.dead_letter IS NOT NULL AND d.dead_letter <> d.queue
ON CONFLICT DO NOTHING
"""

# Redrive: the dead-letter copies still waiting in a queue, oldest first.
REDRIVE_SELECT = """
SELECT id, kind, payload, origin_queue, origin_id, priority, singleton_key, group_key, created_at
FROM tenure_jobs
WHERE queue = :queue AND origin_queue IS NOT NULL AND state IN ('pending', 'failed')
  AND (:after_created IS NULL OR created_at > :after_created
       OR (created_at = :after_created AND id > :after_id))
ORDER BY created_at, id LIMIT :limit
"""
# Each redriven copy is settled as cancelled, naming the job that replaced it.
REDRIVE_SETTLE = """
UPDATE tenure_jobs SET state = 'cancelled', result = json_object('redriven_as', m.value ->> 1),
  lease_until = NULL, lease_owner = NULL, lease_token = NULL, updated_at = :now
FROM json_each(:pairs) AS m
WHERE tenure_jobs.id = m.value ->> 0 AND tenure_jobs.state IN ('pending', 'failed')
"""

SUBSCRIBE = "INSERT INTO tenure_subscriptions (event, queue) VALUES (?, ?) ON CONFLICT DO NOTHING"
REGISTER_QUEUE = """
INSERT INTO tenure_queues (name, created_at, updated_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING"""
UNSUBSCRIBE = "DELETE FROM tenure_subscriptions WHERE event = ? AND queue = ?"
SUBSCRIBERS = "SELECT queue FROM tenure_subscriptions WHERE event = ? ORDER BY queue"
SUBSCRIPTIONS = """
SELECT event, queue FROM tenure_subscriptions WHERE (:event IS NULL OR event = :event) ORDER BY event, queue"""


def _now(now: int | None) -> int:
    return time.time_ns() // 1_000_000 if now is None else now


def _job_params(j: NewJob, now: int, debounce_ms: int | None) -> dict[str, Any]:
    return {**new_job_params(j, now), "debounce_ms": debounce_ms}


class SQLiteQueuesMixin:
    """Queue-registry methods of the SQLite session (see tenure.queues)."""

    _conn: Any
    _atomic: Any  # the session's write-transaction helper

    @contextmanager
    def queue_atomic(self) -> Iterator[None]:
        """One write transaction for several statements (joins the caller's open one; never
        commits an adopted connection's)."""
        with self._atomic():
            yield

    # -- registry -------------------------------------------------------------------------------
    def queue_get(self, name: str) -> QueueRow | None:
        return queue_row(self._conn.execute(QUEUE_GET, (name,)).fetchone())

    def queue_lock_dead_letters(self) -> None:
        """Serialise changes to the dead-letter graph: a no-op here, since the caller's write
        transaction (BEGIN IMMEDIATE) already excludes every other writer."""

    def queue_defaults(self, names: Sequence[str]) -> dict[str, QueueRow]:
        """The registry rows of ``names`` that exist, by name."""
        if len(names) == 1:
            row = queue_row(self._conn.execute(QUEUE_GET, (names[0],)).fetchone())
            return {} if row is None else {row.name: row}
        return {r[0]: QueueRow(*r) for r in self._conn.execute(QUEUE_DEFAULTS, (json.dumps(list(names)),))}

    def queue_put(self, name: str, settings: dict[str, Any], now: int | None, *,
                  create: bool) -> QueuePut:
        now = _now(now)
        conn = self._conn
        with self.queue_atomic():
            if create:
                conn.execute(QUEUE_INSERT, {"name": name, "now": now}).fetchall()
            elif conn.execute(QUEUE_GET, (name,)).fetchone() is None:
                return QueuePut("missing", None)
            if not settings:
                return QueuePut("ok", queue_row(conn.execute(QUEUE_GET, (name,)).fetchone()))
            sql = QUEUE_UPDATE.format(assignments=", ".join(f"{c} = :{c}" for c in settings),
                                      live=LIVE, cols=QUEUE_COLS)
            params = {**{"policy": None}, **settings, "name": name, "now": now}
            if "retry_backoff" in settings and settings["retry_backoff"] is not None:
                params["retry_backoff"] = int(settings["retry_backoff"])
            row = queue_row(conn.execute(sql, params).fetchone())
            if row is None:
                return QueuePut("busy", queue_row(conn.execute(QUEUE_GET, (name,)).fetchone()))
            if RATE_SETTINGS & settings.keys():
                windows = conn.execute(Q.RATE_WINDOW_LIST, (name, -1)).fetchall()
                rate, group_rate = queue_rates(row)
                conn.executemany(Q.RATE_WINDOW_SAVE, [(name, *w) for w in rewindowed(windows, rate, group_rate)])
            return QueuePut("ok", row)

    def queue_rate_windows(self, name: str, limit: int) -> list[RateWindowRow]:
        return [RateWindowRow(*r) for r in self._conn.execute(Q.RATE_WINDOW_LIST, (name, limit))]

    def queue_pause(self, name: str, paused: bool, now: int | None) -> QueueRow | None:
        return queue_row(self._conn.execute(QUEUE_PAUSE, {"name": name, "paused": int(paused),
                                                          "now": _now(now)}).fetchone())

    def queue_delete(self, name: str, force: bool) -> QueueDeleted:
        """Delete the queue, its jobs (settled ones; live ones only when ``force``), their
        checkpoints and its subscriptions, in one transaction."""
        conn = self._conn
        with self.queue_atomic():
            if conn.execute(QUEUE_GET, (name,)).fetchone() is None:
                return QueueDeleted("missing", 0)
            live = conn.execute(QUEUE_LIVE, (name,)).fetchone()[0]
            if live and not force:
                return QueueDeleted("busy", live)
            conn.execute(QUEUE_DELETE_CHECKPOINTS, (name,))
            removed = conn.execute(QUEUE_DELETE_JOBS, (name,)).rowcount
            conn.execute(QUEUE_DELETE_SUBSCRIPTIONS, (name,))
            conn.execute(Q.RATE_WINDOW_DELETE, (name,))
            conn.execute(QUEUE_DELETE, (name,))
        return QueueDeleted("deleted", removed)

    # -- uniqueness -----------------------------------------------------------------------------
    def queue_find_duplicate(self, j: NewJob, debounce: bool) -> str | None:
        """The live job ``j`` collided with under its uniqueness rules, or None."""
        if j.singleton_key is None:
            return None
        row = self._conn.execute(FIND_DUPLICATE, {
            "queue": j.queue, "key": j.singleton_key, "on": j.singleton_on, "policy": j.policy,
            "debounce": 1 if debounce else 0, "kind": j.kind}).fetchone()
        return None if row is None else row[0]

    def queue_debounce(self, j: NewJob, debounce_ms: int, now: int | None) -> Inserted | None:
        """Move the pending debounced job of ``j``'s (queue, kind, key) to ``j``'s payload and
        run_at (answers its id, not inserted), else insert ``j``; None when
        another uniqueness rule refused the insert."""
        params = _job_params(j, _now(now), debounce_ms)
        conn = self._conn
        with self.queue_atomic():
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
        cur = self._conn.execute(DEAD_LETTER, {"pairs": json.dumps(list(pairs)), "now": _now(now),
                                               "max_attempts": default_max_attempts})
        return cur.rowcount

    def queue_redrive_settle(self, pairs: Sequence[tuple[str, str]], now: int | None) -> int:
        cur = self._conn.execute(REDRIVE_SETTLE, {"pairs": json.dumps(list(pairs)), "now": _now(now)})
        return cur.rowcount

    # -- fan-out --------------------------------------------------------------------------------
    def subscription_add(self, event: str, queue: str, now: int | None) -> bool:
        now = _now(now)
        with self.queue_atomic():
            added = self._conn.execute(SUBSCRIBE, (event, queue)).rowcount == 1
            self._conn.execute(REGISTER_QUEUE, (queue, now, now))
        return added

    def subscription_remove(self, event: str, queue: str) -> bool:
        return self._conn.execute(UNSUBSCRIBE, (event, queue)).rowcount == 1

    def subscription_queues(self, event: str) -> list[str]:
        return [r[0] for r in self._conn.execute(SUBSCRIBERS, (event,))]

    def subscription_list(self, event: str | None) -> list[SubscriptionRow]:
        return [SubscriptionRow(*r) for r in self._conn.execute(SUBSCRIPTIONS, {"event": event})]
