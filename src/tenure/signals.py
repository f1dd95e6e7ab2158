"""``store.signals``: durable signals to runs that wait for them (docs/workflows.md).

A signal is a JSON payload under a **key** (any text of 1 to 1024 UTF-8 bytes). Keys are
global to the store: name them after what the signal is about, usually including the run or the
business object it is for — ``f"approval:{order_id}"``. :meth:`Signals.send` stores the signal
and, in the same transaction, makes every run parked on that key (``ctx.wait_for_signal(key)``)
eligible now. Each signal is received **exactly once**: the first waiter that takes it records
the taking (``consumed_by``) in the same transaction as its checkpoint of the payload; a signal
sent before anyone waits stays stored until someone does. Several signals of one key queue up
and are received oldest first, one per wait.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from . import _validate as v

if TYPE_CHECKING:
    from .store import Store


def check_key(key: Any) -> str:
    """A signal key: non-empty text of at most 1024 UTF-8 bytes (TN1001/TN1002 otherwise)."""
    return v.text(key, "signal key", max_bytes=v.MAX_KEY_BYTES, allow_empty=False)


class Signals:
    """``store.signals``: send signals; count the ones nobody has received yet."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def send(self, key: str, payload: Any = None) -> int:
        """Store one signal of ``key`` with a JSON ``payload`` and wake the runs waiting for it,
        in one transaction. Answers the signal's id (increasing in send order). Durable at
        return: a run that begins waiting later still receives it. A bad key or a payload that is
        not JSON (or too large) is refused by code and nothing is written."""
        key = check_key(key)
        store = self._store
        text = None if payload is None else v.dump_json(payload, "signal payload", store.max_payload_bytes)
        store.jobs  # noqa: B018 - opens (migrates) the store
        with store._transaction_session() as s:
            now = store._now()
            s.signal_lock(key)
            signal_id = s.signal_insert(key, text, now).id
            woken = s.signal_wake(key, now)
        if woken:
            store._wake_local()
        return signal_id

    def pending(self, key: str) -> int:
        """How many signals of ``key`` are stored and not received by any run yet."""
        key = check_key(key)
        store = self._store
        store.jobs  # noqa: B018
        with store._session() as s:
            return s.signal_count(key)


def load_payload(text: str | None) -> Any:
    """A stored payload back as a value."""
    return None if text is None else json.loads(text)
